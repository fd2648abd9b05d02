"""The trainer (paper §3.2): sample a global batch of completed groups, train, publish weights.

Staleness of every consumed trajectory is recorded through ``laminar.policy.staleness`` at the
moment the trainer takes it: the trainer's version then, minus the version it was generated
with (§6). Version v is the weights after v updates; rollouts start at version 0. Each step's
row also splits its time into stages (generation wait, old-log-prob, reference, update, weight
sync; ``laminar.sim.stages``).
"""

from __future__ import annotations

from typing import Any

import simpy

from laminar.policy.staleness import StalenessTracker
from laminar.sim.pools import Group
from laminar.sim.stages import step_stages


class Trainer:
    """The trainer GPUs of the cluster and their SimPy process."""

    def __init__(self, cluster: Any) -> None:
        self.env: simpy.Environment = cluster.env
        self.cluster = cluster
        self.version = 0
        self.steps_done = 0
        self.staleness = StalenessTracker()
        self.rows: list[dict] = []
        self.done = self.env.event()
        self.env.process(self.run())

    def run(self):
        env, cluster = self.env, self.cluster
        system = cluster.system
        for step in range(cluster.cfg.workload.steps):
            asked_s = env.now
            groups = yield from system.sample(cluster, step)
            start_s = env.now
            lens, stale = self._consume(groups)
            train_s = yield from system.train(cluster, groups, lens)
            trained_s = env.now
            self.version += 1
            stall_s = yield from system.publish(cluster, self.version)
            times = (asked_s, start_s, trained_s, env.now)
            row = {
                "step": step,
                "version": self.version,
                "start_s": start_s,
                "data_wait_s": start_s - asked_s,
                "train_s": train_s,
                "actor_stall_s": stall_s,
                "end_s": env.now,
                "trajectories": len(lens),
                "tokens": sum(lens),
                "staleness_mean": sum(stale) / len(stale) if stale else 0.0,
                "staleness_max": max(stale, default=0),
                "buffered_trajectories": cluster.buffer.trajectories,
            }
            row.update(step_stages(cluster, lens, train_s, times))
            self.rows.append(row)
            self.steps_done += 1
            cluster.on_step_done(self.steps_done)
            system.after_update(cluster, self.version)
        self.done.succeed()

    def _consume(self, groups: list[Group]) -> tuple[list[int], list[int]]:
        """Mark every trajectory of ``groups`` consumed now; their lengths and staleness."""
        now, version = self.env.now, self.version
        lens: list[int] = []
        versions: list = []
        for g in groups:
            for t in g.trajs:
                if t.consumed_version != -1:
                    raise RuntimeError(f"trajectory {t.tid} consumed twice")
                t.consumed_version = version
                t.consumed_s = now
                versions.append(t.versions or t.version)
                lens.append(t.prompt_len + t.response_len)
        return lens, self.staleness.record_all(version, versions)
