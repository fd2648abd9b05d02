"""The data tier (paper §3.1): prompt pool, partial-response pool, experience buffer.

Plain classes; ``laminar.runtime.cluster`` runs each as one Ray actor. Together they are the
ledger of a run: a trajectory is issued by the prompt pool, lives in the partial-response pool
while it is generated (its tokens streamed there, the basis of recovery, §7), and lands in the
experience buffer when it finishes, where the trainer consumes it exactly once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import replace
from typing import Any

from laminar.runtime.codec import CharCodec, HfCodec, make_codec, prompt_ids
from laminar.runtime.records import PromptGroup, Traj
from laminar.runtime.task import make_task


class PromptPool:
    """Seeded prompts, handed out as GRPO groups; flow control keeps generation near training.

    In laminar mode at most ``(consumed_steps + 1 + prefetch_steps) × prompts_per_step`` groups
    are handed out before the trainer consumes more (``prefetch_steps=None``: no bound, the
    caller sizes each request, as sync mode does).
    """

    def __init__(
        self,
        task: Any,
        *,
        seed: int,
        max_answer_len: int,
        samples_per_prompt: int,
        prompts_per_step: int,
        prefetch_steps: float | None,
        model_type: str,
        model_dir: str,
    ):
        self.gen = make_task(task, seed=seed, max_answer_len=max_answer_len)
        self.codec: CharCodec | HfCodec = make_codec(model_type, model_dir)
        self.n = samples_per_prompt
        self.prompts_per_step = prompts_per_step
        self.prefetch_steps = prefetch_steps
        self.consumed_steps = 0
        self.issued = 0

    def budget(self) -> int | None:
        """Groups that may still be handed out now (None: unbounded)."""
        if self.prefetch_steps is None:
            return None
        cap = math.floor((self.consumed_steps + 1 + self.prefetch_steps) * self.prompts_per_step)
        return max(0, cap - self.issued)

    def take(self, max_groups: int) -> list[PromptGroup]:
        """Up to ``max_groups`` new prompt groups, within the budget."""
        budget = self.budget()
        k = max_groups if budget is None else min(max_groups, budget)
        out = []
        for _ in range(max(0, k)):
            p = self.gen.prompt(self.issued)
            out.append(PromptGroup(p.prompt_id, tuple(prompt_ids(self.codec, p.text)), self.n))
            self.issued += 1
        return out

    def advance(self, consumed_steps: int) -> None:
        """The trainer has consumed ``consumed_steps`` global batches (opens the budget)."""
        self.consumed_steps = max(self.consumed_steps, consumed_steps)

    def issued_groups(self) -> int:
        """Groups handed out so far (prompt ids 0 .. issued-1)."""
        return self.issued


class PartialResponsePool:
    """Tokens of every in-progress trajectory, streamed by the rollouts as they are generated."""

    def __init__(self) -> None:
        self.live: dict[str, Traj] = {}
        self.done: set[str] = set()  # finished ids: a late copy from a past holder is dropped

    def update(
        self,
        fresh: list[Traj],
        deltas: list[tuple[str, int, list[int], list[float]]],
        done: list[str],
    ) -> None:
        """Register (or replace) ``fresh`` trajectories, append token ``deltas``, drop ``done``.

        A delta is (traj_id, offset, tokens, logprobs); one whose offset does not match what the
        pool holds is ignored (the next full registration repairs it).
        """
        for t in fresh:
            old = self.live.get(t.traj_id)
            if t.traj_id in self.done or (old is not None and t.migrations < old.migrations):
                continue  # a late copy from a replica that held it before: stale
            self.live[t.traj_id] = replace(t, tokens=list(t.tokens), logprobs=list(t.logprobs))
        for tid, offset, toks, lps in deltas:
            t = self.live.get(tid)
            if t is not None and len(t.tokens) == offset:
                t.tokens.extend(toks)
                t.logprobs.extend(lps)
        for tid in done:
            self.live.pop(tid, None)
            self.done.add(tid)

    def on_replica(self, replica_id: str) -> list[Traj]:
        """In-progress trajectories last held by ``replica_id`` (what a failure interrupts)."""
        return [t for t in self.live.values() if t.replica_id == replica_id]

    def pending(self) -> list[Traj]:
        """Every in-progress trajectory."""
        return list(self.live.values())


class ExperienceBuffer:
    """Completed, scored trajectories; the trainer takes whole GRPO groups, first finished first."""

    def __init__(self, samples_per_prompt: int, t0_s: float):
        self.n = samples_per_prompt
        self.t0_s = t0_s
        self.partial_groups: dict[int, list[Traj]] = {}
        self.ready: deque[list[Traj]] = deque()
        self.rows: dict[str, dict] = {}  # traj_id -> ledger row
        self.cond = asyncio.Condition()

    async def add(self, trajs: list[Traj]) -> None:
        """Store finished trajectories; a group becomes ready when all its samples are in."""
        async with self.cond:
            for t in trajs:
                if t.traj_id in self.rows:
                    raise ValueError(f"trajectory {t.traj_id} finished twice")
                self.rows[t.traj_id] = {"traj": t, "consumed_version": -1, "consumed_s": math.nan}
                group = self.partial_groups.setdefault(t.prompt_id, [])
                group.append(t)
                if len(group) == self.n:
                    del self.partial_groups[t.prompt_id]
                    self.ready.append(sorted(group, key=lambda x: x.sample_index))
            self.cond.notify_all()

    async def take(self, groups: int, consumer_version: int, step: int) -> list[list[Traj]]:
        """Wait for ``groups`` ready groups and hand them over, marked consumed (exactly once)."""
        async with self.cond:
            await self.cond.wait_for(lambda: len(self.ready) >= groups)
            out = [self.ready.popleft() for _ in range(groups)]
            now_s = time.time() - self.t0_s
            for g in out:
                for t in g:
                    row = self.rows[t.traj_id]
                    row.update(consumed_version=consumer_version, consumed_s=now_s, step=step)
            return out

    async def ready_groups(self) -> int:
        """Groups ready to be consumed now."""
        return len(self.ready)

    async def ledger(self) -> list[dict]:
        """One row per finished trajectory: the trajectory and when/with what it was consumed."""
        return list(self.rows.values())
