"""The analytic screen: is a point feasible, and roughly how fast could it be? (no simulation)

Feasibility: the config validates, passes the simulator's own setup checks
(``laminar.sim.cluster.check_setup``: a replica's GPUs divide a machine, a replica and the
trainer get GPUs, the longest trajectory fits a replica's KV cache, faults name existing
machines), and fits in GPU memory (``laminar.specs.memory.check_fit``: trainer states and
activations, rollout weights and a minimum KV cache; ``laminar.specs.layoutfit`` for a trainer
laid out with TP/PP/EP/CP).

Estimate, per training step, from the cost model (``laminar.sim.cost``) and the workload's
token counts: generation seconds = response tokens / (replicas x b / t(b)), with b the
trajectories a replica holds at once (bounded by ``sim.max_batch``, its share of the batch and
its KV cache) and t(b) the decode step at half-generated length; a system that syncs weights
globally also waits for the step's longest response at a batch of one. Training seconds =
``laminar.sim.layout.step_time`` on the trainer GPUs and their layout; the weight hand-over is
a globally syncing system's own ``sync_s`` (verl's resharding a tensor at a time, the others'
broadcast chain), one RDMA copy of the weights for Laminar. A colocated system adds the three;
a decoupled one overlaps generation with training. The estimate ranks points within one system
and GPU count; it is not a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.sim.layout import TrainerLayout, recomputes_old_logprob, step_time


@dataclass(frozen=True)
class WorkloadStats:
    """Token counts of a workload that the estimate needs (lengths capped at the maxima)."""

    prompt_tokens: float  # mean per trajectory
    response_tokens: float  # mean per trajectory
    step_seq_lens: tuple[int, ...]  # prompt + response of a median step's trajectories
    step_longest_response: float  # mean over steps of the longest response

    @classmethod
    def of(cls, cfg: LaminarConfig, workload: pd.DataFrame) -> WorkloadStats:
        w = cfg.workload
        prompt = np.minimum(workload["prompt_len"].to_numpy(np.int64), w.max_prompt_len)
        resp = np.minimum(workload["response_len"].to_numpy(np.int64), w.max_response_len)
        steps = workload["step"].to_numpy()
        df = pd.DataFrame({"step": steps, "seq": prompt + resp, "resp": resp})
        per_step = df.groupby("step").agg(tokens=("seq", "sum"), longest=("resp", "max"))
        median_step = per_step.index[np.argsort(per_step["tokens"].to_numpy())[len(per_step) // 2]]
        lens = df.loc[df["step"] == median_step, "seq"].astype(int).tolist()
        return cls(
            float(prompt.mean()),
            float(resp.mean()),
            tuple(lens),
            float(per_step["longest"].mean()),
        )


@dataclass(frozen=True)
class Screen:
    """The screen's verdict on one point."""

    feasible: bool
    reason: str = ""  # why not, when infeasible
    bottleneck: str = ""  # "memory" for memory rejections; the estimate's largest part else
    estimate_tokens_per_s: float = float("nan")
    trainer_gpus: int = 0
    replicas: int = 0


def screen(cfg: LaminarConfig, stats: WorkloadStats) -> Screen:
    """Feasibility and the analytic estimate of ``cfg`` (one system, ``cfg.sim.systems[0]``)."""
    from laminar.sim.cluster import check_setup
    from laminar.sim.costdata import cost_model_for
    from laminar.sim.registry import resolve_systems

    m = cfg.model
    system = resolve_systems(cfg.sim.systems)[0](cfg)
    memory = _memory_fit(cfg, system.colocated)  # first: its reasons name what would fit
    if memory:
        return Screen(False, memory, "memory")
    try:
        cost = cost_model_for(cfg)
    except ConfigError as e:  # the rollout weights leave no room for a KV cache
        return Screen(False, str(e), "memory")
    if cost.replica_gpus != m.rollout_tp * m.rollout_ep:
        # A cost file describes one replica size; another TP would be simulated as that one.
        return Screen(False, f"sim.cost_file describes {cost.replica_gpus}-GPU rollout "
                      f"replicas, not rollout TP {m.rollout_tp} x EP {m.rollout_ep}")  # fmt: skip
    try:
        split = check_setup(cfg, system, cost)  # the simulator's own checks, before it runs
    except ConfigError as e:
        kv = e.key_path == "workload.max_response_len"  # the longest trajectory's KV
        return Screen(False, str(e), "memory" if kv else "")
    est, bottleneck = _estimate(cfg, stats, system, split, cost)
    return Screen(True, "", bottleneck, est, split.trainer_gpus, split.replicas)


def _memory_fit(cfg: LaminarConfig, colocated: bool) -> str:
    """Why ``cfg`` does not fit in GPU memory (``laminar.specs.memory.check_fit``; '' when it
    fits). A colocated system trains on every GPU. A cost file of a model outside the catalog
    (a calibrated tiny model) has no model facts to check, as in ``laminar.sim.simulate``."""
    from laminar.specs.layoutfit import fit_problem
    from laminar.specs.model import model_known

    if cfg.sim.cost_file and not model_known(cfg.model):
        return ""
    problem = fit_problem(cfg, trainer_gpus=cfg.cluster.gpus if colocated else None)
    return "" if problem is None else f"memory: {problem.detail}"


def _handover_s(system, split, cost) -> float:
    """A step's weight hand-over: a globally syncing system's own (``sync_s``, as the simulator
    charges it: the chain to the rollout machines, verl's resharding a tensor at a time), else
    (Laminar's relays) one RDMA copy of the weights to the master relay."""
    if system.weight_sync == "global":
        return system.sync_s(SimpleNamespace(cost=cost, split=split))
    return cost.transfer_s(cost.weight_bytes, "rdma")


def _estimate(cfg, stats: WorkloadStats, system, split, cost) -> tuple[float, str]:
    """(train tokens/s, its largest part) of one point; see the module docstring."""
    w = cfg.workload
    n_traj = w.prompts_per_step * w.samples_per_prompt
    held = system.batch_groups(split) * w.samples_per_prompt
    kv_per_traj = stats.prompt_tokens + stats.response_tokens / 2
    b = max(1, min(cfg.sim.max_batch, held, int(cost.kv_capacity_tokens / max(kv_per_traj, 1))))
    step_b = cost.decode_step_s(b, b * kv_per_traj)
    gen_s = n_traj * stats.response_tokens / (split.replicas * b / step_b)
    if system.weight_sync == "global":  # a round ends with its longest response
        tail = stats.step_longest_response * cost.decode_step_s(1, kv_per_traj)
        gen_s = max(gen_s, tail)
    train_s = step_time(
        cost, TrainerLayout.of(cfg), stats.step_seq_lens, split.trainer_gpus,
        old_logprob=recomputes_old_logprob(cfg, system), reference=cfg.trainer.reference,
    ).total_s  # fmt: skip
    sync_s = _handover_s(system, split, cost)
    parts = {"generation": gen_s, "training": train_s, "weight sync": sync_s}
    if system.colocated:
        step_s = gen_s + train_s + sync_s
    elif system.weight_sync == "global":
        step_s = max(gen_s, train_s) + sync_s
    else:
        step_s = max(gen_s, train_s + sync_s)
    tokens = sum(stats.step_seq_lens) * n_traj / max(len(stats.step_seq_lens), 1)
    return tokens / step_s, max(parts, key=parts.get)
