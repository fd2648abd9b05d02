"""The engine progress watchdog of a rollout: an engine that died or hangs while its actor lives.

A rollout actor that dies is seen by the manager at once (its snapshot call fails). An engine
that dies under a live actor (vLLM's EngineCore process killed) makes its requests raise; one
that hangs (stopped, deadlocked) produces nothing at all. Either way the rollout's next snapshot
raises :class:`EngineFailure`, which the manager treats like a dead replica: bounded by the
manager's interval plus ``stall_s``, never by ``runtime.step_timeout_s``.
"""

from __future__ import annotations

import time
from typing import Any


class EngineFailure(RuntimeError):
    """The rollout's engine died or made no progress for too long."""


class EngineWatchdog:
    """Last progress time and the first engine error of one rollout."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self.last_progress = time.monotonic()
        self.error: str | None = None

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def failed(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = f"{type(exc).__name__}: {exc}"

    def check(self, engine: Any, *, busy: bool) -> None:
        """Raise :class:`EngineFailure` if the engine is dead, or busy without progress."""
        alive = getattr(engine, "alive", None)
        if self.error is None and alive is not None and not alive():
            self.error = "engine processes gone"
        if self.error is not None:
            raise EngineFailure(self.error)
        idle_s = time.monotonic() - self.last_progress
        if busy and idle_s > self.stall_s:
            self.error = f"no token for {idle_s:.1f}s with requests running ({self.stall_s}s)"
            raise EngineFailure(self.error)
