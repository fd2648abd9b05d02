"""The readable summary printed by ``laminar simulate``: one column per system."""

from __future__ import annotations

import math

import pandas as pd

# (summary column, label, format); formats take the value and return text.
ROWS: list[tuple[str, str, str]] = [
    ("gpus", "GPUs (trainer + rollout)", "split"),
    ("replicas", "rollout replicas", "int"),
    ("steps", "trainer steps", "int"),
    ("warmup_steps", "warm-up steps left out", "int"),
    ("sim_time_s", "simulated time (s)", "f1"),
    ("step_time_s_mean", "step time, mean (s)", "f2"),
    ("gen_s_mean", "  waiting for generation (s)", "f2"),
    ("old_logprob_s_mean", "  old log-probs (s)", "f2"),
    ("ref_s_mean", "  reference (s)", "f2"),
    ("update_s_mean", "  update (s)", "f2"),
    ("weight_sync_s_mean", "  weight sync (s)", "f3"),
    ("train_tokens_per_s", "training throughput (tokens/s)", "big"),
    ("gen_tokens_per_s", "generation throughput (tokens/s)", "big"),
    ("mean_kv_util", "KV-cache use, mean", "pct"),
    ("rollout_idle_frac", "rollout idle time", "pct"),
    ("staleness_mean", "staleness, mean", "f2"),
    ("staleness_max", "staleness, max", "int"),
    ("actor_stall_s_mean", "actor stall per update (s)", "f3"),
    ("weight_wait_s_mean", "rollout weight load (s)", "f3"),
    ("repack_moves", "repack moves", "int"),
]


def _fmt(kind: str, row: pd.Series, col: str) -> str:
    if col not in row:
        return "-"
    v = row[col]
    if kind == "split":
        return f"{int(v)} ({int(row['trainer_gpus'])} + {int(row['rollout_gpus'])})"
    if isinstance(v, float) and math.isnan(v):
        return "-"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "big":
        return f"{v:,.0f}"
    if kind == "pct":
        return f"{100 * v:.1f}%"
    return f"{v:.{kind[1]}f}"


def summary_table(summary: pd.DataFrame) -> str:
    """Metrics down, systems across; rates are over the post-warm-up window."""
    labels = [label for _, label, _ in ROWS]
    cols = {
        row["system"]: [_fmt(kind, row, col) for col, _, kind in ROWS]
        for _, row in summary.iterrows()
    }
    width = max(len(x) for x in labels)
    widths = {s: max(len(s), *(len(x) for x in vals)) for s, vals in cols.items()}
    head = " " * width + "  " + "  ".join(s.rjust(widths[s]) for s in cols)
    lines = [head, "-" * len(head)]
    for i, label in enumerate(labels):
        cells = "  ".join(cols[s][i].rjust(widths[s]) for s in cols)
        lines.append(f"{label.ljust(width)}  {cells}")
    return "\n".join([*lines, "", *steady_notes(summary)])


def steady_notes(summary: pd.DataFrame) -> list[str]:
    """One line per system on whether its figures are steady-state ones (laminar.sim.steady)."""
    if "steady_state" not in summary:
        return []
    out = []
    for _, row in summary.iterrows():
        state = str(row["steady_state"])
        if state == "steady":
            out.append(f"{row['system']}: steady state (no trend after the warm-up)")
        else:
            out.append(
                f"{row['system']}: NOT steady state, the run is too short ({state}); raise "
                "workload.steps (or sim.warmup_steps, if the trend is the warm-up's)"
            )
    return out
