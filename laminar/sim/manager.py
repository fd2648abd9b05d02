"""The rollout manager (paper §3.1, §5): periodic repack checks, and one after every update.

It builds a :class:`~laminar.policy.repack.ReplicaState` per replica, asks
``laminar.policy.repack.plan_repack`` for the moves and carries them out: every trajectory of a
source leaves for its destination, where it waits to be re-prefilled (prompt plus the tokens
generated so far; the destination charges that prefill when it admits them). The emptied
source frees up, pulls the newest weights and takes new prompts (§5.1).

Each snapshot carries the replica's decode-step cost (from the cost model) and
``repack.max_step_slowdown``, so the policy keeps a destination's step within the bound (§8.4:
repack does not lengthen generation).

Replicas whose KV use is not falling cannot be candidates (``laminar.policy.repack.kv_falling``,
the KV half of ``is_candidate``, decides); only the others get a full snapshot, which keeps a
check over a thousand replicas cheap (see ``_snapshots``).
"""

from __future__ import annotations

import math

import simpy

from laminar.policy.repack import ReplicaState, StepCost, kv_falling, plan_repack
from laminar.sim.replica import Replica


class RolloutManager:
    """Repack over the cluster's replicas; one SimPy process for the periodic checks."""

    def __init__(self, cluster, interval_s: float, max_step_slowdown: float = 0.0):
        self.env: simpy.Environment = cluster.env
        self.cluster = cluster
        self.interval_s = interval_s
        cost = cluster.cost
        self.step_cost = StepCost(
            cost.decode_base_s, cost.decode_per_seq_s, cost.decode_per_kv_token_s
        )
        self.max_step_slowdown = max_step_slowdown or math.inf  # config 0: unbounded
        self.kv_prev: dict[str, tuple[int, int]] = {}  # replica -> (batch number, KV tokens)
        self.checks = 0
        self.moves = 0
        self.moved_trajectories = 0
        self.env.process(self.run())

    def run(self):
        while True:
            yield self.env.timeout(self.interval_s)
            self.check()

    def _snapshots(self) -> list[ReplicaState]:
        """Full snapshots of the replicas that can take part in a repack plan.

        The policy's ``kv_falling`` (``is_candidate`` without the trajectories) rules out the
        replicas whose KV use is not falling; only the others get the per-trajectory snapshot.
        """
        snaps: list[ReplicaState] = []
        kv_prev = self.kv_prev
        now = self.env.now
        step_cost, max_step_slowdown = self.step_cost, self.max_step_slowdown
        replicas: list[Replica] = self.cluster.replicas  # typed: compiled, direct attributes
        for r in replicas:
            kv = r.kv_at(now)
            rid = r.rid
            batch, prev = kv_prev.get(rid, (-1, 0))
            batches = r.batches
            if batch != batches:
                prev = 0  # a fresh batch since the last look: its KV use is rising, not falling
            kv_prev[rid] = (batches, kv)
            held = len(r.running) + len(r.waiting) + len(r.away)
            # cheap tests first: an empty replica is idle, a full one never a candidate;
            # then is_candidate on a snapshot without trajectories, without building it
            if 0 < held < r.max_batch and kv_falling(kv, prev, r.capacity):
                snaps.append(r.snapshot(prev, step_cost, max_step_slowdown, kv))
        return snaps

    def after_update(self) -> None:
        """§5.1: a check right after a weight update frees rollouts for the new version."""
        self.check()

    def check(self) -> int:
        """One repack check; returns the number of moves carried out."""
        self.checks += 1
        moves = plan_repack(self._snapshots())
        by_id = self.cluster.replica_by_id
        for move in moves:
            src, dst = by_id[move.src], by_id[move.dst]
            trajs = src.detach_all()
            if sorted(t.sid for t in trajs) != sorted(move.traj_ids):
                raise RuntimeError(f"repack plan for {move.src} does not match its trajectories")
            dst.attach(trajs)
            src.wake()
            dst.wake()
            self.moves += 1
            self.moved_trajectories += len(trajs)
        return len(moves)
