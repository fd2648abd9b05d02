"""The runtime job's workload in the simulator: a run's trace in issue order, or task lengths."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.traces.lengths import MEAN_KEY, P99_KEY, warn_trace_overrides

Z_99 = 2.3263478740408408  # standard normal quantile at 0.99 (the task's tail_ratio is p99/p50)


def runtime_workload(cfg: LaminarConfig) -> pd.DataFrame | None:
    """Lengths for the runtime job: a run's trace in the order its prompts were issued, or the
    task's answer lengths; None for a non-runtime source the usual loader handles."""
    w = cfg.workload
    if w.source.type == "trace":
        from laminar.traces import read_trace

        warn_trace_overrides(cfg)

        trace = read_trace(w.source.path, max_response_len=w.max_response_len)
        return _issue_order(trace, w.prompts_per_step)
    for key, value in ((MEAN_KEY, w.response_len_mean), (P99_KEY, w.response_len_p99)):
        if value is not None:
            raise ConfigError(
                "config", key, "the runtime job's response lengths are its task's: set "
                "runtime.task.median_len and runtime.task.tail_ratio instead"
            )  # fmt: skip
    return task_workload(cfg)


def _issue_order(trace: pd.DataFrame, prompts_per_step: int) -> pd.DataFrame:
    """A run's trace re-keyed so the simulator hands its groups out by prompt id, as the
    runtime's prompt pool did (its ``step`` column is the consuming step); incomplete groups
    (in flight when the run stopped) are dropped."""
    df = trace.sort_values(["prompt_id", "sample_index"], kind="stable")
    sizes = df.groupby("prompt_id")["sample_index"].transform("size")
    df = df[sizes == sizes.max()].copy()
    order = {p: i for i, p in enumerate(dict.fromkeys(df["prompt_id"]))}
    df["prompt_id"] = df["prompt_id"].map(order)
    df["step"] = df["prompt_id"] // prompts_per_step
    cols = ["step", "prompt_id", "sample_index", "prompt_len", "response_len", "finish_reason"]
    return df[cols].reset_index(drop=True)


def task_workload(cfg: LaminarConfig) -> pd.DataFrame:
    """The repeat task's lengths (``runtime.task``): answer n log-normal (median, p99 =
    ``tail_ratio`` x median) clipped to [1, max_response_len - 1], response n + 1 (the end of
    sequence), prompt ``"<n>*<c>="`` plus BOS. A policy that answers exactly; the calibration
    runs' own traces measure how far the real one strays."""
    w, task = cfg.workload, cfg.runtime.task
    if getattr(task, "type", "repeat") != "repeat":
        raise ConfigError(
            "config",
            "workload.source",
            f"response lengths of a {task.type!r} task are not known before a run: replay a "
            "run's trace (workload.source: {type: trace, path: RUN/trajectories.parquet})",
        )
    steps = 2 * w.steps + 2  # room to generate ahead of the trainer (``load_run_workload``)
    groups = steps * w.prompts_per_step
    rng = np.random.default_rng([cfg.seed, 15])
    sigma = math.log(task.tail_ratio) / Z_99
    answer = np.rint(np.exp(math.log(task.median_len) + sigma * rng.standard_normal(groups)))
    answer = np.clip(answer, 1, w.max_response_len - 1).astype(np.int64)
    n = w.samples_per_prompt
    prompt_len = np.array([len(str(a)) + 3 for a in answer], dtype=np.int64)  # BOS n * c =
    return pd.DataFrame(
        {
            "step": np.repeat(np.arange(groups) // w.prompts_per_step, n),
            "prompt_id": np.repeat(np.arange(groups), n),
            "sample_index": np.tile(np.arange(n), groups),
            "prompt_len": np.repeat(np.minimum(prompt_len, w.max_prompt_len), n),
            "response_len": np.repeat(answer + 1, n),
            "finish_reason": "stop",
        }
    )
