"""Pictures of simulated runs, drawn from the files of a run directory (STYLE.md: data first,
pictures second). One module for ``laminar plot RUN_DIR`` and the notebooks in ``notebooks/``.

Figures are built on :class:`matplotlib.figure.Figure` without pyplot state, so a notebook can
display them and the CLI can save them (:func:`save_figure`, staged: whole or not at all).
``*_over_time`` functions return the plotted data as DataFrames, so a figure is never the only
place a number lives. The response-length figure is ``laminar.traces.plot_length_histogram``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.plotting.common import RunDirError, color, new_figure, save_figure
from laminar.rundir import run_output
from laminar.runfiles.sim import SIM_FILES as SIM_SPECS
from laminar.runfiles.sim import read_sim_faults, read_sim_table

# The files of a ``laminar simulate`` / ``laminar replay`` run directory and the columns drawn
# from each (``faults.csv`` is optional), read by ``laminar.runfiles.sim``.
SIM_FILES = {name: tuple(spec) for name, spec in SIM_SPECS.items()}
MAX_BINS = 10_000  # of a throughput-over-time figure


@dataclass
class Run:
    """The tables of one run directory (``laminar simulate`` / ``laminar replay`` output)."""

    path: Path
    summary: pd.DataFrame
    steps: pd.DataFrame
    trajectories: pd.DataFrame
    replicas: pd.DataFrame
    faults: pd.DataFrame

    @property
    def systems(self) -> list[str]:
        """Systems in the run, in summary order."""
        return self.summary["system"].tolist()


def load_run(run_dir: str | Path) -> Run:
    """Read a simulated run directory (``faults.csv`` is optional); a missing or unreadable file
    raises :class:`~laminar.plotting.common.RunDirError` naming it."""
    p = Path(run_dir)
    tables = {name: read_sim_table(p, name) for name in SIM_FILES}
    if tables["summary.csv"].empty:
        raise RunDirError(f"{p / 'summary.csv'}: no system in it (an empty table)")
    stepped = set(tables["steps.csv"]["system"])
    lost = [s for s in tables["summary.csv"]["system"] if s not in stepped]
    if lost:  # a summary of another run, or a damaged name: nothing to draw it from
        raise RunDirError(f"{p / 'summary.csv'}: system {str(lost[0])[:40]!r} has no row in "
                          "steps.csv (files of different runs?)")  # fmt: skip
    return Run(
        p,
        tables["summary.csv"],
        tables["steps.csv"],
        tables["trajectories.parquet"],
        tables["replicas.parquet"],
        read_sim_faults(p),
    )


# Throughput ------------------------------------------------------------------------------------


def throughput_figure(summary: pd.DataFrame, *, reference: str = "laminar"):
    """Training and generation throughput per system of one run; bars labelled with the
    speedup of ``reference`` over each system."""
    fig, axes = new_figure(2, width=5.2)
    systems = summary["system"].tolist()
    x = np.arange(len(systems))
    colors = [color(s) for s in systems]
    for ax, col, title in zip(
        axes[0],
        ["train_tokens_per_s", "gen_tokens_per_s"],
        ["training throughput", "generation throughput"],
        strict=True,
    ):
        values = summary[col].to_numpy(dtype=float)
        ax.bar(x, values, color=colors)
        ax.set_xticks(x, systems, rotation=20)
        ax.set_ylabel("tokens / s")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        if reference in systems and col == "train_tokens_per_s":
            ref = values[systems.index(reference)]
            for xi, v in zip(x, values, strict=True):
                ax.annotate(f"{ref / v:.2f}x", (xi, v), ha="center", va="bottom", fontsize=9)
    gpus = int(summary["gpus"].iloc[0])
    fig.suptitle(f"{gpus} GPUs; labels: {reference} speedup over each system")
    return fig


def scaling_figure(table: pd.DataFrame, *, metric: str = "train_tokens_per_s", panel="model"):
    """``metric`` against GPUs, one line per system, one panel per value of ``panel`` (e.g.
    the model). ``table`` has columns ``system``, ``gpus``, ``metric`` and ``panel``."""
    panels = list(dict.fromkeys(table[panel])) if panel in table else [None]
    fig, axes = new_figure(len(panels), width=5.0)
    for ax, key in zip(axes[0], panels, strict=True):
        part = table if key is None else table[table[panel] == key]
        for system, rows in part.groupby("system", sort=False):
            rows = rows.sort_values("gpus")
            ax.plot(rows["gpus"], rows[metric], marker="o", color=color(system), label=system)
        ax.set_xscale("log", base=2)
        ticks = sorted(part["gpus"].unique())
        ax.set_xticks(ticks, [str(g) for g in ticks])
        ax.set_xlabel("GPUs")
        ax.set_ylabel(metric.replace("_", " "))
        ax.set_title(str(key) if key is not None else metric)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=9)
    return fig


# KV-cache use over time --------------------------------------------------------------------------


def kv_over_time(replicas: pd.DataFrame, points: int = 200) -> pd.DataFrame:
    """Mean KV utilisation over all replicas of each system, on a grid of ``points`` times.

    Between two points of a replica's series its KV grows linearly from ``kv_tokens`` to
    ``kv_peak_tokens`` (exact when the segment ran to its planned end; an interrupted segment
    is drawn as if it had not been)."""
    out = []
    for system, part in replicas.groupby("system", sort=False):
        grid = np.linspace(0.0, part["t_s"].max(), points)
        total = np.zeros(points)
        n = 0
        for _, r in part.groupby("replica_id", sort=False):
            t = r["t_s"].to_numpy()
            kv = r["kv_tokens"].to_numpy(dtype=float)
            peak = r["kv_peak_tokens"].to_numpy(dtype=float)
            i = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
            t_next = np.append(t[1:], t[-1])[i]
            span = np.where(t_next > t[i], t_next - t[i], 1.0)
            frac = np.clip((grid - t[i]) / span, 0.0, 1.0) * (t_next > t[i])
            value = kv[i] + (peak[i] - kv[i]) * frac
            total += np.where(grid >= t[0], value, 0.0)
            n += 1
        cap = float(part["kv_capacity_tokens"].iloc[0])
        out.append(pd.DataFrame({"system": system, "t_s": grid, "kv_util": total / (n * cap)}))
    return pd.concat(out, ignore_index=True)


def kv_figure(replicas: pd.DataFrame, points: int = 200):
    """Mean KV-cache utilisation of the rollouts over time, one line per system."""
    data = kv_over_time(replicas, points)
    fig, axes = new_figure()
    ax = axes[0][0]
    for system, rows in data.groupby("system", sort=False):
        ax.plot(rows["t_s"], 100 * rows["kv_util"], color=color(system), label=system)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("KV cache in use, mean over replicas (%)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    return fig


# Staleness -------------------------------------------------------------------------------------


def inherent_staleness(trajectories: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """§6's *inherent* staleness of each completed trajectory: the actor's version when its last
    token was generated minus its (oldest) generation version. It counts generation latency
    only; the consumed staleness (``trajectories.staleness``) adds the wait for the rest of the
    GRPO group and in the experience buffer. NaN for unfinished trajectories."""
    out = pd.Series(np.nan, index=trajectories.index)
    for system, t in trajectories.groupby("system", sort=False):
        # Version v + 1 exists from the end of trainer step v (steps are in version order).
        ends = np.sort(steps.loc[steps["system"] == system, "end_s"].to_numpy())
        done = t["gen_end_s"].notna()
        actor = np.searchsorted(ends, t.loc[done, "gen_end_s"].to_numpy(), side="right")
        out.loc[t.index[done]] = actor - t.loc[done, "weight_version"].to_numpy()
    return out


def staleness_table(
    trajectories: pd.DataFrame, steps: pd.DataFrame | None = None, *, kind: str = "consumed"
) -> pd.DataFrame:
    """Share of trained trajectories at each staleness, per system (rows: staleness).
    ``kind``: ``consumed`` (trainer version when trained on) or ``inherent`` (§6, at
    completion; needs ``steps``)."""
    c = trajectories[trajectories["consumed_version"] >= 0]
    if kind == "inherent":
        if steps is None:
            raise ValueError("inherent staleness needs the steps table")
        c = c.assign(staleness=inherent_staleness(c, steps).astype(int))
    elif kind != "consumed":
        raise ValueError(f"kind must be 'consumed' or 'inherent', not {kind!r}")
    counts = c.groupby(["staleness", "system"], sort=True).size().unstack(fill_value=0)
    order = [s for s in dict.fromkeys(trajectories["system"]) if s in counts.columns]
    return (counts / counts.sum())[order]


def staleness_figure(
    trajectories: pd.DataFrame,
    steps: pd.DataFrame | None = None,
    *,
    kind: str = "consumed",
    colors: dict[str, str] | None = None,
):
    """Histogram of the staleness of trained trajectories, one bar group per system (§6).
    ``colors``: a colour per system, instead of :data:`~laminar.plotting.common.COLORS`."""
    table = staleness_table(trajectories, steps, kind=kind)
    fig, axes = new_figure(width=7.0)
    ax = axes[0][0]
    width = 0.8 / max(1, len(table.columns))
    for j, system in enumerate(table.columns):
        x = table.index.to_numpy() + (j - (len(table.columns) - 1) / 2) * width
        c = (colors or {}).get(system) or color(system)
        ax.bar(x, 100 * table[system], width=width, color=c, label=system)
    what = {
        "consumed": "trainer version when trained on",
        "inherent": "actor version at completion (§6)",
    }[kind]
    ax.set_xlabel(f"{kind} staleness ({what} - generation version)")
    ax.set_ylabel("trained trajectories (%)")
    ax.set_xticks(table.index)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=9)
    return fig


# Throughput over time (the fault timeline, Fig. 15) --------------------------------------------


def _spread(start: np.ndarray, stop: np.ndarray, amount: np.ndarray, edges: np.ndarray):
    """Per bin of ``edges``: the sum of ``amount``s, each spread evenly over its
    [start, stop) interval (O(n log n): the integral of the summed piecewise-constant rate)."""
    rate = amount / np.maximum(stop - start, 1e-9)
    times = np.concatenate([start, stop])
    deltas = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(deltas[order])
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    idx = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, len(times) - 1)
    at_edges = area[idx] + level[idx] * np.maximum(edges - times[idx], 0.0) * (edges > times[0])
    return np.diff(at_edges)


def throughput_over_time(
    trajectories: pd.DataFrame, steps: pd.DataFrame, system: str, bin_s: float
) -> pd.DataFrame:
    """Generation and training throughput of ``system`` in bins of ``bin_s`` seconds.

    Generation: each trajectory's tokens spread evenly over its generation interval (queueing
    and preemption inside it are not resolved). Training: each step's tokens spread evenly
    over the ``train_s`` seconds before it handed its weights over (the attempt that
    succeeded, when a trainer fault made it start over; a stream step's earlier mini-batches
    are drawn at its end)."""
    t = trajectories[trajectories["system"] == system]
    s = steps[steps["system"] == system].sort_values("end_s")
    end_s = float(np.nanmax([t["gen_end_s"].max(), s["end_s"].max()]))
    bin_s = max(bin_s, end_s / MAX_BINS)  # a time far past the others: wider bins, not millions
    edges = np.arange(0.0, end_s + bin_s, bin_s)
    gen = _spread(
        t["gen_start_s"].to_numpy(dtype=float),
        t["gen_end_s"].fillna(end_s).to_numpy(dtype=float),
        t["generated_tokens"].to_numpy(dtype=float),
        edges,
    )
    ends = (s["end_s"] - s["actor_stall_s"]).to_numpy(dtype=float)
    starts = ends - s["train_s"].to_numpy(dtype=float)
    trained = _spread(starts, ends, s["tokens"].to_numpy(dtype=float), edges) if len(s) else 0.0
    return pd.DataFrame(
        {"t_s": edges[:-1], "gen_tokens_per_s": gen / bin_s, "train_tokens_per_s": trained / bin_s}
    )


def timeline_figure(run: Run, bin_s: float = 60.0, systems: list[str] | None = None):
    """Generation and training throughput over time, one panel per system, faults marked."""
    systems = systems or run.systems
    fig, axes = new_figure(1, len(systems), width=9.0, height=2.8)
    for ax, system in zip(axes[:, 0], systems, strict=True):
        data = throughput_over_time(run.trajectories, run.steps, system, bin_s)
        ax.step(data["t_s"], data["gen_tokens_per_s"], where="post", color=color(system),
                label="generation")  # fmt: skip
        ax.step(data["t_s"], data["train_tokens_per_s"], where="post", color="black",
                alpha=0.7, label="training")  # fmt: skip
        faults = run.faults[run.faults["system"] == system] if len(run.faults) else run.faults
        for _, f in faults.iterrows():
            ax.axvline(f["t_s"], color="red", linestyle="--", linewidth=1)
            ax.annotate(f["fault"], (f["t_s"], ax.get_ylim()[1] * 0.9), color="red", fontsize=8)
        ax.set_title(system, fontsize=10, loc="left")
        ax.set_ylabel("tokens / s")
        ax.grid(alpha=0.3)
    axes[-1][0].set_xlabel(f"simulated time (s), {bin_s:g} s bins")
    axes[0][0].legend(fontsize=8, loc="upper right")
    return fig


# A whole run directory ---------------------------------------------------------------------------


def sim_figures(run: Run, out: Path) -> list[Path]:
    """Draw every figure of a simulated run as PNG files into ``out``; return their paths."""
    from laminar.traces import plot_length_histogram

    bin_s = max(1.0, float(run.summary["sim_time_s"].max()) / 120)
    written = [
        save_figure(throughput_figure(run.summary), out / "throughput.png"),
        save_figure(kv_figure(run.replicas), out / "kv_util.png"),
        save_figure(staleness_figure(run.trajectories), out / "staleness.png"),
        save_figure(
            staleness_figure(run.trajectories, run.steps, kind="inherent"),
            out / "staleness_inherent.png",
        ),
        save_figure(timeline_figure(run, bin_s), out / "timeline.png"),
    ]
    first = run.trajectories[run.trajectories["system"] == run.systems[0]]
    lengths = out / "lengths.png"
    plot_length_histogram(first[first["epoch"] == 0], lengths, title="response lengths (workload)")
    return [*written, lengths]


def plot_run(
    run_dir: str | Path, out_dir: str | Path | None = None, *, force: bool = False
) -> list[Path]:
    """Every figure of a simulated run directory as PNG files in ``out_dir`` (default
    ``RUN_DIR/plots``), all or none; returns their paths."""
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run.path / "plots"
    with run_output(out, force=force, command="plot", inputs=[run_dir]) as stage:
        names = [p.name for p in sim_figures(run, stage)]
    return [out / name for name in names]
