"""One asyncio event loop per process, in a daemon thread, for all relay I/O of that process.

Relays live inside Ray actors and the publisher inside the trainer: neither owns the main
thread's loop. ucxx binds its single per-process context to one loop, so the relay machinery of
a process shares this one (created on first use, recreated after a fork).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str = "laminar-relay-loop"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop from another thread and wait for its result."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("LoopThread.run called from its own loop: await instead")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout_s)
        except TimeoutError:
            fut.cancel()
            raise

    def submit(self, coro: Coroutine[Any, Any, T]):
        """Start ``coro`` on the loop; return a ``concurrent.futures.Future``."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_SHARED: dict[int, LoopThread] = {}  # pid -> loop; the one process-wide registry, see module doc
_SHARED_LOCK = threading.Lock()


def shared_loop() -> LoopThread:
    """This process's relay loop (one per process, as ucxx requires)."""
    pid = os.getpid()
    with _SHARED_LOCK:
        lt = _SHARED.get(pid)
        if lt is None:
            lt = _SHARED[pid] = LoopThread()
        return lt
