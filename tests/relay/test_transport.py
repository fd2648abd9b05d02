"""Both transports move tagged buffers between two endpoints, and a closed link fails fast."""

from __future__ import annotations

import asyncio

import pytest

from laminar.runtime.relay.loop import shared_loop
from laminar.runtime.relay.transport import LinkError, recv_obj, send_obj
from laminar.runtime.relay.transports import make_transport


async def _echo_roundtrip(kind: str) -> None:
    server, client = make_transport(kind), make_transport(kind)
    got: asyncio.Queue = asyncio.Queue()

    async def handler(link):
        obj = await recv_obj(link, 1)
        buf = bytearray(obj["n"])
        await link.recv(memoryview(buf), 10)
        await got.put((obj, bytes(buf)))
        await send_obj(link, {"ok": True}, 3)
        try:
            await link.recv(memoryview(bytearray(8)), 10)  # the peer closes instead
            await got.put("received")
        except LinkError:
            await got.put("closed")

    port = await server.listen("127.0.0.1", handler)
    link = await client.connect("127.0.0.1", port)
    payload = bytes(range(256)) * 1000
    await send_obj(link, {"n": len(payload)}, 1)
    await link.send(memoryview(payload), 10)
    assert await recv_obj(link, 3) == {"ok": True}
    obj, data = await asyncio.wait_for(got.get(), 10)
    assert obj == {"n": len(payload)} and data == payload
    await link.close()
    assert await asyncio.wait_for(got.get(), 10) == "closed"
    await server.close()


@pytest.mark.parametrize("kind", ["tcp", "ucx"])
def test_roundtrip_and_close(kind):
    shared_loop().run(_echo_roundtrip(kind), 30)


def test_unknown_transport_and_refused_connect():
    with pytest.raises(ValueError, match="unknown relay transport"):
        make_transport("carrier-pigeon")

    async def refused():
        with pytest.raises(LinkError):
            await make_transport("tcp").connect("127.0.0.1", 1)

    shared_loop().run(refused(), 10)


async def _paced_transfer(kind: str, rate: float, chunks: int, chunk_bytes: int) -> float:
    server = make_transport(kind, link_bytes_per_s=rate)
    client = make_transport(kind, link_bytes_per_s=rate)
    got: asyncio.Queue = asyncio.Queue()

    async def handler(link):
        bufs = [bytearray(chunk_bytes) for _ in range(chunks)]
        await asyncio.gather(*(link.recv(memoryview(b), 100 + j) for j, b in enumerate(bufs)))
        await got.put(b"".join(bufs))

    port = await server.listen("127.0.0.1", handler)
    link = await client.connect("127.0.0.1", port)
    payload = bytes(range(256)) * (chunks * chunk_bytes // 256)
    t0 = asyncio.get_running_loop().time()
    # all sends in flight at once: the wire still takes them one after the other
    await asyncio.gather(
        *(
            link.send(memoryview(payload)[j * chunk_bytes : (j + 1) * chunk_bytes], 100 + j)
            for j in range(chunks)
        )
    )
    assert await asyncio.wait_for(got.get(), 30) == payload
    elapsed = asyncio.get_running_loop().time() - t0
    await link.close()
    await server.close()
    return elapsed


@pytest.mark.parametrize("kind", ["tcp", "ucx"])
def test_a_paced_link_holds_its_bandwidth_however_many_sends_are_in_flight(kind):
    rate, chunks, chunk_bytes = 20e6, 8, 1 << 19  # 4 MiB at 20 MB/s: at least 0.21 s
    elapsed = shared_loop().run(_paced_transfer(kind, rate, chunks, chunk_bytes), 60)
    assert elapsed >= chunks * chunk_bytes / rate * 0.99
    assert elapsed < 10  # paced, not stuck
    with pytest.raises(ValueError, match="link_bytes_per_s"):
        make_transport(kind, link_bytes_per_s=-1)
