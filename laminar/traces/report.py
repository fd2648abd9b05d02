"""Plain-text tables of trace statistics and fits (what ``laminar trace show/fit`` print)."""

from __future__ import annotations

import math

import pandas as pd

from laminar.traces.fit import FitResult
from laminar.traces.presets import Preset
from laminar.traces.stats import TraceStats, per_step


def _num(v: float, digits: int = 0) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    return f"{v:,.{digits}f}"


def format_stats(stats: TraceStats) -> str:
    """The summary table of a trace."""
    s = stats
    size = (
        str(s.group_size_min)
        if s.group_size_min == s.group_size_max
        else f"{s.group_size_min}..{s.group_size_max}"
    )
    rows = [
        f"rows {s.rows:,}   steps {s.steps:,}   groups {s.groups:,}   group size {size}",
        "",
        "response length (tokens)",
        f"  p50          {_num(s.response_p50):>10}",
        f"  p90          {_num(s.response_p90):>10}",
        f"  p99          {_num(s.response_p99):>10}",
        f"  max          {_num(s.response_max):>10}",
        f"  mean         {_num(s.response_mean):>10}",
        f"  p99 / p50    {_num(s.p99_over_p50, 2):>10}",
        f"  truncated    {s.truncated_frac:>10.2%}   (finish_reason 'length')",
        "",
        f"prompt length (tokens): p50 {_num(s.prompt_p50)}, max {_num(s.prompt_max)}",
        f"mean response tokens per group  {_num(s.mean_tokens_per_group):>10}",
        f"group max / group mean          {_num(s.group_max_over_mean, 2):>10}",
        f"step max / step mean            {_num(s.step_max_over_mean, 2):>10}",
    ]
    if not math.isnan(s.turns_mean):
        rows.append(f"turns (mean)                    {_num(s.turns_mean, 2):>10}")
        rows.append(f"tool latency per call p50 (s)   {_num(s.tool_latency_p50_s, 2):>10}")
    return "\n".join(rows) + "\n"


def format_per_step(df: pd.DataFrame, max_rows: int = 24) -> str:
    """Per-step percentiles; long traces show their first and last steps."""
    table = per_step(df).round(0).astype("int64")
    if len(table) > max_rows:
        half = max_rows // 2
        table = pd.concat([table.head(half), table.tail(half)])
        note = f"(first and last {half} of {df['step'].nunique()} steps)\n"
    else:
        note = ""
    return "per step (response tokens)\n" + note + table.to_string() + "\n"


def format_fit(result: FitResult, preset: Preset | None = None) -> str:
    """Fitted parameters, side by side with a preset's when given."""
    header = f"{'parameter':30s} {'fitted':>12s}"
    if preset is not None:
        header += f" {preset.name:>12s}"
    rows = [f"fitted on {result.rows:,} rows; censored at {result.cap_tokens or 'no cap'}", header]
    for name, value in result.params.items():
        line = f"{name:30s} {value:>12.5g}"
        if preset is not None:
            line += f" {getattr(preset.params, name):>12.5g}"
        rows.append(line)
    return "\n".join(rows) + "\n"


def format_overrides(result: FitResult, preset: str) -> str:
    """A config snippet that replays the fitted generator (``workload.source``)."""
    params = ", ".join(f"{k}: {v:.6g}" for k, v in result.params.items())
    return (
        "workload:\n  source:\n    type: synthetic\n"
        f"    preset: {preset}\n    params: {{{params}}}\n"
    )
