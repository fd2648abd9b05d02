"""Measure a link's α and β (App. D.1) over the same transport and code path the chain uses.

α (seconds per message) is half the round trip of a small message; β (seconds per byte) comes
from streaming ``nbytes`` in chunks with the relay's window of sends in flight:
β = (t − α) / nbytes, the best of ``rounds``. A relay answers a probe on its data port.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import numpy as np

from laminar.runtime.relay.stream import CHUNK, HEADER, Layout
from laminar.runtime.relay.transport import Link, Transport, send_obj

PING, PONG = 11, 12


async def answer_probe(link: Link, header: dict) -> None:
    """The relay side: echo pings, then swallow ``rounds`` streams, acknowledging each."""
    small = memoryview(bytearray(8))
    for _ in range(int(header["pings"])):
        await link.recv(small, PING)
        await link.send(small, PONG)
    layout = Layout(int(header["nbytes"]), int(header["chunk_bytes"]))
    scratch = np.ones(layout.nbytes, np.uint8)  # faulted in now, as a relay's spare file is
    view = memoryview(scratch)
    for _ in range(int(header["rounds"])):
        await _recv_all(link, view, layout)
        await link.send(small, PONG)


async def _recv_all(link: Link, view: memoryview, layout: Layout) -> None:
    window = max(1, link.max_inflight)
    posted: dict[int, asyncio.Task] = {}
    for j in range(layout.k):
        while len(posted) < window and j + len(posted) < layout.k:
            i = j + len(posted)
            lo, hi = layout.span(i)
            posted[i] = asyncio.create_task(link.recv(view[lo:hi], CHUNK + i))
        await posted.pop(j)


async def measure_link(
    transport: Transport,
    host: str,
    port: int,
    *,
    nbytes: int,
    chunk_bytes: int,
    pings: int = 200,
    rounds: int = 3,
) -> dict:
    """α and β of the link to the relay at ``host:port``."""
    link = await transport.connect(host, port)
    try:
        await send_obj(
            link,
            {
                "probe": True,
                "pings": pings,
                "nbytes": nbytes,
                "chunk_bytes": chunk_bytes,
                "rounds": rounds,
            },
            HEADER,
        )
        small = memoryview(bytearray(8))
        rtts = []
        for _ in range(pings):
            t0 = time.perf_counter()
            await link.send(small, PING)
            await link.recv(small, PONG)
            rtts.append(time.perf_counter() - t0)
        alpha_s = statistics.median(rtts) / 2
        layout = Layout(nbytes, chunk_bytes)
        data = memoryview(np.ones(nbytes, np.uint8))
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            await _send_all(link, data, layout)
            await link.recv(small, PONG)
            times.append(time.perf_counter() - t0)
        beta = max(min(times) - 2 * alpha_s, 1e-12) / nbytes  # minus the PONG's way back too
        return {
            "alpha_s": alpha_s,
            "beta_s_per_byte": beta,
            "stream_s": times,
            "probe_nbytes": nbytes,
            "probe_chunk_bytes": chunk_bytes,
        }
    finally:
        await link.close()


async def _send_all(link: Link, data: memoryview, layout: Layout) -> None:
    inflight: list[asyncio.Task] = []
    for j in range(layout.k):
        lo, hi = layout.span(j)
        inflight.append(asyncio.create_task(link.send(data[lo:hi], CHUNK + j)))
        if len(inflight) >= max(1, link.max_inflight):
            await inflight.pop(0)
    await asyncio.gather(*inflight)
