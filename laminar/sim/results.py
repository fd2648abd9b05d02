"""Tables out of a finished :class:`~laminar.sim.cluster.Cluster` (one system).

Rates and utilisations are measured over a window: from the end of trainer step
``sim.warmup_steps`` (0: the start; ``auto``: a quarter of the steps) to the end of the last
step, as the paper averages after a warm-up (§8). Definitions (all per system):

- ``train_tokens_per_s``: prompt + response tokens of the trajectories trained in the window,
  per second (the paper's training throughput);
- ``gen_tokens_per_s``: tokens decoded by all rollouts in the window, per second;
- ``mean_kv_util``: time-average of KV tokens in use over KV capacity, over all replicas;
- ``rollout_idle_frac``: share of replica time with no trajectory to decode (pulling weights,
  waiting for prompts or for the trainer to make room);
- ``staleness_mean`` / ``staleness_max``: over trajectories trained in the window (§6);
- ``actor_stall_s_mean``: trainer seconds per step spent handing weights over (§4);
- ``weight_wait_s_mean``: seconds per weight load a rollout spends, over loads in the window;
- ``gen_s_mean``, ``old_logprob_s_mean``, ``ref_s_mean``, ``update_s_mean``,
  ``weight_sync_s_mean``: the step's stages (``laminar.sim.stages``: what each holds, how
  overlapped stages are reported), averaged over the window's steps; they add up to
  ``step_time_s_mean`` (to rounding) when no trainer outage hits the window;
- ``warmup_steps``: the steps left out; ``steady_state``: ``steady``, or why the window's
  figures may not be steady-state ones (``laminar.sim.steady``: a trend test on its steps).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from laminar.sim.cluster import Cluster
from laminar.sim.stages import STAGES
from laminar.sim.steady import steady_state
from laminar.sim.turns import env_wait_s

SUMMARY_COLUMNS = [
    "system",
    "gpus",
    "steps",
    "sim_time_s",
    "train_tokens_per_s",
    "gen_tokens_per_s",
    "mean_kv_util",
    "staleness_mean",
    "staleness_max",
    "rollout_idle_frac",
    "actor_stall_s_mean",
    "weight_wait_s_mean",
    "step_time_s_mean",
    *(f"{stage}_mean" for stage in STAGES),
    "trainer_gpus",
    "rollout_gpus",
    "replicas",
    "window_s",
    "trajectories_done",
    "preemptions",
    "repack_moves",
    "moved_trajectories",
    "reprefill_tokens",
    "decoded_tokens",
    "warmup_steps",
    "steady_state",
]


def summary_row(c: Cluster) -> dict:
    """The one-line summary of a run (see module docstring for each figure)."""
    steps = pd.DataFrame(c.trainer.rows)
    end = c.totals()
    nrep = len(c.replicas)
    row = {
        "system": c.system.name,
        "gpus": c.cfg.cluster.gpus,
        "steps": c.trainer.steps_done,
        "sim_time_s": c.env.now,
        "trainer_gpus": c.split.trainer_gpus,
        "rollout_gpus": nrep * c.cost.replica_gpus,
        "replicas": nrep,
        "trajectories_done": sum(r.completed for r in c.replicas),
        "preemptions": sum(r.preemptions for r in c.replicas),
        "repack_moves": c.manager.moves if c.manager else 0,
        "moved_trajectories": c.manager.moved_trajectories if c.manager else 0,
        "reprefill_tokens": sum(r.reprefill_tokens for r in c.replicas),
        "decoded_tokens": int(end["decoded"]),
        "warmup_steps": c.warmup_steps,
        "steady_state": steady_state(steps, c.warmup_steps),
    }
    start = c.window
    window_s = end["t_s"] - start["t_s"] if start is not None else 0.0
    row["window_s"] = window_s
    win = steps[steps["step"] >= c.warmup_steps] if len(steps) else steps
    if window_s <= 0 or len(win) == 0:  # no step after the warm-up (a run cut by max time)
        nan = math.nan
        row.update(dict.fromkeys(set(SUMMARY_COLUMNS) - set(row), nan))
        return row
    n = win["trajectories"].sum()
    waits = [w for t, _, w in c.weight_waits if t >= start["t_s"]]
    row.update(
        {
            "train_tokens_per_s": win["tokens"].sum() / window_s,
            "gen_tokens_per_s": (end["decoded"] - start["decoded"]) / window_s,
            "mean_kv_util": (end["kv_token_s"] - start["kv_token_s"])
            / (nrep * c.cost.kv_capacity_tokens * window_s),
            "rollout_idle_frac": (end["idle_s"] - start["idle_s"]) / (nrep * window_s),
            "staleness_mean": (win["staleness_mean"] * win["trajectories"]).sum() / n,
            "staleness_max": int(win["staleness_max"].max()),
            "actor_stall_s_mean": win["actor_stall_s"].mean(),
            "weight_wait_s_mean": float(np.mean(waits)) if waits else 0.0,
            "step_time_s_mean": window_s / len(win),
            **{f"{stage}_mean": win[stage].mean() for stage in STAGES},
        }
    )
    return row


def steps_frame(c: Cluster) -> pd.DataFrame:
    """One row per trainer step."""
    df = pd.DataFrame(c.trainer.rows)
    df.insert(0, "system", c.system.name)
    return df


def replicas_frame(c: Cluster) -> pd.DataFrame:
    """The per-replica time series: a point at every segment start and every idle start.

    ``kv_tokens`` is the KV in use at that moment; ``kv_peak_tokens`` the KV the segment
    reaches at its planned end (KV only grows within a segment), 0 while idle."""
    cols = ["t_s", "replica", "kv_tokens", "kv_peak_tokens", "running", "waiting", "weight_version"]
    df = pd.DataFrame(c.series, columns=cols)
    df.insert(0, "system", c.system.name)
    df.insert(2, "replica_id", "r" + df.pop("replica").astype(str))
    df["kv_util"] = df["kv_tokens"] / c.cost.kv_capacity_tokens
    df["kv_capacity_tokens"] = c.cost.kv_capacity_tokens
    return df


def trajectories_frame(c: Cluster, workload: pd.DataFrame) -> pd.DataFrame:
    """Every trajectory handed to a rollout: the trace columns plus what the run measured."""
    ts = c.prompts.trajectories
    max_len = c.cfg.workload.max_response_len
    rows = np.fromiter((t.row for t in ts), dtype=np.int64, count=len(ts))
    src = workload.loc[rows] if len(ts) else workload.iloc[:0]
    df = pd.DataFrame({"system": c.system.name, "traj_id": [t.tid for t in ts]})
    df["step"] = [t.group.step for t in ts]
    df["prompt_id"] = [t.group.prompt_id for t in ts]
    df["sample_index"] = [t.sample_index for t in ts]
    df["prompt_len"] = [t.prompt_len for t in ts]
    df["response_len"] = resp = np.array([t.response_len for t in ts], dtype=np.int64)
    reason = (
        src["finish_reason"].astype(str).to_numpy()
        if "finish_reason" in src
        else np.full(len(ts), "stop", dtype=object)
    )
    df["finish_reason"] = np.where(resp >= max_len, "length", reason)
    for col in ("turns", "tool_latency_s", "source_prompt_id"):
        if col in src:
            df[col] = src[col].to_numpy()
    df["epoch"] = [t.group.epoch for t in ts]
    df["group_id"] = [t.group.gid for t in ts]
    df["gen_start_s"] = [t.gen_start_s for t in ts]
    df["gen_end_s"] = [t.gen_end_s for t in ts]
    df["replica_id"] = [t.replica for t in ts]
    # Under mixed-version systems the oldest version is the generation version (§6).
    df["weight_version"] = [min(t.versions) if t.versions else t.version for t in ts]
    df["weight_versions"] = [
        ";".join(map(str, t.versions)) if t.versions else str(t.version) for t in ts
    ]
    df["consumed_version"] = [t.consumed_version for t in ts]
    df["consumed_s"] = [t.consumed_s for t in ts]
    df["staleness"] = np.where(
        df["consumed_version"] >= 0, df["consumed_version"] - df["weight_version"], -1
    )
    df["generated_tokens"] = [t.generated for t in ts]
    df["preemptions"] = [t.preemptions for t in ts]
    df["moves"] = [t.moves for t in ts]
    if c.turns is not None:  # multi-turn: seconds waited on the environment (laminar.sim.turns)
        df["env_wait_s"] = env_wait_s(ts)
    return df
