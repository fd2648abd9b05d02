"""Streaming a rollout's trajectories to the data tier, in batches (one actor call per flush).

In-progress tokens go to the partial-response pool every ``interval_s`` (paper §7: the pool
holds ongoing trajectories for fast recovery); finished trajectories go to the experience
buffer first and only then leave the partial pool, so at every instant a trajectory is held by
at least one of the two and none is lost between them.

A multi-turn trajectory that appended an observation (tokens that are not generated, and their
message) is sent whole at the next flush instead of as a token delta: the pool's copy always
has its observations' spans and messages with the tokens they describe, so a trajectory
recovered from it continues at the right turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from laminar.runtime.records import Traj


class PartialStreamer:
    """Batches token deltas and finished trajectories of one rollout."""

    def __init__(self, partial_pool: Any, buffer: Any, interval_s: float):
        self.partial_pool = partial_pool
        self.buffer = buffer
        self.interval_s = interval_s
        self.tracked: dict[str, Traj] = {}
        self.sent: dict[str, int] = {}  # traj_id -> tokens the pool already holds
        self.done: list[Traj] = []
        self.whole: set[str] = set()  # traj ids to send whole at the next flush
        self.lock = asyncio.Lock()
        self.closing = asyncio.Event()
        self.loop_task: asyncio.Task | None = None

    def start(self) -> None:
        self.loop_task = asyncio.create_task(self._loop())

    async def register(self, trajs: list[Traj]) -> None:
        """Send ``trajs`` whole to the pool now, then stream their new tokens.

        Awaited before their generation starts: a trajectory this replica holds is in the pool
        before it can be lost with the replica (§3.3: recovery reads the pool).
        """
        copies = [t.copy() for t in trajs]
        for t in trajs:
            self.tracked[t.traj_id] = t
            self.sent[t.traj_id] = len(t.tokens)
        await self.partial_pool.update.remote(copies, [], [])

    def changed(self, traj_id: str) -> None:
        """More than tokens changed (an observation was appended): send it whole next time."""
        if traj_id in self.tracked:
            self.whole.add(traj_id)

    def finished(self, t: Traj) -> None:
        """``t`` is complete: to the buffer at the next flush, then out of the partial pool."""
        self.tracked.pop(t.traj_id, None)
        self.sent.pop(t.traj_id, None)
        self.whole.discard(t.traj_id)
        self.done.append(t)

    def forget(self, traj_id: str) -> None:
        """Stop streaming ``traj_id`` (it moved; its new replica registers it whole)."""
        self.tracked.pop(traj_id, None)
        self.sent.pop(traj_id, None)
        self.whole.discard(traj_id)

    async def flush(self) -> None:
        """Send what changed since the last flush."""
        async with self.lock:
            deltas, whole = [], []
            for tid, t in self.tracked.items():
                n, k = len(t.tokens), self.sent[tid]
                if tid in self.whole:
                    whole.append(t.copy())
                    self.sent[tid] = n
                elif n > k:
                    deltas.append((tid, k, t.tokens[k:n], t.logprobs[k:n]))
                    self.sent[tid] = n
            self.whole.clear()
            done, self.done = self.done, []
            if done:
                await self.buffer.add.remote(done)  # buffer first: never held by neither
            if deltas or done or whole:
                await self.partial_pool.update.remote(whole, deltas, [t.traj_id for t in done])

    async def _loop(self) -> None:
        while not self.closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.closing.wait(), self.interval_s)
            await self.flush()

    async def close(self) -> None:
        """Stop the periodic flush and send the rest.

        The loop is never cancelled: a flush cut between the buffer's ``add`` and the pool's
        ``update`` would leave a finished trajectory counted as in progress too.
        """
        self.closing.set()
        if self.loop_task is not None:
            await self.loop_task
            self.loop_task = None
        await self.flush()
