"""The systems Laminar is measured against (paper §2.3, Fig. 3, §8), as policies over the one
simulated mechanism (``laminar.sim.systems``): same replicas, trainer, pools and cost model.

All four synchronize weights *globally*: every rollout stops while the trainer's new weights
reach all of them at once, and no repack runs. They differ in what overlaps what:

- ``verl`` (synchronous, colocated, Fig. 3a): every GPU generates the whole global batch, then
  every GPU trains on it, then the weights are resharded into the rollout engines. The slowest
  trajectory gates each step; generation and training never overlap.
- ``one-step`` (Fig. 3b): separate trainer and rollout GPUs; batch i+1 is generated with the
  weights of step i-1 while the trainer trains on batch i, so every trajectory's staleness is
  exactly 1. The sync after each step waits for the rollouts to finish their batch.
- ``stream`` (Fig. 3c): separate GPUs; the trainer takes mini-batches as their groups
  complete, overlapping training with the generation tail, but the weights change only after
  the whole global batch, globally, before the next batch is generated (staleness 0).
- ``partial`` (AReaL-like partial rollout, Fig. 3d): separate GPUs generating continuously;
  at every update all rollouts are interrupted, load the new weights and re-prefill their
  in-flight trajectories, which continue under the new version (``Trajectory.versions`` lists
  every version a trajectory was generated with). Staleness is bounded by η
  (``baselines.partial_eta``) through ``laminar.policy.staleness.StalenessBound``: a rollout
  starts a group only if the trainer version that will consume it, counting groups in order
  (AReaL's N_r <= (i + η + 1)·B), admits it; the trainer takes groups oldest version first and
  waits for any group that would otherwise outgrow η.

A baseline's actor stall (``actor_stall_s`` in ``steps.csv``) is every second the trainer spends
in ``publish``: for one-step that includes waiting for the rollouts to reach the sync point.
A rollout's weight wait is the sync's transfer time. Faults restart the whole job
(``fault_domain = "job"``, see ``laminar.sim.faults``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import ClassVar

from laminar.policy.relay import broadcast_time, optimal_chunks
from laminar.policy.staleness import StalenessBound
from laminar.sim.cost import CostModel
from laminar.sim.systems import GpuSplit, Proc, System
from laminar.specs.layoutfit import layout_of
from laminar.specs.model import model_known, model_spec
from laminar.specs.tensors import tensor_groups


def _one_nvlink_domain(gpus: int, cluster, cost: CostModel) -> bool:
    """True when ``gpus`` GPUs of ``cluster`` fit one NVLink domain: a machine, or the cost
    model's larger domain (a GB200 NVL72 rack)."""
    return gpus <= max(min(cluster.gpus_per_machine, cluster.gpus), cost.nvlink_gpus)


class GlobalSync(System):
    """What the baselines share: global weight sync, no repack, job-wide faults, and rounds
    (a global batch handed out to every rollout at once, with one weight version)."""

    weight_sync: ClassVar[str] = "global"
    uses_repack: ClassVar[bool] = False
    fault_domain: ClassVar[str] = "job"

    def start(self, cluster) -> None:
        self._go = cluster.env.event()  # fires when new work or new weights are handed out

    def launch(self, cluster, version: int) -> None:
        """One round: the next global batch, dealt out in contiguous equal shares of
        trajectories to every replica (as verl splits a batch over its data-parallel ranks),
        all generated with ``version``."""
        groups = cluster.prompts.take(self.cfg.workload.prompts_per_step)
        trajs = [t for g in groups for t in g.trajs]
        replicas = cluster.replicas
        share = math.ceil(len(trajs) / len(replicas))
        for i, r in enumerate(replicas):
            r.version = version
            chunk = trajs[i * share : (i + 1) * share]
            if chunk:
                r.assign(chunk)
        self._release(cluster)

    def _release(self, cluster) -> None:
        go, self._go = self._go, cluster.env.event()
        go.succeed()

    def refill(self, cluster, replica) -> Proc:
        """A freed rollout waits for the next round to hand it work."""
        while not (replica.running or replica.waiting):
            yield self._go

    def sync_s(self, cluster) -> float:
        """§2.3: the trainer broadcasts the new weights GPU to GPU (NCCL) to every rollout
        machine; a pipelined chain over the trainer's machine and the rollout machines, so the
        same App. D model as the relay chain (``laminar.policy.relay``), with RDMA links. A job
        whose trainer and engines share one NVLink domain (one machine, or a GB200 NVL72 rack)
        broadcasts over NVLink."""
        cost: CostModel = cluster.cost
        if _one_nvlink_domain(self.cfg.cluster.gpus, self.cfg.cluster, cost):
            return cost.transfer_s(cost.weight_bytes, "nvlink")
        p = 1 + len(cluster.split.rollout_machines)
        m, a, b = cost.weight_bytes, cost.rdma_startup_s, cost.rdma_beta_s_per_byte
        return broadcast_time(p, optimal_chunks(p, m, a, b), m, a, b)

    def sync_weights(self, cluster, version: int) -> Proc:
        """Every rollout stops and loads ``version`` at once; returns the sync's seconds."""
        sync_s = self.sync_s(cluster)
        yield cluster.env.timeout(sync_s)
        for r in cluster.replicas:
            r.version = version
            cluster.record_weight_wait(r, sync_s)
        return sync_s

    def more_batches(self, batch_index: int) -> bool:
        """True while batch ``batch_index`` is one the trainer will consume."""
        return batch_index < self.cfg.workload.steps


class Verl(GlobalSync):
    """verl's synchronous colocated PPO/GRPO loop (Fig. 3a)."""

    name: ClassVar[str] = "verl"
    description: ClassVar[str] = (
        "synchronous, colocated: all GPUs generate the global batch, then all train, then "
        "reshard the weights into the rollout engines; the slowest trajectory gates the step"
    )
    colocated: ClassVar[bool] = True
    staleness_bound: ClassVar[int | None] = 0

    def split(self, cost: CostModel) -> GpuSplit:
        """Colocated: every GPU trains and every GPU rolls out, in turn."""
        c = self.cfg.cluster
        gpm = min(c.gpus_per_machine, c.gpus)
        return GpuSplit.of(c.gpus, tuple(range(c.gpus // gpm)), gpm, cost.replica_gpus)

    def start(self, cluster) -> None:
        super().start(cluster)
        self.launch(cluster, 0)

    def sync_s(self, cluster) -> float:
        """Resharding in verl's hybrid engine (assumption, from its FSDP-to-vLLM sharding
        manager): each parameter is all-gathered onto every GPU, which then loads its rollout
        shard; a machine's NICs carry one full copy per GPU. When the GPUs holding one copy
        of the model share an NVLink domain (a machine, or a GB200 NVL72 rack): NVLink.

        Across machines the hand-over goes a tensor at a time (verl's sharding manager gathers
        parameter by parameter; NeMo RL's Megatron refit exports tensor by tensor through
        Megatron-Bridge, a pipeline-parallel broadcast and an expert-parallel all-gather per
        tensor): each tensor is its own pipelined broadcast over the machines, App. D's chain
        (``laminar.policy.relay``, ``rdma_startup_s`` a chunk), and pays the chain's fill before
        the next starts. Tensors from ``laminar.specs.tensors`` (one, all the weights, for a
        model outside the catalog that only a cost file describes): a model of tens of
        thousands of expert tensors over tens of machines pays the fill tens of thousands of
        times."""
        cost, c = cluster.cost, self.cfg.cluster
        gpm = min(c.gpus_per_machine, c.gpus)
        copy = self._copy_gpus(c.gpus)
        if _one_nvlink_domain(copy, c, cost):  # each copy's GPUs share an NVLink domain
            return cost.transfer_s(cost.weight_bytes, "nvlink")
        machines = -(-copy // gpm)
        a, b = cost.rdma_startup_s, cost.rdma_beta_s_per_byte
        total = 0.0
        for share, n in self._tensor_shares():
            m = gpm * cost.weight_bytes * share
            total += n * broadcast_time(machines, optimal_chunks(machines, m, a, b), m, a, b)
        return total

    def _copy_gpus(self, gpus: int) -> int:
        """GPUs that hold one copy of the model between them, the span of each tensor's
        broadcast: the trainer's model-parallel group (tp x pp x ep: Megatron replicates the
        parameters over its data-parallel ranks, which export their copies side by side), or
        every GPU for a trainer without model parallelism (FSDP shards each parameter over all
        of them)."""
        group = layout_of(self.cfg).copy_gpus
        return gpus if group <= 1 else min(gpus, group)

    def _tensor_shares(self) -> tuple[tuple[float, int], ...]:
        """(share of the weights a tensor, number of tensors) of the model, read once: from
        ``laminar.specs.tensors``, or one tensor of all of them for a model the catalog does
        not know (a cost file calibrated on a tiny model has its bytes, not its tensors)."""
        if getattr(self, "_shares", None) is None:
            if not model_known(self.cfg.model):
                self._shares = ((1.0, 1),)
            else:
                spec = model_spec(self.cfg.model)
                self._shares = tuple(
                    (params / spec.total_params, n) for params, n in tensor_groups(spec)
                )
        return self._shares

    def publish(self, cluster, version: int) -> Proc:
        stall_s = yield from self.sync_weights(cluster, version)
        if self.more_batches(version):
            self.launch(cluster, version)
        return stall_s


class OneStep(GlobalSync):
    """One-step off-policy pipeline (Fig. 3b), e.g. verl's one-step-off-policy recipe."""

    name: ClassVar[str] = "one-step"
    description: ClassVar[str] = (
        "one-step staleness: batch i+1 is generated while the trainer trains on batch i; a "
        "global weight sync after each step stalls every rollout"
    )
    staleness_bound: ClassVar[int | None] = 1

    def start(self, cluster) -> None:
        super().start(cluster)
        self.launch(cluster, 0)

    def sample(self, cluster, step: int) -> Proc:
        groups = yield from super().sample(cluster, step)
        if step == 0:
            self.launch(cluster, 0)  # batch 1 on version 0 while the trainer trains batch 0
        return groups

    def publish(self, cluster, version: int) -> Proc:
        """After step ``version - 1``: wait for batch ``version`` (generated meanwhile), sync
        the new weights everywhere, start batch ``version + 1`` on them.

        The pipeline keeps its batch of lookahead to the end: the batch after the last step's
        is generated too (never trained on), so the last step waits for it and syncs like
        every other step; without it, the last step paid neither and a short run came out
        too fast (issue 30)."""
        env = cluster.env
        t0 = env.now
        ready = cluster.buffer.wait_for(self.cfg.workload.prompts_per_step)
        if ready is not None:
            yield ready
        yield from self.sync_weights(cluster, version)
        if self.more_batches(version):
            self.launch(cluster, version)
        return env.now - t0

    def trainer_waits(self, cluster, data_wait_s: float, publish_s: float) -> tuple[float, float]:
        """The wait for the next batch inside ``publish`` is generation; the rest, the sync."""
        sync_s = min(publish_s, self.sync_s(cluster))
        return data_wait_s + (publish_s - sync_s), sync_s


class Stream(GlobalSync):
    """Stream generation (Fig. 3c): training overlaps the generation tail of the same batch."""

    name: ClassVar[str] = "stream"
    description: ClassVar[str] = (
        "stream generation: the trainer trains mini-batches as their trajectories complete, "
        "but the weights change globally, once per global batch"
    )
    staleness_bound: ClassVar[int | None] = 0

    def start(self, cluster) -> None:
        super().start(cluster)
        self._trained = (0.0, 0.0)  # (when the step's last mini-batch is trained, its seconds)
        self._idle_s = 0.0  # the trainer's idle seconds in the last ``sample``
        self.launch(cluster, 0)

    def sample(self, cluster, step: int) -> Proc:
        """Take the global batch mini-batch by mini-batch, training each as it completes."""
        env, buffer = cluster.env, cluster.buffer
        n, k = self.cfg.workload.prompts_per_step, self.cfg.baselines.stream_minibatches
        sizes = [n // k + (1 if j < n % k else 0) for j in range(min(k, n))]
        groups, busy_until, total_s = [], env.now, 0.0
        idle_s = 0.0  # the trainer waiting with nothing to train (the step's ``gen_s``)
        for size in sizes:
            ready = buffer.wait_for(size)
            if ready is not None:
                yield ready
            idle_s += max(0.0, env.now - busy_until)
            part = buffer.take(size)
            groups += part
            lens = [t.prompt_len + t.response_len for g in part for t in g.trajs]
            train_s = cluster.train_step(lens, updates=1).total_s  # a mini-batch: one update
            total_s += train_s
            busy_until = _work_end(cluster, max(busy_until, env.now), train_s)
        self._trained = (busy_until, total_s)
        self._idle_s = idle_s
        return groups

    def trainer_waits(self, cluster, data_wait_s: float, publish_s: float) -> tuple[float, float]:
        """Mini-batches train while the batch's tail generates: the generation wait is the
        time the trainer sat idle between them, not all of ``data_wait_s``."""
        return self._idle_s, publish_s

    def train(self, cluster, groups, seq_lens: list[int]) -> Proc:
        busy_until, total_s = self._trained
        yield cluster.env.timeout(max(0.0, busy_until - cluster.env.now))
        return total_s

    def publish(self, cluster, version: int) -> Proc:
        stall_s = yield from self.sync_weights(cluster, version)
        if self.more_batches(version):
            self.launch(cluster, version)
        return stall_s


def _work_end(cluster, start_s: float, seconds: float) -> float:
    """When trainer work of ``seconds`` started at ``start_s`` ends, through trainer faults."""
    if cluster.faults is None:
        return start_s + seconds
    return cluster.faults.work_end(start_s, seconds)


class Partial(GlobalSync):
    """AReaL-like partial rollout with a staleness bound η (Fig. 3d).

    Work reaches the engines as the systems this models send it: each prompt group starts as
    soon as fewer than ``baselines.partial_inflight_prompts`` groups are generating and the
    staleness bound admits it (AReaL's ``max_concurrent_rollouts`` with its
    ``StalenessManager``; NeMo RL's asynchronous collector, nemo_rl/algorithms/async_utils.py),
    and a replica's engine admits a queued sequence whenever one finishes. So a busy replica is
    topped up as its groups finish (:meth:`top_up`), never left to drain before it refills."""

    name: ClassVar[str] = "partial"
    description: ClassVar[str] = (
        "partial rollout (AReaL-like): every update interrupts all rollouts, in-flight "
        "trajectories re-prefill and continue on the new weights; staleness bounded by eta"
    )
    interrupt_on_update: ClassVar[bool] = True

    def __init__(self, cfg):
        super().__init__(cfg)
        self.bound = StalenessBound(cfg.baselines.partial_eta)
        self.staleness_bound = cfg.baselines.partial_eta
        self.inflight_cap = (cfg.baselines.partial_inflight_prompts
                             or cfg.workload.prompts_per_step)  # fmt: skip

    def start(self, cluster) -> None:
        super().start(cluster)
        self.started_groups = 0
        self.inflight = 0  # groups started and not yet complete
        # Empty replicas waiting for a place in flight, first come first served: [event, live]
        self._room_queue: deque = deque()
        self.open: deque = deque()  # groups handed out and not yet trained on, in order

    def _admitted(self, want: int, version: int) -> int:
        """How many of the next ``want`` groups may start now on ``version``: fewer than the
        in-flight cap generating, and AReaL's bound: the group started k-th (0-based) is
        consumed, counting in order, by trainer version k // batch."""
        batch = self.cfg.workload.prompts_per_step
        limit = min(want, self.inflight_cap - self.inflight)
        k = 0
        while k < limit and self.bound.admits((self.started_groups + k) // batch, version):
            k += 1
        return k

    def _start(self, cluster, replica, k: int) -> None:
        groups = cluster.prompts.take(k)
        self.started_groups += k
        self.inflight += k
        self.open.extend(groups)
        replica.assign([t for g in groups for t in g.trajs])

    def refill(self, cluster, replica) -> Proc:
        """An empty replica takes up to its share of groups (``Cluster.batch_groups``) once
        the in-flight cap and the staleness bound admit one."""
        while True:
            yield from replica.wait_up()
            k = self._admitted(cluster.batch_groups, replica.version)
            if k:
                break
            waiter = [cluster.env.event(), True]
            self._room_queue.append(waiter)
            yield self._go | waiter[0]  # the next update moves the window; a group ends
            waiter[1] = False
        self._start(cluster, replica, k)

    def top_up(self, cluster, replica) -> None:
        """After trajectories finished on a busy replica: whole groups join its queue while it
        holds fewer than ``sim.max_batch`` sequences and the cap and the bound admit them."""
        room = replica.max_batch - len(replica.running) - len(replica.waiting)
        if room > 0:
            n = self.cfg.workload.samples_per_prompt
            k = self._admitted(-(-room // n), replica.version)
            if k:
                self._start(cluster, replica, k)

    def deliver(self, cluster, group) -> None:
        """A group completed: into the buffer, and its place in flight is free."""
        super().deliver(cluster, group)
        self.inflight -= 1
        queue = self._room_queue
        while queue:  # wake the first replica still waiting (one place: one replica)
            event, live = queue.popleft()
            if live:
                event.succeed()
                break

    def sample(self, cluster, step: int) -> Proc:
        """The batch for ``step``: every group that would outgrow η after this step (waiting
        for them to complete), then the oldest versions among the completed ones."""
        buffer, batch = cluster.buffer, self.cfg.workload.prompts_per_step
        while self.open and self.open[0].trajs[0].consumed_version != -1:
            self.open.popleft()
        due = [g for g in self.open if g.trajs[0].consumed_version == -1
               and not self.bound.admits(step + 1, _versions(g))]  # fmt: skip
        while True:
            due = [g for g in due if g.remaining > 0]
            if not due and len(buffer.groups) >= batch:
                break
            ready = buffer.wait_for(len(buffer.groups) + 1)
            if ready is not None:
                yield ready
        must = sum(1 for g in buffer.groups if not self.bound.admits(step + 1, _versions(g)))
        buffer.groups = deque(sorted(buffer.groups, key=lambda g: min(_versions(g))))
        return buffer.take(max(batch, must))

    def publish(self, cluster, version: int) -> Proc:
        """Global sync with interruption: every rollout drops its KV, loads ``version`` and
        re-prefills its trajectories (§2.3), while the trainer waits for the broadcast."""
        env = cluster.env
        sync_s = self.sync_s(cluster)
        until = env.now + sync_s
        for r in cluster.replicas:
            _interrupt(r, version, until)
            cluster.record_weight_wait(r, sync_s)
        yield env.timeout(sync_s)
        self._release(cluster)
        return sync_s


def _versions(group) -> list[int]:
    """Every version any trajectory of ``group`` was generated with so far."""
    return [v for t in group.trajs for v in (t.versions or (t.version,))]


def _interrupt(replica, version: int, until_s: float) -> None:
    """Stop ``replica``: its running trajectories lose their KV and queue first for re-prefill
    (``Replica.requeue_running``); all continue on ``version`` after ``until_s``. Those with
    tokens record the new version too, those without start over on it."""
    replica.requeue_running()
    for t in replica.waiting:
        if t.generated > 0:
            if (t.versions or (t.version,))[-1] != version:
                t.versions = (*(t.versions or (t.version,)), version)
        else:
            t.version, t.versions = version, ()
    replica.version = version
    replica.busy_until = max(replica.busy_until, until_s)
    replica.wake()


BASELINES: tuple[type[System], ...] = (Verl, OneStep, Stream, Partial)
