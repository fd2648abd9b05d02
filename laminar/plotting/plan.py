"""Pictures of a plan (``laminar plan``): its points and Pareto front, from ``plan.csv``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from laminar.plotting.common import color, new_figure, read_csv

PLAN_COLUMNS = ("pid", "gpus", "system", "status", "train_tokens_per_s_per_gpu", "staleness_mean")


def load_plan(plan_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``plan.csv``, ``pareto.csv``) of a plan directory; errors name the file."""
    p = Path(plan_dir)
    return read_csv(p / "plan.csv", PLAN_COLUMNS), read_csv(p / "pareto.csv", ("pid", "front"))


def pareto_figure(plan: pd.DataFrame, pareto: pd.DataFrame | None = None):
    """Train tokens/s per GPU against mean staleness: every simulated point (hollow: short
    simulations only), the full simulations filled, the staleness Pareto front as a line."""
    fig, axes = new_figure(1, width=6.4)
    ax = axes[0][0]
    sim = plan[plan["status"].isin(["short", "full"])]
    for system, rows in sim.groupby("system", sort=False):
        c = color(system)
        short, full = rows[rows["status"] == "short"], rows[rows["status"] == "full"]
        ax.scatter(short["staleness_mean"], short["train_tokens_per_s_per_gpu"], s=18,
                   facecolors="none", edgecolors=c, alpha=0.6)  # fmt: skip
        ax.scatter(full["staleness_mean"], full["train_tokens_per_s_per_gpu"], s=36, color=c,
                   label=system)  # fmt: skip
    if pareto is not None and len(pareto):
        ids = pareto.loc[pareto["front"] == "staleness", "pid"]
        front = plan[plan["pid"].isin(ids)].sort_values("staleness_mean")
        ax.step(front["staleness_mean"], front["train_tokens_per_s_per_gpu"], where="post",
                color="black", lw=1, label="Pareto front")  # fmt: skip
    ax.set_xlabel("mean staleness (versions)")
    ax.set_ylabel("train tokens / s per GPU")
    gpus = sorted(int(g) for g in np.unique(plan["gpus"]))
    ax.set_title(f"plan: {len(plan)} points, {', '.join(map(str, gpus))} GPUs "
                 "(hollow: short runs)")  # fmt: skip
    ax.grid(alpha=0.3)
    if len(sim):
        ax.legend(fontsize=9)
    else:
        ax.text(0.5, 0.5, "no point was simulated (reasons in plan.csv)", ha="center",
                transform=ax.transAxes)  # fmt: skip
    return fig


def split_figure(plan: pd.DataFrame):
    """Short-simulation train tokens/s per GPU against the trainer's share of the GPUs: the
    best over the other settings, one line per system and GPU count (colocated systems, whose
    trainer is every GPU, are one point at 1)."""
    fig, axes = new_figure(1, width=6.4)
    ax = axes[0][0]
    sim = plan[plan["short_train_tokens_per_s"].notna()].copy()
    sim["share"] = sim["trainer_gpus"] / sim["gpus"]
    sim["per_gpu"] = sim["short_train_tokens_per_s"] / sim["gpus"]
    for (system, gpus), rows in sim.groupby(["system", "gpus"], sort=False):
        best = rows.groupby("share")["per_gpu"].max().sort_index()
        ax.plot(best.index, best.to_numpy(), marker="o", color=color(system),
                label=f"{system}, {gpus} GPUs")  # fmt: skip
    ax.set_xlabel("trainer share of the GPUs")
    ax.set_ylabel("train tokens / s per GPU (short runs)")
    ax.set_title("best point per trainer split")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
