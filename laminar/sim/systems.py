"""Systems: policies over the one simulated mechanism (DESIGN.md, "Systems simulated").

Every system runs on the same components (``laminar.sim.cluster``): replicas, trainer, relay
chain, rollout manager, pools. A :class:`System` decides only what differs between designs:

- how the GPUs are split (``split``; ``colocated`` systems give every GPU to both roles),
- when a freed rollout pulls weights and takes prompts (``refill``),
- what the trainer consumes each step (``sample``),
- how a new version reaches the rollouts (``publish``; ``weight_sync`` names the style),
- what happens to in-flight trajectories at an update (``after_update``;
  ``interrupt_on_update`` names it), and any ``staleness_bound``.

The base class is Laminar itself (trajectory-level asynchrony, relay pulls, repack); a baseline
is a small subclass that overrides the hooks it changes (``laminar.sim.baselines`` holds
verl, one-step, stream and partial rollout; ``laminar.sim.registry`` names every one).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

from laminar.config import LaminarConfig
from laminar.sim.cost import CostModel
from laminar.specs.memory import decoupled_trainer_gpus

Proc = Generator[Any, Any, Any]  # a SimPy process body (``yield from`` it)


@dataclass(frozen=True, slots=True)
class GpuSplit:
    """Which GPUs train and which roll out; rollout replicas sit on whole machines."""

    trainer_gpus: int
    rollout_machines: tuple[int, ...]
    replicas_per_machine: int
    machines_per_replica: int = 1
    """Above 1, a replica spans this many machines (TP x EP beyond one machine)."""

    @classmethod
    def of(cls, trainer_gpus: int, rollout_machines: tuple[int, ...], gpm: int, replica_gpus: int):
        """Replicas of ``replica_gpus`` on ``rollout_machines`` of ``gpm`` GPUs each."""
        if replica_gpus <= gpm:
            return cls(trainer_gpus, rollout_machines, gpm // replica_gpus)
        return cls(trainer_gpus, rollout_machines, 1, replica_gpus // gpm)

    @property
    def replicas(self) -> int:
        """Rollout replicas in the cluster."""
        if self.machines_per_replica > 1:
            return len(self.rollout_machines) // self.machines_per_replica
        return len(self.rollout_machines) * self.replicas_per_machine

    def replica_machines(self) -> list[int]:
        """The (first) machine of every replica, in replica order."""
        k = self.machines_per_replica
        if k > 1:
            return [self.rollout_machines[i * k] for i in range(self.replicas)]
        return [m for m in self.rollout_machines for _ in range(self.replicas_per_machine)]

    def machines_of(self, first: int) -> range:
        """The machines of the replica whose first machine is ``first``."""
        return range(first, first + self.machines_per_replica)


class System:
    """Laminar (paper §3-§6); the defaults every baseline starts from."""

    name: ClassVar[str] = "laminar"
    description: ClassVar[str] = (
        "trajectory-level asynchrony: rollouts pull weights from a local relay when they free "
        "up, the trainer consumes completed groups, repack consolidates long tails"
    )
    colocated: ClassVar[bool] = False  # trainer and rollouts take turns on every GPU
    weight_sync: ClassVar[str] = "relay"  # "relay": per-rollout pulls; "global": all at once
    interrupt_on_update: ClassVar[bool] = False  # in-flight trajectories cut at each update
    staleness_bound: ClassVar[int | None] = None  # η; None: no configured bound (§6)
    uses_repack: ClassVar[bool] = True  # honours ``repack.enabled``
    fault_domain: ClassVar[str] = "component"  # "job": any fault restarts everything (faults.py)
    # The trainer recomputes the old policy's log-probs with one more forward before the
    # update: Laminar's trainer is verl's (§7), whose actor runs compute_log_prob every step;
    # the verl-based baselines do the same; AReaL's decoupled loss recomputes them too.
    # ``trainer.old_logprob`` overrides it per run (``laminar.sim.layout``): verl's fully async
    # recipe with use_rollout_log_probs reuses the engine's (docs/advance/fully_async.md: its
    # old_log_prob column is empty).
    recomputes_old_logprob: ClassVar[bool] = True

    def __init__(self, cfg: LaminarConfig):
        self.cfg = cfg

    # GPUs ----------------------------------------------------------------------------------

    def split(self, cost: CostModel) -> GpuSplit:
        """Decoupled: ``cluster.trainer_fraction`` of the machines train, the rest roll out.

        The paper does not publish its splits; the fraction is config (presets say why theirs).
        Below one machine per role, the single machine is split by GPU.
        """
        c = self.cfg.cluster
        tp = cost.replica_gpus
        gpm = min(c.gpus_per_machine, c.gpus)
        machines = c.gpus // gpm
        trainer_gpus = decoupled_trainer_gpus(c, tp)  # one rule for the sim and the fit check
        if machines >= 2:
            rollout = tuple(range(trainer_gpus // gpm, machines))
            return GpuSplit.of(trainer_gpus, rollout, gpm, tp)
        return GpuSplit(trainer_gpus, (0,), (gpm - trainer_gpus) // tp)

    def batch_groups(self, split: GpuSplit) -> int:
        """Groups a rollout takes at a time: ``sim.rollout_batch_prompts`` or an even share."""
        if self.cfg.sim.rollout_batch_prompts:
            return self.cfg.sim.rollout_batch_prompts
        return max(1, math.ceil(self.cfg.workload.prompts_per_step / split.replicas))

    # Rollout side -----------------------------------------------------------------------------

    def refill(self, cluster, replica) -> Proc:
        """A replica ran out of work (§3.2): pull the newest weights, then take prompts.

        The pull comes after any backpressure wait, so the prompts start on the newest weights,
        and after any outage of the replica's machine (``laminar.sim.faults``)."""
        buffer = cluster.buffer
        while not buffer.has_room():
            yield buffer.room()
        yield from replica.wait_up()
        yield from self.pull_weights(cluster, replica)
        groups = cluster.prompts.take(cluster.batch_groups)
        replica.assign([t for g in groups for t in g.trajs])

    def pull_weights(self, cluster, replica) -> Proc:
        """§4.2: copy the local relay's newest version into the replica, if it is newer."""
        newest = cluster.relay.version_at(replica.relay_pos)
        if newest > replica.version:
            cost = cluster.cost
            wait_s = cost.transfer_s(cost.weight_bytes / cost.replica_gpus, "pcie")
            yield cluster.env.timeout(wait_s)
            replica.version = newest
            cluster.record_weight_wait(replica, wait_s)

    def deliver(self, cluster, group) -> None:
        """A group's last trajectory finished: it enters the experience buffer (at once)."""
        cluster.buffer.put(group)

    def top_up(self, cluster, replica) -> None:
        """Called after a replica retired trajectories, with more still running: a system
        that refills a busy replica (the runtime's laminar mode) does it here. Laminar waits
        until the replica is empty (``refill``)."""

    def core_sharing(self, cluster):
        """What slows replicas that share hardware (``laminar.sim.local.CoreSharing``); None:
        every replica has its own GPUs."""
        return None

    def start(self, cluster) -> None:
        """Called once the cluster is wired, before it runs: start any process of the system's
        own (the baselines' round dispatchers). Laminar has none."""

    # Trainer side -----------------------------------------------------------------------------

    def sample(self, cluster, step: int) -> Proc:
        """The groups trainer step ``step`` trains on: the oldest completed global batch."""
        n = self.cfg.workload.prompts_per_step
        ready = cluster.buffer.wait_for(n)
        if ready is not None:
            yield ready
        return cluster.buffer.take(n)

    def train(self, cluster, groups, seq_lens: list[int]) -> Proc:
        """Train one step on ``groups`` (``seq_lens``: their trajectories' tokens); returns the
        training seconds. Faults that take the trainer down (``laminar.sim.faults``) restart
        the step from its checkpoint."""
        train_s = cluster.train_step(seq_lens).total_s
        yield from cluster.trainer_work(train_s)
        return train_s

    def publish(self, cluster, version: int) -> Proc:
        """§4.2: one copy of the weights to the master relay (the actor stall), then the chain
        broadcasts in the background. Returns the stall in seconds."""
        cost = cluster.cost
        stall_s = cost.transfer_s(cost.weight_bytes, "rdma")
        yield cluster.env.timeout(stall_s)
        cluster.relay.publish(version)
        return stall_s

    def trainer_waits(self, cluster, data_wait_s: float, publish_s: float) -> tuple[float, float]:
        """The step's stages outside training (``laminar.sim.stages``): of the trainer's
        ``data_wait_s`` in ``sample`` and ``publish_s`` in ``publish``, the seconds it waited
        for generation and those it spent handing weights over. Laminar: all of the first,
        all of the second (the actor stall)."""
        return data_wait_s, publish_s

    def after_update(self, cluster, version: int) -> None:
        """§5.1: a repack check after each update frees rollouts for the new version."""
        if cluster.manager is not None:
            cluster.manager.after_update()


class Laminar(System):
    """The paper's system; identical to the base class."""


SYSTEMS: dict[str, type[System]] = {"laminar": Laminar}
