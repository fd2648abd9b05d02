"""The UCX transport, through ucxx's asyncio API (``create_listener``, ``create_endpoint``,
``Endpoint.send/recv`` with a tag), as the paper's relays use UCX (§7).

UCX picks the fastest path it has: RDMA where the library has verbs, TCP here (the ucxx-cu12
wheel ships tcp, shared memory and cma only). ``tls`` defaults to ``tcp,self`` so relays on one
machine still talk over a network transport: shared-memory transports never notice a killed
peer (RUNTIME-NOTES), and a relay chain must. ``UCX_TLS`` in the environment wins over ``tls``.

ucxx keeps one context per process and binds it to the event loop that first uses it, so every
UCX link of a process must live on the same loop (:func:`laminar.runtime.relay.loop.shared_loop`).
"""

from __future__ import annotations

import os

from laminar.runtime.relay.transport import Link, LinkError, LinkHandler, Transport

# Sends in flight per link: with rendezvous (ucxx sets UCX_RNDV_THRESH=8192) each message costs
# a round trip before its payload moves; eight outstanding keep a 1 MiB-chunk stream at ~0.8 GiB/s
# on loopback here, against ~0.3 GiB/s one at a time.
UCX_INFLIGHT = 8


def _ucxx(tls: str):
    """Import and initialise ucxx once per process (later calls reuse the first context)."""
    os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")  # ucxx sets a variable UCX ignores
    import ucxx
    from ucxx import core

    if core._ctx is None:
        ucxx.init(options={"TLS": tls}, env_takes_precedence=True, enable_python_future=True)
    return ucxx


class UcxLink(Link):
    """A ucxx endpoint."""

    max_inflight = UCX_INFLIGHT

    def __init__(self, ep, errors: tuple[type[BaseException], ...]):
        self._ep = ep
        self._errors = errors

    async def send(self, buf: memoryview, tag: int) -> None:
        try:
            await self._ep.send(buf, tag=tag)
        except self._errors as e:
            raise LinkError(f"ucx send: {e}") from e

    async def recv(self, buf: memoryview, tag: int) -> None:
        try:
            await self._ep.recv(buf, tag=tag)
        except self._errors as e:
            raise LinkError(f"ucx recv: {e}") from e

    async def close(self) -> None:
        try:
            await self._ep.close()
        except Exception:  # closing a broken endpoint: nothing left to do
            self._ep.abort()


class UcxTransport(Transport):
    """Links over UCX; ``tls`` is the UCX transport list (``UCX_TLS``)."""

    name = "ucx"

    def __init__(self, tls: str = "tcp,self"):
        self.tls = tls
        self._listener = None

    def _errors(self, ucxx) -> tuple[type[BaseException], ...]:
        return (ucxx.exceptions.UCXError, ucxx.exceptions.UCXCanceled, OSError)

    async def listen(self, host: str, handler: LinkHandler, port: int = 0) -> int:
        ucxx = _ucxx(self.tls)
        errors = self._errors(ucxx)

        async def on_endpoint(ep) -> None:  # ucxx requires a coroutine function here
            await handler(UcxLink(ep, errors))

        self._listener = ucxx.create_listener(on_endpoint, port=port)
        return self._listener.port

    async def connect(self, host: str, port: int) -> Link:
        ucxx = _ucxx(self.tls)
        errors = self._errors(ucxx)
        try:
            ep = await ucxx.create_endpoint(host, port)
        except (*errors, TimeoutError) as e:
            raise LinkError(f"cannot connect to {host}:{port} over ucx: {e}") from e
        return UcxLink(ep, errors)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
