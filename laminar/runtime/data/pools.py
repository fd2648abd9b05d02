"""The data tier (paper §3.1): prompt pool, partial-response pool, experience buffer.

Plain classes; ``laminar.runtime.run.ray_run`` runs each as one Ray actor. Together they are the
ledger of a run: a trajectory is issued by the prompt pool, lives in the partial-response pool
while it is generated (its tokens streamed there, the basis of recovery, §7), and lands in the
experience buffer when it finishes, where the trainer consumes it exactly once.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Any

from laminar.runtime.models.codec import CharCodec, HfCodec, make_codec, prompt_tokens
from laminar.runtime.records import PromptGroup, Traj
from laminar.runtime.tasks.make import make_task


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
        max_prompt_len: int | None = None,
    ):
        self.gen = make_task(task, seed=seed, max_answer_len=max_answer_len)
        self.max_prompt_len = max_prompt_len  # a longer prompt keeps its last tokens
        self.codec: CharCodec | HfCodec = make_codec(model_type, model_dir)
        self.n = samples_per_prompt
        self.prompts_per_step = prompts_per_step
        self.prefetch_steps = prefetch_steps
        self.consumed_steps = 0
        self.issued = 0
        # holder -> (prompt ids, max tokens) of its newest hand-out, which it may not have
        # registered in the partial pool yet (see :meth:`take`, :meth:`reclaim`)
        self.handed: dict[str, tuple[list[int], int]] = {}
        self.closed: set[str] = set()  # holders reclaimed (declared dead): no more hand-outs

    def budget(self) -> int | None:
        """Groups that may still be handed out now (None: unbounded)."""
        if self.prefetch_steps is None:
            return None
        cap = math.floor((self.consumed_steps + 1 + self.prefetch_steps) * self.prompts_per_step)
        return max(0, cap - self.issued)

    def take(
        self, max_groups: int, holder: str = "", max_tokens: int = 0, more: bool = False
    ) -> list[PromptGroup]:
        """Up to ``max_groups`` new prompt groups, within the budget.

        ``holder``: the rollout they are for, whose samples get ``max_tokens`` each. Its newest
        hand-out is remembered until it asks again: a rollout asks only once it has registered
        what it got in the partial pool, but it may die between this answer and that
        registration, and then only :meth:`reclaim` knows the samples were issued. A holder
        reclaimed already gets nothing (a dead rollout whose actor still runs for a moment).
        ``more``: these add to the holder's newest hand-out (the driver gives it a dead
        rollout's share of the same step before the holder has registered the first).
        """
        if holder in self.closed:
            return []
        budget = self.budget()
        k = max_groups if budget is None else min(max_groups, budget)
        out = [self.group(self.issued + i) for i in range(max(0, k))]
        self.issued += len(out)
        if holder:
            before = self.handed.get(holder, ([], 0))[0] if more else []
            self.handed[holder] = (before + [g.prompt_id for g in out], max_tokens)
        return out

    def reclaim(self, holder: str, now_s: float) -> list[Traj]:
        """The samples of ``holder``'s newest hand-out, as fresh trajectories of no version
        (-1: restarted from the prompt wherever they go, from ``now_s``), held by ``holder``;
        forgotten here. ``holder`` died: the caller keeps those it never registered, and the
        holder gets no more prompts."""
        self.closed.add(holder)
        pids, max_tokens = self.handed.pop(holder, ([], 0))
        trajs = [t for pid in pids for t in self.group(pid).trajectories(-1, max_tokens, now_s)]
        for t in trajs:
            t.replica_id = holder
        return trajs

    def advance(self, consumed_steps: int) -> None:
        """The trainer has consumed ``consumed_steps`` global batches (opens the budget)."""
        self.consumed_steps = max(self.consumed_steps, consumed_steps)

    def issued_groups(self) -> int:
        """Groups handed out so far (prompt ids 0 .. issued-1)."""
        return self.issued

    def state(self) -> dict:
        """What a resumed run needs (prompts are regenerated from the seed and the counter)."""
        return {"issued": self.issued, "consumed_steps": self.consumed_steps}

    def restore(self, state: dict) -> None:
        self.issued = int(state["issued"])
        self.consumed_steps = int(state["consumed_steps"])

    def group(self, prompt_id: int) -> PromptGroup:
        """The group of an already issued prompt (a resumed run restarts lost samples)."""
        p = self.gen.prompt(prompt_id)
        ids = prompt_tokens(self.codec, p, self.max_prompt_len)
        return PromptGroup(p.prompt_id, tuple(ids), self.n)


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
            self.live[t.traj_id] = t.copy()
        for tid, offset, toks, lps in deltas:
            t = self.live.get(tid)
            if t is not None and len(t.tokens) == offset:
                t.tokens.extend(toks)
                t.logprobs.extend(lps)
        for tid in done:
            self.live.pop(tid, None)
            self.done.add(tid)

    def unknown(self, traj_ids: list[str]) -> list[str]:
        """Which of ``traj_ids`` were never registered here (neither in progress nor done)."""
        return [tid for tid in traj_ids if tid not in self.live and tid not in self.done]

    def on_replica(self, replica_id: str) -> list[Traj]:
        """In-progress trajectories last held by ``replica_id`` (what a failure interrupts)."""
        return [t for t in self.live.values() if t.replica_id == replica_id]

    def pending(self) -> list[Traj]:
        """Every in-progress trajectory."""
        return list(self.live.values())

    def restore(self, trajs: list[Traj]) -> None:
        """A resumed run: these trajectories are in progress again (before any rollout runs)."""
        for t in trajs:
            self.live[t.traj_id] = t.copy()


class ExperienceBuffer:
    """Completed, scored trajectories; the trainer takes whole GRPO groups, first finished first."""

    def __init__(self, samples_per_prompt: int, t0_s: float):
        self.n = samples_per_prompt
        self.t0_s = t0_s
        self.partial_groups: dict[int, list[Traj]] = {}
        self.ready: deque[list[Traj]] = deque()
        self.rows: dict[str, dict] = {}  # traj_id -> ledger row
        self.duplicates: list[dict] = []  # deliveries of an id already held: dropped
        self.consumptions: list[str] = []  # traj ids, once per hand-over to a trainer step
        self.takers: dict[int, object] = {}  # step -> the take waiting for it
        self.cond = asyncio.Condition()

    async def add(self, trajs: list[Traj]) -> int:
        """Store finished trajectories; a group becomes ready when all its samples are in.

        Idempotent: a trajectory already held is dropped and recorded (a replica declared dead
        may still deliver what its adopter delivers again); returns how many were new.
        """
        added = 0
        async with self.cond:
            for t in trajs:
                if t.traj_id in self.rows:
                    self.duplicates.append(
                        {"traj_id": t.traj_id, "replica_id": t.replica_id, "at_s": self._now()}
                    )
                    continue
                self._insert(t)
                added += 1
            self.cond.notify_all()
        return added

    def _insert(self, t: Traj) -> None:
        self.rows[t.traj_id] = {"traj": t, "consumed_version": -1, "consumed_s": math.nan}
        group = self.partial_groups.setdefault(t.prompt_id, [])
        group.append(t)
        if len(group) == self.n:
            del self.partial_groups[t.prompt_id]
            self.ready.append(sorted(group, key=lambda x: x.sample_index))

    def _now(self) -> float:
        return time.time() - self.t0_s

    async def finished_ids(self, traj_ids: list[str]) -> list[str]:
        """Which of ``traj_ids`` the buffer already holds (recovery asks before re-running)."""
        return [tid for tid in traj_ids if tid in self.rows]

    async def take(self, groups: int, consumer_version: int, step: int) -> list[list[Traj]]:
        """Wait for ``groups`` ready groups and hand them over, marked consumed (exactly once).

        A trainer takes each step once, so a take for ``step`` supersedes an earlier one for
        that step or a later one: that was a dead trainer's (its call outlives it here), and
        what it took goes back first, what it waits for is cancelled (it raises).
        """
        async with self.cond:
            self._give_back(step)
            token = object()
            self.takers[step] = token
            self.cond.notify_all()
            await self.cond.wait_for(
                lambda: len(self.ready) >= groups or self.takers.get(step) is not token
            )
            if self.takers.get(step) is not token:
                raise RuntimeError(f"take for step {step} superseded (its trainer died)")
            del self.takers[step]
            out = [self.ready.popleft() for _ in range(groups)]
            now_s = self._now()
            for g in out:
                for t in g:
                    row = self.rows[t.traj_id]
                    row.update(consumed_version=consumer_version, consumed_s=now_s, step=step)
                    self.consumptions.append(t.traj_id)
            return out

    async def requeue_from(self, step: int) -> int:
        """Give back what steps ``>= step`` took, and cancel their waiting takes: their
        trainer died before finishing them. Returns how many groups went back."""
        async with self.cond:
            back = self._give_back(step)
            self.cond.notify_all()
            return back

    def _give_back(self, step: int) -> int:
        for s in [s for s in self.takers if s >= step]:
            del self.takers[s]  # a waiting take of a dead trainer: it raises when it wakes
        back: dict[int, list[Traj]] = {}
        for row in self.rows.values():
            if row["consumed_version"] >= 0 and row.get("step", -1) >= step:
                t = row["traj"]
                back.setdefault(t.prompt_id, []).append(t)
                self.consumptions.remove(t.traj_id)
                row.update(consumed_version=-1, consumed_s=math.nan)
                row.pop("step", None)
        order = sorted(back, key=lambda pid: min(t.gen_end_s for t in back[pid]))
        for pid in reversed(order):  # to the front, in the order they had
            self.ready.appendleft(sorted(back[pid], key=lambda x: x.sample_index))
        return len(back)

    async def state(self) -> dict:
        """The ledger rows (finished trajectories, consumed or not), for a resumed run."""
        return {"rows": [dict(r) for r in self.rows.values()], "duplicates": self.duplicates}

    async def restore(self, state: dict) -> None:
        """A resumed run: rows back, consumed ones stay consumed, the rest become ready again."""
        async with self.cond:
            for row in state["rows"]:
                t = row["traj"]
                if row["consumed_version"] >= 0:
                    self.rows[t.traj_id] = dict(row)
                    self.consumptions.append(t.traj_id)
                else:
                    self._insert(t)
            self.duplicates.extend(state.get("duplicates", []))
            self.cond.notify_all()

    async def delivery_report(self) -> dict:
        """Duplicate deliveries dropped, and trajectories handed to the trainer more than once."""
        seen: dict[str, int] = {}
        for tid in self.consumptions:
            seen[tid] = seen.get(tid, 0) + 1
        twice = sorted(tid for tid, k in seen.items() if k > 1)
        return {"duplicate_deliveries": list(self.duplicates), "consumed_twice": twice}

    async def ready_groups(self) -> int:
        """Groups ready to be consumed now."""
        return len(self.ready)

    async def ledger(self) -> list[dict]:
        """One row per finished trajectory: the trajectory and when/with what it was consumed."""
        return list(self.rows.values())
