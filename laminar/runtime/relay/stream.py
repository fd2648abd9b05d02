"""Pipelined chain broadcast of one weight version (paper §4.2, App. D) and its repair (§4.3).

One *stream* carries a version over one link, sender to receiver:

    HEADER  {version, nbytes, chunk_bytes, files, chain=[receiver, its downstream, ...], t0}
    RESUME  {start}            receiver -> sender: chunks it already holds (0 for a new version)
    CHUNK j  for j = start .. k-1, straight into the receiver's shared-memory file
    TRAILER {crc32, sha256}    of the whole version, from the source
    ACK     {committed, failed, dropped, rebuilds}   receiver -> sender, once its whole
                               sub-chain is done, so the master learns who holds the version

A relay forwards chunk j downstream as soon as it has it, while chunk j+1 arrives (the pipeline
of App. D). Its forwarder belongs to the version, not to the upstream link: if the upstream
dies, the forwarder waits, and the stream that replaces it (from a rebuilt chain, or the
trainer re-sending to a new master) resumes at ``start`` and feeds the same forwarder.
When a send or the ACK wait fails and the peer's control port does not answer, the sender asks
``laminar.policy.relay.rebuild_chain`` for the chain without it and resumes to the next relay.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import zlib
from collections import deque
from dataclasses import asdict, dataclass
from typing import Protocol

from laminar.policy.relay import Chain, rebuild_chain
from laminar.runtime.relay.control import ControlError, request_async
from laminar.runtime.relay.transport import Link, LinkError, Transport, recv_obj, send_obj

HEADER, RESUME, TRAILER, ACK = 1, 3, 5, 7  # each small message uses tag and tag + 1
CHUNK = 1 << 32  # chunk j travels with tag CHUNK + j


@dataclass(frozen=True)
class Peer:
    """Where a relay listens: data ``port`` (the transport) and ``ctrl_port`` (control, TCP)."""

    id: str
    host: str
    port: int
    ctrl_port: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Peer:
        return cls(d["id"], d["host"], int(d["port"]), int(d["ctrl_port"]))


@dataclass(frozen=True)
class Layout:
    """``nbytes`` cut into chunks of ``chunk_bytes`` (the last one shorter)."""

    nbytes: int
    chunk_bytes: int

    @property
    def k(self) -> int:
        return -(-self.nbytes // self.chunk_bytes)

    def span(self, j: int) -> tuple[int, int]:
        lo = j * self.chunk_bytes
        return lo, min(lo + self.chunk_bytes, self.nbytes)


def layout_for(nbytes: int, k: int) -> Layout:
    """The layout of ``nbytes`` in (at most) ``k`` equal chunks."""
    return Layout(nbytes, max(1, -(-nbytes // max(1, k))))


def digest(view: memoryview) -> dict:
    """CRC-32 (checked by every relay) and SHA-256 (kept in the manifest for readers)."""
    return {"crc32": zlib.crc32(view), "sha256": _sha256_hex(view)}


def _sha256_hex(view: memoryview) -> str:
    return hashlib.sha256(view).hexdigest()


def new_result() -> dict:
    """An empty broadcast outcome: who committed (id -> monotonic time), who failed, repairs."""
    return {"committed": {}, "failed": {}, "dropped": [], "rebuilds": []}


def merge(into: dict, other: dict) -> dict:
    into["committed"].update(other.get("committed", {}))
    into["failed"].update(other.get("failed", {}))
    into["dropped"] += other.get("dropped", [])
    into["rebuilds"] += other.get("rebuilds", [])
    return into


class ChunkSource(Protocol):
    """What a forwarder reads from: chunks, when each is available, and the trailer."""

    layout: Layout

    def chunk(self, j: int) -> memoryview: ...

    async def ready(self, j: int) -> None: ...

    async def trailer(self) -> dict: ...


class LocalSource:
    """A version already whole in memory (the master's inbox, the trainer's blob).

    Its checksums are computed in a worker thread while the first chunks go out."""

    def __init__(self, view: memoryview, layout: Layout):
        self.layout = layout
        self._view = view
        loop = asyncio.get_running_loop()  # two threads: both hashes release the GIL
        self._crc = loop.run_in_executor(None, zlib.crc32, view)
        self._sha = loop.run_in_executor(None, _sha256_hex, view)

    def chunk(self, j: int) -> memoryview:
        lo, hi = self.layout.span(j)
        return self._view[lo:hi]

    async def ready(self, j: int) -> None:
        return None

    async def trailer(self) -> dict:
        crc, sha = await asyncio.shield(asyncio.gather(self._crc, self._sha))
        return {"crc32": crc, "sha256": sha, "nbytes": self.layout.nbytes}


class Partial:
    """A version arriving at a relay: chunks land in order; ``done`` counts those folded into the
    running CRC; forwarders wait on :meth:`ready`."""

    def __init__(self, version: int, layout: Layout, view: memoryview, files: dict[str, str]):
        self.version, self.layout, self.view, self.files = version, layout, view, files
        self.done = 0
        self.crc = 0
        self.committed_at: float | None = None
        self.failed: str | None = None
        self.forward_task: asyncio.Task | None = None
        self.owner: tuple[asyncio.Task, Link] | None = None
        self.trailer_fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._cond = asyncio.Condition()

    def chunk(self, j: int) -> memoryview:
        lo, hi = self.layout.span(j)
        return self.view[lo:hi]

    async def ready(self, j: int) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.done > j)

    async def trailer(self) -> dict:
        return await asyncio.shield(self.trailer_fut)

    async def advance(self, j: int) -> None:
        """Chunk ``j`` (the next in order) has arrived: fold it into the CRC, wake forwarders."""
        loop = asyncio.get_running_loop()
        self.crc = await loop.run_in_executor(None, zlib.crc32, self.chunk(j), self.crc)
        async with self._cond:
            self.done = j + 1
            self._cond.notify_all()


async def receive_chunks(link: Link, part: Partial, start: int) -> None:
    """Receive chunks ``start..k-1`` into ``part``, keeping ``link.max_inflight`` posted ahead;
    the CRC of chunk j is computed while chunk j+1 arrives."""
    k, window = part.layout.k, max(1, link.max_inflight)
    posted: dict[int, asyncio.Task] = {}
    nxt = start

    def post_ahead(upto: int) -> None:
        nonlocal nxt
        while nxt < min(k, upto):
            posted[nxt] = asyncio.create_task(link.recv(part.chunk(nxt), CHUNK + nxt))
            nxt += 1

    try:
        post_ahead(start + window)
        for j in range(start, k):
            await posted.pop(j)
            post_ahead(j + 1 + window)
            await part.advance(j)
    finally:
        await _cancel_all(posted.values())


async def _cancel_all(tasks) -> None:
    tasks = list(tasks)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class ChainSender:
    """Sends versions down a chain of relays and repairs it when one dies (§4.3).

    ``my_id`` names the sender (a relay, or the trainer) in the chains it asks the policy for.
    ``chunk_delay_s`` stretches each send, for fault-injection tests only."""

    def __init__(
        self,
        my_id: str,
        transport: Transport,
        *,
        confirm_timeout_s: float = 0.3,
        chunk_delay_s: float = 0.0,
    ):
        self.my_id = my_id
        self.transport = transport
        self.confirm_timeout_s = confirm_timeout_s
        self.chunk_delay_s = chunk_delay_s
        self._idle: dict[Peer, list[Link]] = {}

    async def forward(self, source: ChunkSource, header: dict, rest: list[Peer]) -> dict:
        """Deliver ``source`` to the chain ``rest``; return the merged ACK of the relays reached."""
        result, attempts, repair = new_result(), 0, None
        while rest:
            peer, link = rest[0], None
            try:
                link = await self._checkout(peer)
                ack = await self._stream(link, source, header, rest, repair)
                self._idle.setdefault(peer, []).append(link)
                return merge(result, ack)
            except LinkError:
                await _close_quietly(link)
                t_fail = time.monotonic()
                if attempts < 2 and await self.alive(peer):
                    attempts += 1  # a broken link to a live relay: reconnect and resume
                    continue
                chain = rebuild_chain(Chain(self.my_id, tuple(p.id for p in rest)), {peer.id})
                by_id = {p.id: p for p in rest}
                rest = [by_id[i] for i in chain.relays]
                repair = {"dead": peer.id, "by": self.my_id, "t_detect": t_fail}
                result["dropped"].append(peer.id)
                result["rebuilds"].append(repair)
                attempts = 0
            except BaseException:
                await _close_quietly(link)
                raise
        return result

    async def _stream(self, link, source: ChunkSource, header, rest, repair) -> dict:
        await send_obj(link, {**header, "chain": [p.to_json() for p in rest]}, HEADER)
        start = int((await recv_obj(link, RESUME))["start"])
        if repair is not None and "t_resumed" not in repair:
            repair["t_resumed"] = time.monotonic()
            repair["rebuild_s"] = repair["t_resumed"] - repair["t_detect"]
            repair["resumed_at_chunk"] = start
        inflight: deque[asyncio.Task] = deque()
        try:
            for j in range(start, source.layout.k):
                await source.ready(j)
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
                inflight.append(asyncio.create_task(link.send(source.chunk(j), CHUNK + j)))
                if len(inflight) >= max(1, link.max_inflight):
                    await inflight.popleft()
            while inflight:
                await inflight.popleft()
        finally:
            await _cancel_all(inflight)
        await send_obj(link, await source.trailer(), TRAILER)
        return await recv_obj(link, ACK)

    async def _checkout(self, peer: Peer) -> Link:
        idle = self._idle.get(peer)
        if idle:
            return idle.pop()
        return await self.transport.connect(peer.host, peer.port)

    async def alive(self, peer: Peer) -> bool:
        """Does ``peer``'s control port answer a ping? (a killed relay refuses at once)."""
        try:
            await request_async(peer.host, peer.ctrl_port, {"op": "ping"}, self.confirm_timeout_s)
            return True
        except ControlError:
            return False

    async def close(self) -> None:
        for links in self._idle.values():
            for link in links:
                await _close_quietly(link)
        self._idle.clear()


async def _close_quietly(link: Link | None) -> None:
    if link is not None:
        with contextlib.suppress(Exception):
            await link.close()
