"""Run a relay in this process: on the process's relay loop, from plain (blocking) code.

Used by the Ray actor (:mod:`.worker`) and by the standalone relay process (:mod:`.proc`) that
tests and ``laminar bench relay`` start, one per simulated machine.
"""

from __future__ import annotations

from pathlib import Path

from laminar.runtime.relay.loop import shared_loop
from laminar.runtime.relay.node import RelayInfo, RelayNode
from laminar.runtime.relay.store import RelayStore
from laminar.runtime.relay.transports import make_transport


class RelayHost:
    """A started :class:`RelayNode` and the loop it runs on."""

    def __init__(
        self,
        relay_id: str,
        root: str | Path,
        *,
        transport: str = "tcp",
        ucx_tls: str = "tcp,self",
        host: str = "127.0.0.1",
        machine: str = "",
        keep: int = 3,
        chunk_delay_s: float = 0.0,
        link_bytes_per_s: float = 0.0,
        ports: tuple[int, int] = (0, 0),
    ):
        self.chunk_delay_s, self.link_bytes_per_s = chunk_delay_s, link_bytes_per_s
        self.loop = shared_loop()
        self.store = RelayStore(root, keep=keep)
        self.node = self.loop.run(self._make(relay_id, transport, ucx_tls, host, machine, ports))
        self.info: RelayInfo = self.node.info

    async def _make(self, relay_id, transport, ucx_tls, host, machine, ports) -> RelayNode:
        node = RelayNode(
            relay_id,
            self.store,
            make_transport(transport, ucx_tls=ucx_tls, link_bytes_per_s=self.link_bytes_per_s),
            host=host,
            machine=machine,
            chunk_delay_s=self.chunk_delay_s,
        )
        await node.start(*ports)
        return node

    def wait_stopped(self, timeout_s: float | None = None) -> bool:
        """Block until the node was stopped (by :meth:`stop` or a ``stop`` control request)."""
        try:
            self.loop.run(self.node.stopped.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    def stop(self, *, remove_store: bool = True) -> None:
        """Stop serving; by default also delete the store from shared memory."""
        if not self.node.stopped.is_set():
            self.loop.run(self.node.stop(), 30.0)
        if remove_store:
            self.store.close()
