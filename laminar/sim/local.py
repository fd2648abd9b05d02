"""The job ``laminar train`` runs, simulated: one config trains and simulates the same job.

``sim.setting: runtime`` (or ``auto`` with a cost file written by ``laminar calibrate``) maps
the config's runtime section onto the simulated cluster; the cost file supplies the durations
measured on the machine the runs came from (``laminar/calibrate``):

- ``runtime.rollouts`` engines -> that many replicas of one "GPU" each;
- their cores (``laminar.policy.placement``, the runtime's own placement) -> replicas on the
  same cores share them: each decodes and prefills 1 + alpha x (core-mates decoding) +
  alpha_spin x (core-mates idle less than the cost file's ``engine_spin_s``: vLLM's worker
  polls for work that long) times slower (both calibrated; 1 is processor sharing;
  :class:`CoreSharing`),
  times the cost file's factor for the runtime mode where calibration separated one;
- the trainer on its cores -> the trainer, at the cost file's rate and fixed cost per step for
  that many threads, on the padded tokens of its micro-batches (``laminar.policy.microbatch``);
- ``runtime.max_batch`` -> B, the batch bound of every replica and of repack;
- repack's step bound (``repack.max_step_slowdown``) as the config sets it: the runtime has
  one only when it trains with a cost file, and a train run's ``config.yaml`` records the
  bound it ran with (0 without one: ``laminar.runtime.data.manager.as_ran``);
- laminar mode: a rollout on the newest weights tops up whole prompt groups while it holds
  fewer than B trajectories, drains and reloads once a newer version is published ->
  :class:`RuntimeLaminar` (``top_up``, ``refill``);
- the prompt pool's flow control (at most ``(steps consumed + 1 + prefetch_steps) x
  prompts_per_step`` groups handed out) -> the :class:`RuntimeLaminar` budget, and no other
  backpressure;
- sync mode: every rollout loads the newest weights, the step's groups are dealt round robin,
  generated to the end, then trained on every core -> :class:`RuntimeSync`;
- publish into ``/dev/shm`` (the actor stall) and a rollout's weight load -> the cost file's
  ``rdma`` and ``pcie`` links, fitted to those two durations;
- prompts a rollout takes start decoding the cost file's ``refill_latency_s`` later (the
  control plane's Ray calls: take, register in the partial pool, submit);
- the job's cold start (outside the figures' window, but it sets how far the rollouts are
  ahead when the window opens): the trainer's first step costs the cost file's
  ``trainer_first_step_extra_s_by_threads`` more, and the rollouts' first prompts start
  ``first_prompts_s`` after the job (``laminar.calibrate.coldstart``);
- finished trajectories reach the buffer at the rollout's next flush (every
  ``runtime.flush_interval_s``; laminar mode) -> half an interval late on average;
- the task's answer lengths, or a run's own trace (``workload.source: trace``) -> the
  workload (``laminar.sim.local_workload``);
- a multi-turn run's trace (``turns``, ``tool_latency_s``: an environment with ``step``,
  ``laminar/runtime/rollout/turns.py``) -> the simulator's turns (``laminar.sim.turns``): a
  trajectory generates turn by turn on the version it started with and waits each environment
  call off the engine (its slot and KV freed, the others decoding), then re-prefills its
  context; the rollout still holds it: laminar mode counts it in the room it tops up
  (``len(self.trajs)`` in the runtime) and reloads only once it is finished, as
  ``load_latest`` does (a replica woken while it holds only such trajectories stays idle);
  sync mode's step waits for the slowest conversation. The runtime's last ``step`` call of a
  conversation its environment ends, and the environment's reward call, are not in the trace
  and not charged;
- a replica alone on its cores runs 1 + the cost file's ``cross_core_gamma`` times slower while
  another core set works (a replica there decoding, the trainer updating on cores not its
  own): :class:`CoreSharing`.

Known differences: the trainer and replicas are assumed not to share cores with each other or
with anything else (other processes on the machine slow the real run only); replicas on
overlapping but different core sets do not slow each other.
"""

from __future__ import annotations

import math
from typing import ClassVar

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.policy.microbatch import padded_lengths
from laminar.sim.baselines import Verl
from laminar.sim.cost import Coefficient, CostModel
from laminar.sim.setting import cost_extras
from laminar.sim.setting import is_runtime_setting as is_runtime_setting  # re-exported
from laminar.sim.systems import GpuSplit, Proc, System


def refill_latency_s(cfg: LaminarConfig) -> float:
    """Seconds from deciding to start prompts to their first engine step (the runtime's
    control plane: Ray calls to the pools and the engine), from the cost file; 0 if absent."""
    return float((cost_extras(cfg) or {}).get("refill_latency_s", 0.0))


def runtime_config(cfg: LaminarConfig) -> LaminarConfig:
    """The simulator settings the runtime section implies (B, no buffer backpressure, repack
    only in laminar mode, the one system the config trains)."""
    if not cfg.sim.cost_file:
        raise ConfigError(
            "config",
            "sim.cost_file",
            "sim.setting 'runtime' needs a calibrated cost file (laminar calibrate RUN_DIR "
            "-o cost.json; then --cost cost.json)",
        )
    rt = cfg.runtime
    sim = cfg.sim.model_copy(
        update={"max_batch": rt.max_batch, "buffer_limit_batches": 0.0, "systems": [rt.mode]}
    )
    repack = cfg.repack.model_copy(update={"enabled": cfg.repack.enabled and rt.mode == "laminar"})
    # Counted as one machine of rollouts + 1 "GPUs": the replicas and the trainer.
    machine = cfg.cluster.model_copy(
        update={"gpus": rt.rollouts + 1, "gpus_per_machine": rt.rollouts + 1}
    )
    return cfg.model_copy(update={"sim": sim, "repack": repack, "cluster": machine})


def trainer_threads(cfg: LaminarConfig) -> int:
    """Threads the runtime's trainer uses under this config's placement."""
    rt = cfg.runtime
    return rt.placement().trainer_threads(rt.trainer_threads)


def placed_cost(cfg: LaminarConfig, cost: CostModel) -> CostModel:
    """``cost`` with the trainer's rate for the trainer threads this config's placement gives.

    The cost file lists a rate per thread count it was calibrated at; another count takes the
    nearest one, scaled in proportion to the threads (stated in the coefficient's source).
    """
    table = (cost_extras(cfg) or {}).get("trainer_flop_per_s_by_threads", {})
    rates = {int(k): float(v) for k, v in table.items()}
    threads = trainer_threads(cfg)
    if not rates:
        return cost
    if threads in rates:
        rate, why = rates[threads], f"calibrated with {threads} trainer thread(s)"
    else:
        near = min(rates, key=lambda k: (abs(k - threads), k))
        rate = rates[near] * threads / near
        why = f"calibrated at {near} thread(s), scaled x {threads}/{near} (not measured)"
    coeffs = dict(cost.coefficients)
    coeffs["train_flop_per_s_per_gpu"] = Coefficient(rate, "FLOP/s", why)
    return CostModel(coeffs, cost.label)


class CoreSharing:
    """Replicas pinned to the same cores share them: a replica runs 1 + alpha x (core-mates
    decoding) + alpha_spin x (core-mates spinning) times slower than alone (both from the cost
    file; alpha 1 is processor sharing; alpha_spin defaults to alpha). A replica decodes while
    it holds trajectories and spins for ``runtime.engine_spin_s`` (when the job sets it; else
    the cost file's ``engine_spin_s``) after it stops
    (vLLM's worker polls for its next step that long before it sleeps): a spinning mate
    mostly yields the cores, so it costs less than a decoding one. A replica alone on its
    cores runs 1 + ``cross_core_gamma`` times slower while another core set works (the
    trainer updating, a replica there decoding)."""

    def __init__(self, cfg: LaminarConfig):
        rt = cfg.runtime
        extras = cost_extras(cfg) or {}
        self.alpha = float(extras.get("core_sharing_alpha", 1.0))
        self.alpha_spin = float(extras.get("core_sharing_alpha_spin", self.alpha))
        # A decoding mate's cost grows with its batch (its CPU demand): + alpha_batch x its
        # sequences / B.
        self.alpha_batch = float(extras.get("core_sharing_alpha_batch", 0.0))
        self.max_batch = max(1, rt.max_batch)
        self._replicas: dict[int, object] = {}
        # the job's own bound when it sets one, else the spin of the runs calibrated on
        spin_set = rt.engine_spin_s is not None
        calibrated_spin_s = float(extras.get("engine_spin_s", 0.0))
        self.spin_s = rt.engine_spin_effective_s if spin_set else calibrated_spin_s
        cores = rt.placement().rollout_cpus if rt.device == "cpu" else ()
        # Unpinned replicas (empty core lists) float over the same machine: one shared group.
        self.group = [tuple(c) for c in cores] if cores else [(i,) for i in range(rt.rollouts)]
        # Each of the mode's rollouts on a replica's cores loads them (laminar's control loop)
        # where calibration could tell it apart; older cost files hold one factor per mode.
        per_rollout = extras.get("engine_load_per_rollout_by_mode", {}).get(rt.mode)
        if per_rollout is None:
            factor = float(extras.get("engine_factor_by_mode", {}).get(rt.mode, 1.0))
            self.mode_factors = [factor] * rt.rollouts
        else:
            here = [self.group.count(g) for g in self.group]
            self.mode_factors = [1.0 + float(per_rollout) * n for n in here]
        self.busy: set[int] = set()  # occupying the cores: decoding or spinning
        self.decoding: set[int] = set()
        self._stops: dict[int, int] = {}  # replica -> how many times it stopped decoding
        # A replica alone on its cores runs 1 + cross times slower while a core outside its set
        # works: a replica there decoding, or the trainer updating on cores not all its own
        # (calibrated: ``laminar.calibrate.fit.other_core_share``; 0 in older cost files).
        self.cross = float(extras.get("cross_core_gamma", 0.0)) if cores else 0.0
        trainer = set(rt.placement().trainer_cpus) if cores else set()
        self.alone = [bool(g) and self.group.count(g) == 1 for g in self.group]
        self.trainer_elsewhere = [bool(trainer - set(g)) for g in self.group]
        self.trainer_busy = False
        self._apart = [[j for j, h in enumerate(self.group) if not set(g) & set(h)]
                       for g in self.group]  # replicas on core sets disjoint from each one's

    def charges_cross(self) -> bool:
        """Whether some replica alone on its cores can step beside another core set's work
        (so ``cross_core_gamma`` enters this job's engine times)."""
        return bool(self.cross) and any(
            alone and (apart or elsewhere)
            for alone, apart, elsewhere in zip(self.alone, self._apart, self.trainer_elsewhere,
                                               strict=True))  # fmt: skip

    def slowdown(self, replica) -> float:
        """How many times slower than alone ``replica`` runs now (>= 1)."""
        mine = self.group[replica.index]
        mates = [i for i in self.busy if i != replica.index and self.group[i] == mine]
        decoding = [i for i in mates if i in self.decoding]
        load = self.alpha_spin * (len(mates) - len(decoding))
        for i in decoding:
            mate = self._replicas.get(i)
            batch = len(mate.running) if mate is not None else self.max_batch
            load += self.alpha + self.alpha_batch * min(1.0, batch / self.max_batch)
        slow = self.mode_factors[replica.index] * (1.0 + load)
        if self.cross and self.alone[replica.index] and self._others_work(replica.index):
            slow *= 1.0 + self.cross
        return slow

    def _others_work(self, i: int) -> bool:
        """Whether a core outside replica ``i``'s set works now (``cross``)."""
        if self.trainer_busy and self.trainer_elsewhere[i]:
            return True
        return any(j in self.decoding for j in self._apart[i])

    def trainer_changed(self, cluster, busy: bool) -> None:
        """The trainer starts or ends an update: replicas alone on their cores re-plan."""
        if self.cross and busy != self.trainer_busy:
            self.trainer_busy = busy
            for other in cluster.replicas:
                if self.alone[other.index] and self.trainer_elsewhere[other.index]:
                    other.sync()
                    other.wake()

    def _replan_alone(self, cluster, replica) -> None:
        """``replica`` started or stopped decoding: replicas alone on other cores re-plan."""
        apart = self._apart[replica.index]
        for other in cluster.replicas:
            if other.index in apart and self.alone[other.index]:
                other.sync()
                other.wake()

    def busy_changed(self, cluster, replica, busy: bool) -> None:
        """``replica`` started or stopped decoding: it leaves its cores ``spin_s`` later
        unless it starts again before."""
        i = replica.index
        self._replicas[i] = replica
        was_decoding = i in self.decoding
        (self.decoding.add if busy else self.decoding.discard)(i)
        if self.cross and was_decoding != busy:
            self._replan_alone(cluster, replica)
        if busy or self.spin_s <= 0:
            self._stops[i] = self._stops.get(i, 0) + 1  # cancels a pending leave
            if not self._occupy(cluster, replica, busy) and was_decoding != busy:
                self._replan_mates(cluster, replica)  # decoding <-> spinning
            return
        if i not in self.busy:
            return
        if was_decoding:
            self._replan_mates(cluster, replica)  # now spinning
        self._stops[i] = stop = self._stops.get(i, 0) + 1
        leave = cluster.env.timeout(self.spin_s)
        leave.callbacks.append(
            lambda _: self._stops[i] == stop and self._occupy(cluster, replica, False)
        )

    def _occupy(self, cluster, replica, busy: bool) -> bool:
        """``replica`` now occupies its cores or leaves them: its core-mates re-plan. False
        when nothing changed."""
        if busy == (replica.index in self.busy):
            return False
        (self.busy.add if busy else self.busy.discard)(replica.index)
        self._replan_mates(cluster, replica)
        return True

    def _replan_mates(self, cluster, replica) -> None:
        mine = self.group[replica.index]
        for other in cluster.replicas:
            if other is not replica and self.group[other.index] == mine:
                other.sync()
                other.wake()


def by_threads(cfg: LaminarConfig, key: str) -> float:
    """The cost file's ``runtime[key]`` figure for this placement's trainer thread count, or
    the nearest count's (0 if absent)."""
    table = (cost_extras(cfg) or {}).get(key, {})
    values = {int(k): float(v) for k, v in table.items()}
    if not values:
        return 0.0
    threads = trainer_threads(cfg)
    return values.get(threads, values[min(values, key=lambda k: (abs(k - threads), k))])


def trainer_step_base_s(cfg: LaminarConfig) -> float:
    """Seconds a trainer step costs whatever its tokens (the cost file's base for this
    placement's thread count, or the nearest count's; 0 if absent)."""
    return by_threads(cfg, "trainer_step_base_s_by_threads")


class RuntimeSystem(System):
    """What both runtime modes share: one machine, replicas sharing cores, one trainer."""

    def __init__(self, cfg: LaminarConfig):
        super().__init__(cfg)
        self.latency_s = refill_latency_s(cfg)
        self.step_base_s = trainer_step_base_s(cfg)
        extras = cost_extras(cfg) or {}
        self.first_step_extra_s = by_threads(cfg, "trainer_first_step_extra_s_by_threads")
        self.first_prompts_s = float(extras.get("first_prompts_s", 0.0))
        self.trained_steps = 0

    def train(self, cluster, groups, seq_lens: list[int]) -> Proc:
        """A step's fixed cost plus its tokens' (``trainer_step_base_s``, ``cost.train_s``),
        counted as the trainer computes them: padded to their micro-batch's longest; the
        first step pays the fresh trainer's warm-up on top (``first_step_extra_s``)."""
        padded = padded_lengths(seq_lens, self.cfg.runtime.grpo.micro_batch_tokens)
        train_s = self.step_base_s + cluster.cost.train_s(padded, cluster.split.trainer_gpus)
        if self.trained_steps == 0:
            train_s += self.first_step_extra_s
        self.trained_steps += 1
        share = cluster.core_sharing  # engines alone on their cores slow while it updates
        if share is not None:
            share.trainer_changed(cluster, True)
        yield from cluster.trainer_work(train_s)
        if share is not None:
            share.trainer_changed(cluster, False)
        return train_s

    def first_prompts(self, cluster) -> Proc:
        """Wait until the job's first prompts may reach an engine (``first_prompts_s`` after
        the start, the refill latency included)."""
        wait_s = self.first_prompts_s - self.latency_s - cluster.env.now
        if wait_s > 0:
            yield cluster.env.timeout(wait_s)

    def split(self, cost: CostModel) -> GpuSplit:
        """One trainer (its rate is per placement, ``placed_cost``), ``runtime.rollouts``
        replicas on one machine whose relay is the master (weights visible at publish)."""
        return GpuSplit(1, (0,), self.cfg.runtime.rollouts)

    def core_sharing(self, cluster) -> CoreSharing:
        return CoreSharing(self.cfg)


class RuntimeLaminar(RuntimeSystem):
    """Laminar mode of ``laminar train`` (``laminar/runtime/rollout/worker.py``, ``pools.py``)."""

    name: ClassVar[str] = "laminar"
    description: ClassVar[str] = "laminar train, mode laminar, as the runtime runs it"

    def start(self, cluster) -> None:
        self.issued = 0
        self.consumed_steps = 0
        self._budget = cluster.env.event()

    def budget(self) -> int:
        """Groups the prompt pool may still hand out (``PromptPool.budget`` of the runtime)."""
        w = self.cfg.workload
        ahead = self.consumed_steps + 1 + self.cfg.runtime.prefetch_steps
        cap = math.floor(ahead * w.prompts_per_step)
        return max(0, cap - self.issued)

    def _take(self, cluster, replica, groups: int) -> list:
        taken = cluster.prompts.take(groups)
        self.issued += groups
        return [t for g in taken for t in g.trajs]

    def refill(self, cluster, replica) -> Proc:
        """An empty rollout: pull the newest weights, then take B // n groups (at least one)
        within the budget, waiting for the trainer to open it."""
        n = self.cfg.workload.samples_per_prompt
        while True:
            yield from replica.wait_up()
            yield from self.pull_weights(cluster, replica)
            k = min(max(1, replica.max_batch // n), self.budget())
            if k > 0:
                break
            yield self._budget
        yield from self.first_prompts(cluster)
        trajs = self._take(cluster, replica, k)
        yield cluster.env.timeout(self.latency_s)  # take, register, submit
        replica.assign(trajs)

    def top_up(self, cluster, replica) -> None:
        """While on the newest weights, fill the room left by finished trajectories. One away
        on its environment is held (the runtime's ``len(self.trajs)``): it keeps its room."""
        if replica.version != cluster.relay.version_at(replica.relay_pos):
            return  # a newer version is out: drain, then reload (§2.4)
        held = len(replica.running) + len(replica.waiting) + len(replica.away)
        k = min((replica.max_batch - held) // self.cfg.workload.samples_per_prompt, self.budget())
        if k > 0:
            trajs = self._take(cluster, replica, k)
            landed = cluster.env.timeout(self.latency_s)

            def land(_) -> None:
                replica.sync()
                replica.assign(trajs)
                replica.wake()

            landed.callbacks.append(land)

    def deliver(self, cluster, group) -> None:
        """A rollout streams finished trajectories to the buffer every ``flush_interval_s``:
        a group arrives, on average, half an interval after its last trajectory finished."""
        delay_s = self.cfg.runtime.flush_interval_s / 2
        arrive = cluster.env.timeout(delay_s)
        arrive.callbacks.append(lambda _: cluster.buffer.put(group))

    def after_update(self, cluster, version: int) -> None:
        """The trainer consumed a step: the prompt budget opens by one global batch."""
        self.consumed_steps = version
        opened, self._budget = self._budget, cluster.env.event()
        opened.succeed()
        super().after_update(cluster, version)


class RuntimeSync(RuntimeSystem, Verl):
    """Sync mode of ``laminar train`` (``laminar/runtime/run/loops.py: run_sync``)."""

    name: ClassVar[str] = "sync"
    description: ClassVar[str] = "laminar train, mode sync, as the runtime runs it"

    def start(self, cluster) -> None:
        """The first round starts once the job's first prompts may (``first_prompts``)."""
        super(Verl, self).start(cluster)  # Verl's own start launches at once

        def first_round():
            yield from self.first_prompts(cluster)
            self.launch(cluster, 0)

        cluster.env.process(first_round())

    def launch(self, cluster, version: int) -> None:
        """One step's groups dealt round robin to the replicas (``groups[i::n]``)."""
        groups = cluster.prompts.take(self.cfg.workload.prompts_per_step)
        replicas = cluster.replicas
        for i, r in enumerate(replicas):
            r.version = version
            share = groups[i :: len(replicas)]
            if share:
                r.assign([t for g in share for t in g.trajs])
        self._release(cluster)

    def publish(self, cluster, version: int) -> Proc:
        """The stall (one copy into the store), then every rollout loads the new weights."""
        cost = cluster.cost
        stall_s = cost.transfer_s(cost.weight_bytes, "rdma")
        yield cluster.env.timeout(stall_s)
        if self.more_batches(version):
            load_s = cost.transfer_s(cost.weight_bytes, "pcie")
            yield cluster.env.timeout(load_s + self.latency_s)
            for r in cluster.replicas:
                r.version = version
                cluster.record_weight_wait(r, load_s)
            self.launch(cluster, version)
        return stall_s


RUNTIME_SYSTEMS: dict[str, type[System]] = {"laminar": RuntimeLaminar, "sync": RuntimeSync}
