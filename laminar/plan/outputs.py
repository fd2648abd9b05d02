"""What a plan writes, and the table it prints.

A plan directory holds::

    plan.csv      every point: its settings (read back from what was simulated), status
                  (rejected / screened / short / full / duplicate / failed), the reason a
                  point was rejected, screened out or is a duplicate, the bottleneck, the
                  figures of its furthest stage (``laminar.plan.search``)
    pareto.csv    the Pareto fronts over the full simulations: ``front = staleness`` (train
                  tokens/s per GPU up, mean staleness down) and, with a GPU-hour price,
                  ``front = cost`` (train tokens/s up, USD per million train tokens down)
    best.yaml     the best full simulation's config (train tokens/s per GPU), runnable as is
                  by ``laminar simulate`` and ``laminar train``
    pareto.png    the points and the staleness front (``laminar.plotting.plan``)
    plan.json     what was searched, counts, cache hits, wall time
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from laminar.config import dump_config
from laminar.plan.search import PlanResult, pareto_ids
from laminar.rundir import run_output


def pareto_frame(result: PlanResult) -> pd.DataFrame:
    """The fronts over the full simulations (see module docstring)."""
    df = result.points
    full = df[df["status"] == "full"].set_index("pid")
    fronts = [("staleness", "train_tokens_per_s_per_gpu", "staleness_mean")]
    if result.options.gpu_hour_price is not None:
        fronts.append(("cost", "train_tokens_per_s", "usd_per_million_tokens"))
    parts = []
    for name, up, down in fronts:
        ids = pareto_ids(full[up].to_dict(), full[down].to_dict())
        part = full.loc[ids].reset_index()
        part.insert(0, "front", name)
        parts.append(part.sort_values([down, "pid"]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def best_yaml(result: PlanResult) -> str | None:
    """The best point's config as YAML, with a header saying what it is (None: no point was
    simulated in full)."""
    if result.best is None:
        return None
    from laminar.sim.registry import all_systems

    cfg = result.full_configs[result.best]
    system = cfg.sim.systems[0]
    # The runtime has two modes: laminar, and sync (the colocated verl-like baseline).
    mode = "sync" if all_systems()[system].colocated else "laminar"
    cfg = cfg.model_copy(update={"runtime": cfg.runtime.model_copy(update={"mode": mode})})
    row = result.points.set_index("pid").loc[result.best]
    header = (
        f"# Best point of a laminar plan (point {result.best}): {system} on {row['gpus']} GPUs, "
        f"{row['trainer_gpus']} train, rollout TP {row['rollout_tp']}, max batch "
        f"{row['max_batch']}.\n# Simulated {row['train_tokens_per_s']:.4g} train tokens/s "
        f"({row['train_tokens_per_s_per_gpu']:.4g} per GPU), mean staleness "
        f"{row['staleness_mean']:.3g}; bottleneck: {row['bottleneck']}.\n"
        f"# Run it: laminar simulate best.yaml   |   laminar train best.yaml "
        f"(runtime.mode {mode})\n"
    )
    return header + dump_config(cfg)


def write_plan(result: PlanResult, out: str | Path, *, force: bool = False) -> Path:
    """Write the plan directory ``out`` (whole, or not at all; an existing directory only if
    it is a previous run or ``force``: ``laminar.rundir``)."""
    out = Path(out)
    with run_output(out, force=force, command="plan") as stage:
        write_plan_into(result, stage)
    return out


def write_plan_into(result: PlanResult, plan_dir: Path) -> None:
    """Write the plan's files into the (empty, staged) directory ``plan_dir``."""
    from laminar.plotting.common import save_figure
    from laminar.plotting.plan import pareto_figure

    pareto = pareto_frame(result)
    result.points.to_csv(plan_dir / "plan.csv", index=False)
    pareto.to_csv(plan_dir / "pareto.csv", index=False)
    text = best_yaml(result)
    if text is not None:
        (plan_dir / "best.yaml").write_text(text)
    save_figure(pareto_figure(result.points, pareto), plan_dir / "pareto.png")
    meta = {**result.meta, "best_pid": result.best, "search": _space(result)}
    (plan_dir / "plan.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")


def _space(result: PlanResult) -> dict:
    s, o = result.space, result.options
    return {
        "gpus": list(s.gpus),
        "systems": list(s.systems),
        "trainer_fractions": list(s.trainer_fractions),
        "rollout_tps": list(s.rollout_tps),
        "max_batches": list(s.max_batches),
        "trainer_layouts": list(s.trainer_layouts),
        "repack": list(s.repack),
        "extra": {k: list(v) for k, v in s.extra.items()},
        "short_steps": o.short_steps,
        "short_warmup": o.short_warmup,
        "screen_keep": o.screen_keep,
        "top": o.top,
        "max_points": o.max_points,
        "gpu_hour_price": o.gpu_hour_price,
    }


def top_table(result: PlanResult, n: int = 10) -> str:
    """The best ``n`` simulated points, full simulations first, as a text table."""
    df = result.points
    sim = df[df["status"].isin(["full", "short"])].copy()
    sim["_full"] = sim["status"] == "full"
    sim = sim.sort_values(["_full", "train_tokens_per_s_per_gpu", "pid"],
                          ascending=[False, False, True]).head(n)  # fmt: skip
    cols = ["pid", "gpus", "system", "trainer_gpus", "rollout_tp", "max_batch", "repack",
            "trainer_layout", "status", "train_tokens_per_s", "train_tokens_per_s_per_gpu",
            "staleness_mean", "bottleneck"]  # fmt: skip
    if "usd_per_million_tokens" in sim:
        cols.insert(-1, "usd_per_million_tokens")
    shown = sim[cols].rename(columns={
        "trainer_gpus": "train GPUs", "rollout_tp": "TP", "max_batch": "B",
        "trainer_layout": "layout",
        "train_tokens_per_s": "tokens/s", "train_tokens_per_s_per_gpu": "tokens/s/GPU",
        "staleness_mean": "staleness", "usd_per_million_tokens": "USD/Mtok",
    })  # fmt: skip
    counts = df["status"].value_counts()
    kinds = ["full", "short", "screened", "rejected"]
    kinds += [k for k in ("duplicate", "failed") if counts.get(k, 0)]
    summary = ", ".join(f"{counts.get(k, 0)} {k}" for k in kinds)
    rejected = df[df["status"] == "rejected"]
    lines = [f"{len(df)} points: {summary}"]
    if len(rejected):
        memory = int((rejected["bottleneck"] == "memory").sum())
        lines.append(f"rejected: {memory} for memory, {len(rejected) - memory} other "
                     "(reasons in plan.csv)")  # fmt: skip
    if len(shown):
        lines += ["", shown.to_string(index=False, float_format=lambda v: f"{v:.4g}")]
    else:  # nothing ran: say why, most frequent reasons first
        reasons = df.loc[df["reason"] != "", "reason"].value_counts().head(3)
        lines += ["", "no point was simulated; most frequent reasons:"]
        lines += [f"  {n} x {why}" for why, n in reasons.items()]
    return "\n".join(lines)
