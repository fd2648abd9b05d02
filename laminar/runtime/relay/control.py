"""The relays' control channel: one JSON object per line over TCP, whatever the data transport.

Heartbeats, "broadcast this version", "what do you hold" and "stop" are a few hundred bytes;
plain TCP carries them everywhere and a dead relay shows at once (its port refuses or its
socket closes), where a UCX shared-memory endpoint would never notice (RUNTIME-NOTES).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict], Awaitable[dict]]


class ControlError(ConnectionError):
    """A control request failed: the relay is unreachable, closed the connection or timed out."""


async def serve_control(host: str, handler: Handler, port: int = 0) -> asyncio.Server:
    """Answer each request line with ``handler(request)``; errors return ``{"error": ...}``."""

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = await handler(json.loads(line))
                except Exception as e:  # the caller gets the reason; the relay keeps serving
                    reply = {"error": f"{type(e).__name__}: {e}"}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(on_client, host, port, limit=1 << 24)


class ControlClient:
    """A blocking client with one persistent connection (reopened after a failure)."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 5.0):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._sock: socket.socket | None = None
        self._file = None

    def request(self, obj: dict, *, timeout_s: float | None = None) -> dict:
        """Send one request and return the reply; raise :class:`ControlError` on any failure."""
        self.send(obj, timeout_s=timeout_s)
        return self.receive(timeout_s=timeout_s)

    def send(self, obj: dict, *, timeout_s: float | None = None) -> None:
        """Send a request without waiting for its reply (read it later with :meth:`receive`)."""
        try:
            if self._sock is None:
                self._sock = socket.create_connection((self.host, self.port), self.timeout_s)
                self._file = self._sock.makefile("rb")
            self._sock.settimeout(timeout_s if timeout_s is not None else self.timeout_s)
            self._sock.sendall(json.dumps(obj).encode() + b"\n")
        except OSError as e:
            self.close()
            raise ControlError(f"{self.host}:{self.port}: {type(e).__name__}: {e}") from e

    def receive(self, *, timeout_s: float | None = None) -> dict:
        """The reply to the oldest request sent and not yet answered."""
        if self._sock is None:
            raise ControlError(f"{self.host}:{self.port}: no request in flight")
        try:
            self._sock.settimeout(timeout_s if timeout_s is not None else self.timeout_s)
            line = self._file.readline()
            if not line:
                raise ConnectionError("relay closed the control connection")
            reply = json.loads(line)
        except (OSError, ValueError) as e:
            self.close()
            raise ControlError(f"{self.host}:{self.port}: {type(e).__name__}: {e}") from e
        if "error" in reply:
            raise RuntimeError(f"relay at {self.host}:{self.port}: {reply['error']}")
        return reply

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._file.close()
                self._sock.close()
            finally:
                self._sock = self._file = None


async def request_async(host: str, port: int, obj: dict, timeout_s: float) -> dict[str, Any]:
    """One request on a fresh connection, from inside an event loop."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        try:
            writer.write(json.dumps(obj).encode() + b"\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout_s)
        finally:
            writer.close()
    except (OSError, TimeoutError) as e:
        raise ControlError(f"{host}:{port}: {type(e).__name__}: {e}") from e
    if not line:
        raise ControlError(f"{host}:{port}: closed without a reply")
    return json.loads(line)
