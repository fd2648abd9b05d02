"""One simulated cluster running one system: the components wired together (paper §3.1).

``Cluster`` owns the SimPy environment and one process per component: a replica per rollout
replica (idle and refill), the decoder (every replica's decode segments), the trainer, the relay
chain and the rollout manager; the pools are passive. It also
keeps the raw records that ``laminar.sim.results`` turns into tables.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import simpy

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.sim.cost import CostModel
from laminar.sim.decoder import Decoder
from laminar.sim.faults import FaultInjector
from laminar.sim.layout import StepTime, TrainerLayout, recomputes_old_logprob, step_time
from laminar.sim.manager import RolloutManager
from laminar.sim.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.sim.relay import RelayChain
from laminar.sim.replica import Replica
from laminar.sim.steady import warmup_steps
from laminar.sim.systems import GpuSplit, System
from laminar.sim.trainer import Trainer
from laminar.sim.turns import Turns
from laminar.specs.layoutfit import check_layout


def check_setup(cfg: LaminarConfig, system: System, cost: CostModel) -> GpuSplit:
    """The GPU split of ``system``, or :class:`ConfigError` when the config cannot run on it
    (checked for every system before any runs, so a bad config fails in milliseconds)."""
    c, w = cfg.cluster, cfg.workload
    tp, gpm = cost.replica_gpus, min(c.gpus_per_machine, c.gpus)
    if (gpm % tp) if tp <= gpm else (tp % gpm):
        raise ConfigError(
            "config",
            "model.rollout_tp",
            f"a replica's GPUs (rollout_tp x rollout_ep = {tp}) must divide "
            f"gpus_per_machine ({gpm}) or be whole machines",
        )
    if cfg.sim.rollout_batch_prompts > w.prompts_per_step:
        # More than a global batch per take: the pool would wrap over and over (a hang).
        raise ConfigError(
            "config",
            "sim.rollout_batch_prompts",
            f"{cfg.sim.rollout_batch_prompts} is more than a global batch "
            f"(workload.prompts_per_step {w.prompts_per_step})",
        )
    split = system.split(cost)
    if split.trainer_gpus < 1:
        raise ConfigError(
            "config", "cluster.gpus", f"{c.gpus} GPU(s) leave none for the trainer of "
            f"{system.name} next to a {tp}-GPU rollout replica; give it at least {tp + 1}"
        )
    if split.replicas < 1:
        raise ConfigError(
            "config", "cluster.gpus", f"{c.gpus} GPU(s) less {split.trainer_gpus} for the "
            f"trainer leave fewer than a {tp}-GPU rollout replica (model.rollout_tp x "
            "rollout_ep); give more GPUs or a smaller rollout_tp"
        )
    longest = w.max_prompt_len + w.max_response_len + 1
    if longest > cost.kv_capacity_tokens * (1 - cfg.sim.kv_watermark):
        raise ConfigError(
            "config",
            "workload.max_response_len",
            f"a {longest}-token trajectory does not fit one replica's KV cache "
            f"({cost.kv_capacity_tokens} tokens); raise model.rollout_tp",
        )
    check_layout(TrainerLayout.of(cfg), split.trainer_gpus, experts=int(cost.moe_experts),
                 layers=None)  # fmt: skip
    machines = len(split.rollout_machines)
    for i, e in enumerate(cfg.faults.events):
        if e.type != "trainer" and e.machine >= machines:
            raise ConfigError(
                "config",
                f"faults.events[{i}].machine",
                f"{e.type} fault on rollout machine {e.machine}, but {system.name} has only "
                f"{machines} rollout machine(s) (0..{machines - 1})",
            )
    return split


class Cluster:
    """The mechanism shared by every system; ``system`` supplies the policy hooks."""

    def __init__(self, cfg: LaminarConfig, system: System, cost: CostModel, workload: pd.DataFrame):
        self.env = simpy.Environment()
        self.cfg = cfg
        self.system = system
        self.cost = cost
        self.split = check_setup(cfg, system, cost)
        self.layout = TrainerLayout.of(cfg)
        self.recomputes_old_logprob = recomputes_old_logprob(cfg, system)
        w = cfg.workload
        self.batch_groups = system.batch_groups(self.split)
        self.prompts = PromptPool(workload, w.max_prompt_len, w.max_response_len)
        limit = round(cfg.sim.buffer_limit_batches * w.prompts_per_step * self._mean_group_size())
        self.buffer = ExperienceBuffer(self.env, limit)
        self.partial = PartialResponsePool(lambda: self.replicas)
        # (t_s, replica index, kv, kv at the segment's end, running, waiting, version)
        self.series: list[tuple] = []
        self.weight_waits: list[tuple[float, int, float]] = []  # (t_s, replica index, wait_s)
        self.on_step: Callable[[int], None] | None = None
        self.window: dict | None = None  # stats when the warm-up ended
        self.warmup_steps = warmup_steps(cfg)  # ``sim.warmup_steps``, ``auto`` resolved
        self.relay = RelayChain(self, list(self.split.rollout_machines))
        self.core_sharing = system.core_sharing(self)  # None: each replica has its own GPUs
        # A pure function of the batch, asked once per decode segment: tabulated (same values).
        self.decoder = Decoder(self.env)  # every replica's decode segments
        batches = range(cfg.sim.max_batch + 1)
        self.decode_fixed_by_batch_s = [cost.decode_fixed_s(b) for b in batches]
        self.turns = Turns.of(self, workload)  # None: single-turn trajectories only
        self.replicas = [
            Replica(self, i, m, self.relay.position_of(m))
            for i, m in enumerate(self.split.replica_machines())
        ]
        self.replica_by_id = {r.rid: r for r in self.replicas}
        self.trainer = Trainer(self)
        repack = cfg.repack.enabled and system.uses_repack
        rp = cfg.repack
        self.manager = (
            RolloutManager(self, rp.interval_s, rp.max_step_slowdown) if repack else None
        )
        self.faults = FaultInjector(self) if cfg.faults.events else None
        system.start(self)

    def _mean_group_size(self) -> float:
        p = self.prompts
        return len(p.prompt_len) / len(p.group_start)

    def train_step(self, seq_lens: list[int], updates: int | None = None) -> StepTime:
        """Seconds of one training step on ``seq_lens`` on the trainer's GPUs and layout
        (``laminar.sim.layout``), with this system's old-log-prob and reference passes."""
        return step_time(
            self.cost, self.layout, seq_lens, self.split.trainer_gpus,
            old_logprob=self.recomputes_old_logprob, reference=self.cfg.trainer.reference,
            updates=updates,
        )  # fmt: skip

    # Called by components ------------------------------------------------------------------

    def record_weight_wait(self, r: Replica, wait_s: float) -> None:
        """A rollout spent ``wait_s`` loading new weights."""
        self.weight_waits.append((self.env.now, r.index, wait_s))

    def on_step_done(self, steps_done: int) -> None:
        """The trainer finished a step: mark the end of the warm-up, tick the progress bar."""
        if steps_done == self.warmup_steps:
            self.window = self.totals()
        if self.on_step is not None:
            self.on_step(steps_done)

    def totals(self) -> dict:
        """Cumulative counters now: the difference of two is a window's figures."""
        kv = idle = decoded = 0.0
        for r in self.replicas:
            k, i, d = r.stats_at()
            kv += k
            idle += i
            decoded += d
        return {"t_s": self.env.now, "kv_token_s": kv, "idle_s": idle, "decoded": decoded}

    def trainer_work(self, seconds: float):
        """A process body: ``seconds`` of trainer work, redone after any trainer outage that
        interrupts it (``laminar.sim.faults``)."""
        if self.faults is None:
            yield self.env.timeout(seconds)
        else:
            yield from self.faults.trainer_work(seconds)

    # Running ----------------------------------------------------------------------------------

    def release_records(self) -> None:
        """Drop the run's trajectory records once its tables are built.

        A group and its trajectories reference each other, so without this they outlive the
        run until the cyclic GC walks them all (``laminar.sim.api._gc_paused``); with the
        cycles cut, reference counting frees them.
        """
        for g in self.prompts.groups:
            g.trajs = []
        self.prompts.groups = []
        self.prompts.trajectories = []

    def run(self) -> None:
        """Simulate until the trainer finishes its steps or ``sim.max_sim_time_s`` passes."""
        if self.warmup_steps == 0:
            self.window = self.totals()
        limit = self.env.timeout(self.cfg.sim.max_sim_time_s)
        self.env.run(until=self.trainer.done | limit)
        for r in self.replicas:  # bring in-flight trajectories' token counts up to the end
            r.sync()
            for t in r.running.values():
                t.generated = r.generated_now(t, r.steps)
