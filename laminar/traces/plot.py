"""Pictures of a trace's response lengths (matplotlib, no pyplot state; usable from notebooks).

``plot_length_histogram(df, path)`` draws three panels: the length histogram of the whole trace
with p50 / p90 / p99 marked (log-spaced bins, so a log-normal body is a bell and the truncation
spike is the last bar), one histogram per step as a heat map (drift shows as a moving band), and
the per-step percentiles.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from laminar.rundir import staged_file
from laminar.traces.stats import PERCENTILES, per_step


def plot_length_histogram(df: pd.DataFrame, path: str | Path, *, title: str | None = None) -> None:
    """Write the response-length figure of schema trace ``df`` to ``path`` (.png, .pdf, .svg)."""
    from matplotlib.figure import Figure

    lengths = df["response_len"].to_numpy(dtype="float64")
    edges = np.geomspace(max(lengths.min(), 1.0), max(lengths.max(), 2.0) * 1.0001, 61)
    fig = Figure(figsize=(16.5, 4.8), layout="constrained")
    ax_hist, ax_heat, ax_pct = fig.subplots(1, 3, width_ratios=[1.1, 1.2, 1.0])
    _overall(ax_hist, df, lengths, edges)
    _heatmap(fig, ax_heat, df, edges)
    _percentiles(ax_pct, df)
    fig.suptitle(title or f"response lengths: {len(df):,} trajectories", fontsize=13)
    with staged_file(path) as tmp:
        fig.savefig(tmp, dpi=110, format=Path(path).suffix.lstrip(".") or "png")


def _overall(ax, df: pd.DataFrame, lengths: np.ndarray, edges: np.ndarray) -> None:
    ax.hist(lengths, bins=edges, color="#4C72B0", alpha=0.85)
    ax.set_xscale("log")
    _token_ticks(ax.xaxis, subs=(1.0, 3.0))
    for q, color in zip(PERCENTILES, ("#2CA02C", "#FF7F0E", "#D62728"), strict=True):
        v = np.percentile(lengths, q)
        ax.axvline(v, color=color, linestyle="--", linewidth=1.5, label=f"p{q} = {v:,.0f}")
    truncated = (df["finish_reason"] == "length").mean()
    ax.plot([], [], " ", label=f"truncated ('length') = {truncated:.2%}")
    ratio = np.percentile(lengths, 99) / max(np.percentile(lengths, 50), 1e-9)
    ax.plot([], [], " ", label=f"p99 / p50 = {ratio:.1f}")
    ax.legend(fontsize=9, loc="upper left", framealpha=0.95)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.45)  # headroom for the legend
    ax.set_xlabel("response length (tokens, log scale)")
    ax.set_ylabel("trajectories")
    ax.set_title("all steps")
    ax.grid(alpha=0.3, which="both")


def _heatmap(fig, ax, df: pd.DataFrame, edges: np.ndarray) -> None:
    from matplotlib.colors import LogNorm

    steps = np.sort(df["step"].unique())
    counts = np.zeros((len(edges) - 1, len(steps)))
    for i, (_, group) in enumerate(df.groupby("step", sort=True)["response_len"]):
        hist, _ = np.histogram(group.to_numpy(dtype="float64"), bins=edges)
        counts[:, i] = hist / max(len(group), 1)
    x_edges = np.append(steps, steps[-1] + 1) - 0.5
    masked = np.ma.masked_equal(counts, 0.0)
    mesh = ax.pcolormesh(x_edges, edges, masked, norm=LogNorm(), cmap="viridis", shading="flat")
    fig.colorbar(mesh, ax=ax, label="fraction of the step's trajectories")
    ax.set_yscale("log")
    _token_ticks(ax.yaxis)
    _step_ticks(ax.xaxis)
    ax.set_xlabel("RL step")
    ax.set_ylabel("response length (tokens, log scale)")
    ax.set_title("histogram per step (top row: truncated at the max)")


def _percentiles(ax, df: pd.DataFrame) -> None:
    table = per_step(df)
    styles = {"p50": "#2CA02C", "p90": "#FF7F0E", "p99": "#D62728", "max": "#555555"}
    for name, color in styles.items():
        ax.plot(table.index, table[name], marker="o", markersize=3, color=color, label=name)
    ax.set_yscale("log")
    _token_ticks(ax.yaxis)
    _step_ticks(ax.xaxis)
    ax.set_xlabel("RL step")
    ax.set_ylabel("response length (tokens, log scale)")
    ax.set_title("percentiles per step")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3, which="both")


def _token_ticks(axis, subs: tuple[float, ...] = (1.0, 2.0, 5.0)) -> None:
    """Plain token counts (1,000 / 2,000 / 5,000 ...) on a log axis, not 10^3 notation."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axis.set_minor_formatter(NullFormatter())


def _step_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
