"""Links between relays: one small interface, two transports (UCX through ucxx, plain TCP).

A :class:`Link` moves whole buffers of a size both sides know, labelled with a tag. UCX matches
messages by tag, so a receiver may post several receives ahead and a sender keep several sends
in flight (``max_inflight``); TCP is one ordered byte stream, so both sides go one message at a
time, in the same order. Everything here runs on the relay's event loop (:mod:`.loop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

SOCKET_BUFFER_BYTES = 4 << 20  # large kernel buffers keep a 1 Gb/s+ loopback stream full


class LinkError(ConnectionError):
    """A link broke: the peer died, closed it, or could not be reached."""


class Link(ABC):
    """One connection to a peer relay (or the trainer)."""

    max_inflight: int = 1
    """Sends (and receives) a pipeline may keep outstanding on this link at once."""

    @abstractmethod
    async def send(self, buf: memoryview, tag: int) -> None:
        """Send all of ``buf``; the peer receives it with the same ``tag``."""

    @abstractmethod
    async def recv(self, buf: memoryview, tag: int) -> None:
        """Fill all of ``buf`` with the message sent with ``tag``."""

    @abstractmethod
    async def close(self) -> None:
        """Close the link; a peer blocked on it sees a :class:`LinkError`."""


LinkHandler = Callable[[Link], Awaitable[None]]


class Transport(ABC):
    """Makes links: ``listen`` for peers, ``connect`` to one."""

    name: str = ""

    @abstractmethod
    async def listen(self, host: str, handler: LinkHandler, port: int = 0) -> int:
        """Serve each incoming link with ``handler`` (on ``port``, 0: any); return the port."""

    @abstractmethod
    async def connect(self, host: str, port: int) -> Link:
        """A link to the peer listening at ``host:port`` (raises :class:`LinkError`)."""

    @abstractmethod
    async def close(self) -> None:
        """Stop listening."""


async def send_obj(link: Link, obj: Any, tag: int) -> None:
    """Send a small JSON message as two messages (length, body) with tags ``tag``, ``tag + 1``."""
    body = json.dumps(obj).encode()
    await link.send(memoryview(struct.pack("<Q", len(body))), tag)
    await link.send(memoryview(body), tag + 1)


async def recv_obj(link: Link, tag: int) -> Any:
    """Receive a message sent with :func:`send_obj`."""
    head = bytearray(8)
    await link.recv(memoryview(head), tag)
    (n,) = struct.unpack("<Q", head)
    body = bytearray(n)
    await link.recv(memoryview(body), tag + 1)
    return json.loads(body)


class PacedLink(Link):
    """A link held to ``bytes_per_s``, as if each message crossed a wire of that bandwidth.

    Every send takes the next slot on the wire (``len(buf) / bytes_per_s`` seconds, one after
    the other, however many sends are in flight) and the bytes leave when their slot ends, so a
    receiver sees a chunk one serialization time after the previous one, as over a real link.
    Relays on one machine share its cores, memory bus and loopback device; pacing each link
    below what they can sustain together makes a chain of processes behave like a chain of
    machines (``laminar bench relay --link-gbps``)."""

    def __init__(self, inner: Link, bytes_per_s: float):
        self._inner, self._rate = inner, float(bytes_per_s)
        self.max_inflight = inner.max_inflight
        self._free_at = 0.0  # event-loop time when the wire is next free

    async def send(self, buf: memoryview, tag: int) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._free_at = max(now, self._free_at) + len(buf) / self._rate  # no await in between
        await asyncio.sleep(self._free_at - now)
        await self._inner.send(buf, tag)

    async def recv(self, buf: memoryview, tag: int) -> None:
        await self._inner.recv(buf, tag)

    async def close(self) -> None:
        await self._inner.close()


class PacedTransport(Transport):
    """Any transport with every link it makes or accepts paced (:class:`PacedLink`)."""

    def __init__(self, inner: Transport, bytes_per_s: float):
        if bytes_per_s <= 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s}")
        self.inner, self.bytes_per_s = inner, bytes_per_s
        self.name = inner.name

    async def listen(self, host: str, handler: LinkHandler, port: int = 0) -> int:
        async def paced(link: Link) -> None:
            await handler(PacedLink(link, self.bytes_per_s))

        return await self.inner.listen(host, paced, port)

    async def connect(self, host: str, port: int) -> Link:
        return PacedLink(await self.inner.connect(host, port), self.bytes_per_s)

    async def close(self) -> None:
        await self.inner.close()


class TcpLink(Link):
    """A blocking TCP socket driven from executor threads (a large ``recv_into`` releases the
    GIL and costs far fewer wake-ups than the event loop's non-blocking socket calls)."""

    max_inflight = 1

    def __init__(self, sock: socket.socket):
        sock.setblocking(True)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
        self._sock = sock
        self._send_lock = asyncio.Lock()
        self._recv_lock = asyncio.Lock()
        self._closed = False

    async def send(self, buf: memoryview, tag: int) -> None:
        async with self._send_lock:
            await self._run(self._sock.sendall, buf)

    async def recv(self, buf: memoryview, tag: int) -> None:
        async with self._recv_lock:
            await self._run(_recv_exact, self._sock, buf)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv
        self._sock.close()

    async def _run(self, fn, *args) -> None:
        if self._closed:
            raise LinkError("link closed")
        try:
            await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        except OSError as e:
            raise LinkError(str(e) or type(e).__name__) from e


def _recv_exact(sock: socket.socket, buf: memoryview) -> None:
    got, n = 0, len(buf)
    while got < n:
        r = sock.recv_into(buf[got:], n - got)
        if r == 0:
            raise LinkError("peer closed the link")
        got += r


class TcpTransport(Transport):
    """Plain TCP: the fallback that needs nothing beyond the standard library."""

    name = "tcp"

    def __init__(self) -> None:
        self._server: socket.socket | None = None
        self._accept_task: asyncio.Task | None = None
        self._handlers: set[asyncio.Task] = set()

    async def listen(self, host: str, handler: LinkHandler, port: int = 0) -> int:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, port))
        srv.listen(128)
        srv.setblocking(False)
        self._server = srv
        self._accept_task = asyncio.get_running_loop().create_task(self._accept(handler))
        return srv.getsockname()[1]

    async def _accept(self, handler: LinkHandler) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(self._server)
            task = loop.create_task(handler(TcpLink(sock)))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    async def connect(self, host: str, port: int) -> Link:
        loop = asyncio.get_running_loop()
        try:
            sock = await loop.run_in_executor(None, socket.create_connection, (host, port), 5.0)
        except OSError as e:
            raise LinkError(f"cannot connect to {host}:{port}: {e}") from e
        sock.settimeout(None)
        return TcpLink(sock)

    async def close(self) -> None:
        if self._accept_task is not None:
            self._accept_task.cancel()
        for task in list(self._handlers):
            task.cancel()
        if self._server is not None:
            self._server.close()
