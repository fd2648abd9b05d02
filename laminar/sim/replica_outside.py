"""A replica seen from outside: what the rollout manager, the systems and the fault injector
read from a :class:`~laminar.sim.replica.Replica` or do to it (kept apart from its mechanism).

Whoever changes a replica from outside first calls :meth:`sync` to bring its counters to the
present, changes it, then calls :meth:`wake` so the decoder re-plans it.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from laminar.policy.repack import ReplicaState, StepCost, TrajectoryState
from laminar.sim.decode import kv_integral, steps_within
from laminar.sim.pools import Trajectory


class ReplicaOutside:
    """Mixed into :class:`~laminar.sim.replica.Replica`; uses its state and mechanism."""

    # The state it uses, declared for type checkers and for mypyc (``laminar.native``),
    # which compiles a class's attributes to typed slots; set by ``Replica.__init__``.
    env: Any
    cluster: Any
    decoder: Any
    rid: str
    version: int
    capacity: int
    max_batch: int
    running: dict[int, Trajectory]  # by admission seq
    heap: list[int]  # finish step << SEQ_BITS | seq (``laminar.sim.replica``)
    waiting: deque[Trajectory]
    away: dict[int, Trajectory]  # waiting on their environment (``laminar.sim.turns``)
    back: Any
    steps: int
    kv: int
    seg_t0: float
    seg_end: float
    seg_a: float
    seg_c: float
    seg_n: int
    seg_done: int
    seg_b: int
    seg_kv0: int
    busy_until: float
    in_segment: bool
    _wake_pending: bool
    kv_token_s: float
    idle_s: float
    idle_since: float | None
    decoded_tokens: int

    def _apply(self, n: int) -> None:
        raise NotImplementedError  # ``Replica._apply``

    def _steps_by(self, now: float) -> int:
        raise NotImplementedError  # ``Replica._steps_by``

    def sync(self) -> None:
        """Bring the step counter and KV to the present (whole steps only)."""
        self._apply(self._steps_by(self.env.now))

    def wake(self) -> None:
        """Make the decoder re-plan it after an outside change (no-op when not decoding)."""
        if self.in_segment:
            if not self._wake_pending:
                self._wake_pending = True
                self.decoder.wake(self)
        elif self.back is not None:  # idle, holding only trajectories away: look again
            back, self.back = self.back, None
            back.succeed()

    def generated_now(self, t: Trajectory, steps: int) -> int:
        """Tokens ``t`` has generated when the step counter reads ``steps``."""
        if t.heap_seq == -1:
            return t.generated
        return t.gen_at_admit + steps - t.admit_step

    def trajectories(self) -> list[Trajectory]:
        """Unfinished trajectories held here: running (admission order), waiting, then those
        waiting on their environment."""
        if self.away:
            return [*self.running.values(), *self.waiting, *self.away.values()]
        return [*self.running.values(), *self.waiting]

    def kv_now(self) -> int:
        """KV tokens in use now, without changing any state."""
        return self.kv_at(self.env.now)

    def kv_at(self, now: float) -> int:
        """KV tokens in use at ``now`` (the present, read once by the caller)."""
        if not self.in_segment or now <= self.seg_t0:
            return self.kv  # nothing decoded since the last applied step
        # ``_steps_by``, inlined (asked for every replica at every repack check)
        n = steps_within(now - self.seg_t0, self.seg_a, self.seg_c)
        if n > self.seg_n:
            n = self.seg_n
        return self.kv + (n - self.seg_done) * self.seg_b

    def snapshot(
        self,
        kv_prev_tokens: int,
        step_cost: StepCost | None = None,
        max_step_slowdown: float = math.inf,
        kv_tokens: int | None = None,
    ) -> ReplicaState:
        """What the rollout manager sees at a repack check (``laminar.policy.repack``), with
        the step-cost model and the slowdown bound a destination honours (§8.4).
        ``kv_tokens``: :meth:`kv_at` now, when the caller has just asked it (saves solving
        for the step again)."""
        if kv_tokens is None:
            ahead = self._steps_by(self.env.now) - self.seg_done  # steps not yet applied
        else:  # kv_at = kv + ahead * seg_b
            ahead = (kv_tokens - self.kv) // self.seg_b if kv_tokens != self.kv else 0
        steps = self.steps + ahead
        # ``TrajectoryState(sid, kv)`` without its Python-level constructor (a named tuple):
        # ~150 K of them in the 1024-GPU headline
        new, ts = tuple.__new__, TrajectoryState
        trajs = [
            new(ts, (t.sid, t.prompt_len + t.gen_at_admit + steps - t.admit_step))
            for t in self.running.values()
        ]
        trajs += [new(ts, (t.sid, t.prompt_len + t.generated)) for t in self.waiting]
        if self.away:  # their KV is freed; what they need back on return
            trajs += [new(ts, (t.sid, t.prompt_len + t.generated)) for t in self.away.values()]
        return ReplicaState(
            self.rid,
            self.version,
            self.capacity,
            self.kv + ahead * self.seg_b,
            kv_prev_tokens,
            self.max_batch,
            tuple(trajs),
            step_cost,
            max_step_slowdown,
        )

    def detach_all(self) -> list[Trajectory]:
        """Take every unfinished trajectory away (a repack source); call :meth:`wake` after."""
        self.sync()
        out = self.trajectories()
        for t in out:
            t.generated = self.generated_now(t, self.steps)
            t.heap_seq = -1
        self.running.clear()
        self.waiting.clear()
        self.away.clear()  # their calls run on: they return to wherever they go
        self.heap.clear()
        self.kv = 0
        self.busy_until = min(self.busy_until, self.env.now)  # its prefill is abandoned
        return out

    def requeue_running(self) -> list[Trajectory]:
        """Drop the KV of every running trajectory and queue it, first, for re-prefill (its
        tokens are kept); returns them. For systems that interrupt in-flight trajectories at a
        weight update (partial rollout); call :meth:`wake` after."""
        self.sync()
        out = list(self.running.values())
        for t in out:
            t.generated = self.generated_now(t, self.steps)
            t.heap_seq = -1
        self.running.clear()
        self.heap.clear()
        self.kv = 0
        self.waiting.extendleft(reversed(out))
        return out

    def attach(self, trajs: list[Trajectory]) -> None:
        """Receive moved trajectories (a repack destination); call :meth:`wake` after."""
        self.sync()
        now = self.env.now
        for t in trajs:
            t.moves += 1
            t.replica = self.rid
            s = t.turn_state
            if s is not None and s.back_s > now:  # still waiting on its environment
                self.away[t.tid] = t
            else:
                self.waiting.append(t)

    def stats_at(self) -> tuple[float, float, int]:
        """(KV token-seconds, idle seconds, decoded tokens) up to now, without changing state."""
        n = self._steps_by(self.env.now)
        a, c, kv0, b = self.seg_a, self.seg_c, self.seg_kv0, self.seg_b
        extra = kv_integral(n, a, c, kv0, b) - kv_integral(self.seg_done, a, c, kv0, b)
        idle = self.idle_s
        if self.idle_since is not None:
            idle += self.env.now - self.idle_since
        return self.kv_token_s + extra, idle, self.decoded_tokens + (n - self.seg_done) * b
