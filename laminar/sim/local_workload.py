"""The runtime job's workload in the simulator: a run's trace in issue order, or task lengths."""

from __future__ import annotations

import numpy as np
import pandas as pd

from laminar.config import LaminarConfig
from laminar.costfile import read_cost_file
from laminar.errors import ConfigError
from laminar.policy.repeatanswers import answer_len
from laminar.traces.lengths import MEAN_KEY, P99_KEY, warn_trace_overrides
from laminar.traces.schema import TOOL_COLUMNS


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
    cols += [c for c in TOOL_COLUMNS if c in df]  # multi-turn trajectories (laminar.sim.turns)
    return df[cols].reset_index(drop=True)


def task_workload(cfg: LaminarConfig) -> pd.DataFrame:
    """The repeat task's lengths (``runtime.task``): the answer n of each prompt the runtime
    hands out (log-normal, median and p99 = ``tail_ratio`` x median, clipped to
    [1, max_response_len - 1]; ``laminar.policy.repeatanswers``, the runtime's own draw),
    prompt ``"<n>*<c>="`` plus BOS (the number's digits + 4 tokens, as the runtime's trace
    records them). The response is n + 1 (the end of sequence) for a policy that answers
    exactly; with a cost file that measured how the calibration runs' policy answered (its
    ``policy_lengths``, ``laminar.calibrate.answers``), each sample's response is drawn from
    that instead (:func:`as_answered`)."""
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
    # the prompts the runtime hands out, in its order (prompt ids 0, 1, ... from the seed)
    answer = np.array([answer_len(cfg.seed, g, median_len=task.median_len,
                                  tail_ratio=task.tail_ratio, max_answer_len=w.max_response_len - 1)
                       for g in range(groups)], dtype=np.int64)  # fmt: skip
    n = w.samples_per_prompt
    prompt_len = np.array([len(str(a)) + 4 for a in answer], dtype=np.int64)  # BOS n * c =
    exact = np.repeat(answer + 1, n)
    answers = read_cost_file(cfg.sim.cost_file).policy_lengths if cfg.sim.cost_file else None
    if answers is None:
        response, reason = exact, np.full(len(exact), "stop", dtype=object)
    else:
        rng = np.random.default_rng([cfg.seed, 16])
        response = as_answered(exact, answers, w.max_response_len, rng)
        reason = np.where(response >= w.max_response_len, "length", "stop")
    return pd.DataFrame(
        {
            "step": np.repeat(np.arange(groups) // w.prompts_per_step, n),
            "prompt_id": np.repeat(np.arange(groups), n),
            "sample_index": np.tile(np.arange(n), groups),
            "prompt_len": np.repeat(np.minimum(prompt_len, w.max_prompt_len), n),
            "response_len": response,
            "finish_reason": reason,
        }
    )


def as_answered(exact: np.ndarray, answers: dict, max_len: int,
                rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """Each sample's response length as the calibration's policy answered (``answers``: the
    cost file's ``policy_lengths``): in the bucket of its exact length (the first or last
    bucket beyond them), a runaway to ``max_len`` with the bucket's ``cap_frac``, else the
    exact length times one of the bucket's ratio quantiles drawn at random, within
    [1, ``max_len``]."""
    buckets = answers["buckets"]
    lows = np.array([b["answer_min"] for b in buckets])
    which = np.clip(np.searchsorted(lows, exact, side="right") - 1, 0, len(buckets) - 1)
    u, pick = rng.random(len(exact)), rng.random(len(exact))
    out = np.empty(len(exact), dtype=np.int64)
    for i, b in enumerate(buckets):
        rows = which == i
        q = np.asarray(b["ratio_q"], dtype=float)
        ratio = q[np.minimum((pick[rows] * len(q)).astype(int), len(q) - 1)]
        length = np.rint(exact[rows] * ratio)
        out[rows] = np.where(u[rows] < b["cap_frac"], max_len, length)
    return np.clip(out, 1, max_len).astype(np.int64)
