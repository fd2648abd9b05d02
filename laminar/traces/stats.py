"""Summary statistics of a trace: the numbers that decide how long a synchronous step waits.

A synchronous RL step ends when its longest trajectory ends, so the bubble grows with the
spread of lengths: p99 / p50 over the trace (paper §1, §2.2: ~10x), and the max / mean ratio
within a GRPO group and within a step's global batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class TraceStats:
    """Shape of a trace's response lengths (tokens unless the name says otherwise)."""

    rows: int
    steps: int
    groups: int
    group_size_min: int
    group_size_max: int
    response_p50: float
    response_p90: float
    response_p99: float
    response_max: int
    response_mean: float
    p99_over_p50: float
    truncated_frac: float
    prompt_p50: float
    prompt_max: int
    mean_tokens_per_group: float
    """Mean over GRPO groups of the group's total response tokens."""
    group_max_over_mean: float
    """Mean over groups of (longest response / mean response): the in-group straggler factor;
    NaN when every group has one sample (an ungrouped trace)."""
    step_max_over_mean: float
    """Mean over steps of (longest response / mean response) in the step's global batch."""
    turns_mean: float
    """Mean assistant turns (NaN without a ``turns`` column)."""
    tool_latency_p50_s: float
    """Median per-call tool latency over trajectories that call tools (NaN without)."""

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def trace_stats(df: pd.DataFrame) -> TraceStats:
    """The statistics of a schema trace (``read_trace`` / ``synthesize`` output)."""
    r = df["response_len"].to_numpy(dtype="float64")
    p50, p90, p99 = np.percentile(r, PERCENTILES)
    by_group = df.groupby(["step", "prompt_id"], sort=False)["response_len"]
    sizes = by_group.size().to_numpy()
    g_max, g_mean = by_group.max().to_numpy(), by_group.mean().to_numpy()
    by_step = df.groupby("step", sort=False)["response_len"]
    s_ratio = (by_step.max() / by_step.mean().clip(lower=1e-9)).mean()
    grouped = sizes.max() > 1
    with np.errstate(divide="ignore", invalid="ignore"):
        g_ratio = float(np.nanmean(g_max / g_mean)) if grouped else float("nan")
    return TraceStats(
        rows=len(df),
        steps=int(df["step"].nunique()),
        groups=len(sizes),
        group_size_min=int(sizes.min()),
        group_size_max=int(sizes.max()),
        response_p50=float(p50),
        response_p90=float(p90),
        response_p99=float(p99),
        response_max=int(r.max()),
        response_mean=float(r.mean()),
        p99_over_p50=float(p99 / p50) if p50 > 0 else float("inf"),
        truncated_frac=float((df["finish_reason"] == "length").mean()),
        prompt_p50=float(df["prompt_len"].median()),
        prompt_max=int(df["prompt_len"].max()),
        mean_tokens_per_group=float(by_group.sum().mean()),
        group_max_over_mean=g_ratio,
        step_max_over_mean=float(s_ratio),
        turns_mean=float(df["turns"].mean()) if "turns" in df else float("nan"),
        tool_latency_p50_s=_tool_latency_p50(df),
    )


def _tool_latency_p50(df: pd.DataFrame) -> float:
    if "tool_latency_s" not in df or "turns" not in df:
        return float("nan")
    calls = df.loc[df["turns"] > 1, "tool_latency_s"]
    return float(calls.median()) if len(calls) else float("nan")


def per_step(df: pd.DataFrame) -> pd.DataFrame:
    """Response-length percentiles per step (columns p50, p90, p99, max, mean; index step)."""
    g = df.groupby("step")["response_len"]
    out = pd.DataFrame({f"p{q}": g.quantile(q / 100) for q in PERCENTILES})
    out["max"] = g.max()
    out["mean"] = g.mean()
    return out
