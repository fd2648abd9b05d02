"""Pictures of real training runs (``laminar train`` run directories, see
``laminar/runtime/run/outputs.py``), one run or several side by side.

Every figure function takes one :class:`TrainRun` or a list of them and draws each run in its
own colour, named by its system (``laminar`` / ``sync``) or, where two runs share a system, by
system and directory. Times are seconds since the training loop started (``summary.json``
``setup_s`` on the run's clock, which ``kv.csv``, ``events.csv`` and the trajectories share).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.plotting.common import COLORS, SPARE_COLORS, RunDirError, new_figure, save_figure
from laminar.plotting.sim import staleness_figure, staleness_table
from laminar.runfiles import train as files

# The files of a ``laminar train`` run directory that the figures read and the columns drawn
# from each, read by ``laminar.runfiles.train``; ``config.yaml`` is optional (the run's system,
# when summary.json lacks it).
TRAIN_FILES = {
    "summary.json": (),
    "steps.csv": ("step", "tokens", "wait_s", "train_s", "publish_s", "reward_mean"),
    "trajectories.parquet": (
        "step", "replica_id", "gen_start_s", "gen_end_s", "weight_version", "consumed_version",
        "consumed_s", "staleness", "response_len",
    ),
    "events.csv": tuple(files.EVENTS),
    "kv.csv": tuple(files.KV),
}  # fmt: skip

EVENT_STYLE = {"repack": ("#ff7f0e", "--"), "recovery": ("#d62728", "-")}
FAULT_COLOR = "#000000"
# Replica colours on the timeline: tab10 without the events' orange and red.
REPLICA_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


@dataclass
class TrainRun:
    """The tables of one ``laminar train`` run directory."""

    path: Path
    summary: dict
    steps: pd.DataFrame
    trajectories: pd.DataFrame
    events: pd.DataFrame
    kv: pd.DataFrame
    config: dict

    @property
    def system(self) -> str:
        """``laminar`` or ``sync``: summary.json's ``mode``, else config.yaml's
        ``runtime.mode``, else the directory's name."""
        mode = self.summary.get("mode") or (self.config.get("runtime") or {}).get("mode")
        return str(mode) if mode else self.path.name

    @property
    def start_s(self) -> float:
        """When the training loop started, in seconds on the run's clock (0 when unknown)."""
        return float(self.summary.get("setup_s") or 0.0)


def load_train_run(run_dir: str | Path) -> TrainRun:
    """Read a ``laminar train`` run directory, each file through its reader
    (``laminar.runfiles.train``); a missing or bad file raises
    :class:`~laminar.plotting.common.RunDirError` naming it (and the row and column)."""
    p = Path(run_dir)
    for name in TRAIN_FILES:
        if not (p / name).exists():
            raise RunDirError(f"{p / name}: missing (is {p} a `laminar train` run directory?)")
    steps = files.read_steps(p, need=TRAIN_FILES["steps.csv"])
    if steps.empty:
        raise RunDirError(f"{p / 'steps.csv'}: no trainer step recorded (an empty table)")
    return TrainRun(
        p,
        files.read_summary(p),
        steps,
        files.read_trajectories(p, need=TRAIN_FILES["trajectories.parquet"]),
        files.read_events(p),
        files.read_kv(p),
        files.read_config_mapping(p),
    )


def run_labels(runs: Sequence[TrainRun]) -> list[str]:
    """A legend name per run: its system, or ``system (directory)`` where systems repeat."""
    systems = [r.system for r in runs]
    labels = [
        s if systems.count(s) == 1 else f"{s} ({r.path.name})"
        for s, r in zip(systems, runs, strict=True)
    ]
    return [lab if labels.count(lab) == 1 else f"{lab} #{i + 1}" for i, lab in enumerate(labels)]


def run_colors(runs: Sequence[TrainRun]) -> list[str]:
    """A colour per run: its system's where no other run shares it, else a spare one."""
    systems = [r.system for r in runs]
    spare = iter(SPARE_COLORS * (1 + len(runs) // len(SPARE_COLORS)))
    return [COLORS[s] if s in COLORS and systems.count(s) == 1 else next(spare) for s in systems]


def _runs(runs: TrainRun | Sequence[TrainRun]) -> list[TrainRun]:
    return [runs] if isinstance(runs, TrainRun) else list(runs)


# Tables ----------------------------------------------------------------------------------------


def step_table(runs: TrainRun | Sequence[TrainRun]) -> pd.DataFrame:
    """One row per trainer step of each run: ``run`` (its label), ``step``, ``end_s`` (when the
    step published its weights, since training started), ``step_s`` (since the previous step's
    end: the trainer's pace, generation included in sync mode), ``tokens``, ``tokens_per_s``
    (trained tokens over ``step_s``), ``idle_s`` (``step_s`` minus update and publish: the
    trainer waiting for its batch) and ``reward_mean`` (mean reward of the step's batch)."""
    runs = _runs(runs)
    parts = [
        _steps(run).assign(run=label) for run, label in zip(runs, run_labels(runs), strict=True)
    ]
    columns = ["run", "step", "end_s", "step_s", "tokens", "tokens_per_s", "idle_s", "reward_mean"]
    return pd.concat(parts, ignore_index=True)[columns]


def _steps(run: TrainRun) -> pd.DataFrame:
    # steps.csv has durations only; the buffer stamped when each batch was taken (consumed_s,
    # on the run's clock), so a step ends that long plus its update and publish later.
    s = run.steps.sort_values("step").reset_index(drop=True)
    taken = run.trajectories.groupby("step")["consumed_s"].max()
    end_s = s["step"].map(taken) - run.start_s + s["train_s"] + s["publish_s"]
    step_s = end_s.diff().fillna(end_s)
    return s.assign(
        end_s=end_s,
        step_s=step_s,
        tokens_per_s=s["tokens"] / step_s,
        idle_s=step_s - s["train_s"] - s["publish_s"],
    )


def kv_table(run: TrainRun, points: int = 200) -> pd.DataFrame:
    """KV-cache use of the rollouts (``kv_usage``, a share of each engine's cache) averaged over
    the replicas alive at each of ``points`` times (``t_s``, since training started); between
    two checks a replica's use is interpolated linearly."""
    kv = run.kv
    if kv.empty:
        return pd.DataFrame({"t_s": [], "kv_util": []})
    t_s = kv["at_s"].to_numpy(dtype=float) - run.start_s
    grid = np.linspace(t_s.min(), t_s.max(), points)
    total, alive = np.zeros(points), np.zeros(points)
    for _, rows in kv.assign(t_s=t_s).sort_values("t_s").groupby("replica_id", sort=False):
        usage = np.interp(grid, rows["t_s"], rows["kv_usage"], left=np.nan, right=np.nan)
        total += np.nan_to_num(usage)
        alive += ~np.isnan(usage)  # a dead replica's series stops at its last check
    util = np.divide(total, alive, out=np.full(points, np.nan), where=alive > 0)
    return pd.DataFrame({"t_s": grid, "kv_util": util})


# Figures ---------------------------------------------------------------------------------------


def _each(runs):
    runs = _runs(runs)
    return zip(runs, run_labels(runs), run_colors(runs), strict=True)


def train_throughput_figure(runs: TrainRun | Sequence[TrainRun]):
    """Trainer throughput and trainer idle time per step, one line per run; the legend gives
    each run's overall throughput (``summary.json``)."""
    table = step_table(runs)
    fig, axes = new_figure(2, width=5.2)
    for run, label, c in _each(runs):
        rows = table[table["run"] == label]
        overall = run.summary.get("train_tokens_per_s")
        name = f"{label}: {overall:.0f} tokens/s overall" if overall else label
        axes[0][0].plot(rows["step"], rows["tokens_per_s"], marker=".", color=c, label=name)
        axes[0][1].plot(rows["step"], rows["idle_s"], marker=".", color=c, label=label)
    axes[0][0].set_ylabel("trained tokens / s")
    axes[0][0].set_title("trainer throughput (step tokens / time since the last step)", fontsize=10)
    axes[0][1].set_ylabel("s")
    axes[0][1].set_title("trainer idle per step (waiting for its batch)", fontsize=10)
    for ax in axes[0]:
        ax.set_xlabel("trainer step")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def train_reward_figure(runs: TrainRun | Sequence[TrainRun]):
    """Mean reward of each step's training batch, one line per run."""
    table = step_table(runs)
    fig, axes = new_figure()
    ax = axes[0][0]
    for _, label, c in _each(runs):
        rows = table[table["run"] == label]
        ax.plot(rows["step"], rows["reward_mean"], marker=".", color=c, label=label)
    ax.set_xlabel("trainer step")
    ax.set_ylabel("mean reward of the batch")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    return fig


def train_staleness_figure(runs: TrainRun | Sequence[TrainRun]):
    """Histogram of the consumed staleness of trained trajectories, one bar group per run."""
    parts = [run.trajectories.assign(system=label) for run, label, _ in _each(runs)]
    colors = {label: c for _, label, c in _each(runs)}
    return staleness_figure(pd.concat(parts, ignore_index=True), colors=colors)


def train_staleness_table(runs: TrainRun | Sequence[TrainRun]) -> pd.DataFrame:
    """Share of trained trajectories at each consumed staleness (rows), per run (columns)."""
    parts = [run.trajectories.assign(system=label) for run, label, _ in _each(runs)]
    return staleness_table(pd.concat(parts, ignore_index=True))


def train_kv_figure(runs: TrainRun | Sequence[TrainRun], points: int = 200):
    """KV-cache use of the rollouts over time (mean over live replicas), one line per run."""
    fig, axes = new_figure()
    ax = axes[0][0]
    for run, label, c in _each(runs):
        data = kv_table(run, points)
        ax.plot(data["t_s"], 100 * data["kv_util"], color=c, label=label)
    ax.set_xlabel("time since training started (s)")
    ax.set_ylabel("KV cache in use, mean over replicas (%)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    return fig


def train_timeline_figure(runs: TrainRun | Sequence[TrainRun]):
    """Generation timeline, one panel per run: a bar per trajectory from its generation start
    to its end (coloured by the replica that finished it), the trainer taking each batch (grey),
    repack moves and recoveries (§5.2, §3.3) marked."""
    each = list(_each(runs))
    fig, axes = new_figure(1, len(each), width=9.0, height=3.2)
    for ax in axes[1:, 0]:
        ax.sharex(axes[0][0])  # one time axis to compare the runs on
    for ax, (run, label, _) in zip(axes[:, 0], each, strict=True):
        _gantt(ax, run)
        taken = run.trajectories.loc[run.trajectories["consumed_version"] >= 0]
        for t_s in taken.groupby("step")["consumed_s"].max() - run.start_s:
            ax.axvline(t_s, color="grey", linewidth=0.6, alpha=0.5)
        _mark_events(ax, run)
        _mark_faults(ax, run)
        ax.set_title(f"{label}: trajectories by generation start", fontsize=10, loc="left")
        ax.set_ylabel("trajectory")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", ncol=4)
        ax.grid(axis="x", alpha=0.3)
    axes[-1][0].set_xlabel("time since training started (s); grey: the trainer takes a batch")
    return fig


def _gantt(ax, run: TrainRun) -> None:
    t = run.trajectories.sort_values("gen_start_s").reset_index(drop=True)
    start = t["gen_start_s"].to_numpy(dtype=float) - run.start_s
    end = t["gen_end_s"].to_numpy(dtype=float) - run.start_s
    replicas = sorted(t["replica_id"].dropna().unique())
    palette = {r: REPLICA_COLORS[i % len(REPLICA_COLORS)] for i, r in enumerate(replicas)}
    colors = [palette.get(r, "#7f7f7f") for r in t["replica_id"]]
    width = float(np.clip(150 / max(1, len(t)), 0.3, 3.0))  # thin bars when there are many
    ax.hlines(np.arange(len(t)), start, end, colors=colors, linewidth=width)
    for r in replicas:
        ax.plot([], [], color=palette[r], label=f"replica {r}")
    ax.set_ylim(-1, max(1, len(t)))


def _mark_events(ax, run: TrainRun) -> None:
    for kind, rows in run.events.groupby("kind", sort=False):
        c, style = EVENT_STYLE.get(kind, ("black", ":"))
        for i, (_, e) in enumerate(rows.iterrows()):
            ax.axvline(e["at_s"] - run.start_s, color=c, linestyle=style, linewidth=1.2,
                       label=kind if i == 0 else None)  # fmt: skip
            if kind == "recovery":
                ax.annotate(f"{e['src']} lost", (e["at_s"] - run.start_s, 0), color=c, fontsize=8)


def _mark_faults(ax, run: TrainRun) -> None:
    """Injected faults and deaths (``summary.json``'s ``faults``): a line when it happened,
    its detection and recovery shaded, and a dotted line when a replacement rollout started
    serving (paper Fig. 15: the capacity comes back)."""
    drawn = served = 0
    for f in run.summary.get("faults") or []:
        if "skipped" in f or f.get("at_s") is None:
            continue
        at = float(f["at_s"]) - run.start_s
        ax.axvline(at, color=FAULT_COLOR, linewidth=1.4, label="fault" if not drawn else None)
        end = at + float(f.get("detection_s") or 0.0) + float(f.get("recovery_s") or 0.0)
        ax.axvspan(at, max(end, at), color=FAULT_COLOR, alpha=0.12, linewidth=0)
        name = f"{f['kind']} {f.get('target', '')}".strip()
        ax.annotate(name, (at, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    rotation=90, va="top", ha="right")  # fmt: skip
        if f.get("replaced_s") is not None and f.get("replacements"):
            back = at + float(f["replaced_s"])
            ax.axvline(back, color=FAULT_COLOR, linestyle=":", linewidth=1.2,
                       label="replacement serving" if not served else None)  # fmt: skip
            served += 1
            ax.annotate(f"{', '.join(f['replacements'])} serving", (back, 1.0),
                        xycoords=("data", "axes fraction"), fontsize=7, rotation=90,
                        va="top", ha="right")  # fmt: skip
        drawn += 1


def gen_throughput_table(run: TrainRun, bin_s: float = 0.0) -> pd.DataFrame:
    """Generated tokens per second over time (``t_s``, since training started): finished
    trajectories' response tokens binned by when they finished (``bin_s``: 0 picks ~60 bins)."""
    t = run.trajectories.dropna(subset=["gen_end_s"])
    if t.empty:
        return pd.DataFrame({"t_s": [], "tokens_per_s": []})
    end = t["gen_end_s"].to_numpy(dtype=float) - run.start_s
    lo, hi = min(0.0, end.min()), end.max()
    bin_s = bin_s or max((hi - lo) / 60, 0.25)
    edges = np.arange(lo, hi + bin_s, bin_s)
    tokens, _ = np.histogram(end, bins=edges, weights=t["response_len"].to_numpy(dtype=float))
    return pd.DataFrame({"t_s": edges[:-1] + bin_s / 2, "tokens_per_s": tokens / bin_s})


def train_faults_figure(runs: TrainRun | Sequence[TrainRun]):
    """Throughput over time around faults (paper Fig. 15): generated tokens/s (finished
    trajectories) and trained tokens/s (per step, at its end), faults marked and their
    detection + recovery shaded; one panel per run."""
    each = list(_each(runs))
    fig, axes = new_figure(1, len(each), width=9.0, height=3.0)
    for ax, (run, label, c) in zip(axes[:, 0], each, strict=True):
        gen = gen_throughput_table(run)
        ax.plot(gen["t_s"], gen["tokens_per_s"], color=c, label="generated tokens/s")
        steps = _steps(run)
        ax.plot(steps["end_s"], steps["tokens_per_s"], color="grey", marker=".",
                linewidth=0.8, label="trained tokens/s (per step)")  # fmt: skip
        _mark_faults(ax, run)
        ax.set_title(f"{label}: throughput around faults", fontsize=10, loc="left")
        ax.set_ylabel("tokens / s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")  # the fault names sit along the top
    axes[-1][0].set_xlabel("time since training started (s); shaded: detection + recovery")
    return fig


def train_figures(runs: Sequence[TrainRun], out: Path) -> list[Path]:
    """Draw every figure of one or several training runs as PNG files into ``out``."""
    return [
        save_figure(train_throughput_figure(runs), out / "throughput.png"),
        save_figure(train_reward_figure(runs), out / "reward.png"),
        save_figure(train_staleness_figure(runs), out / "staleness.png"),
        save_figure(train_kv_figure(runs), out / "kv_util.png"),
        save_figure(train_timeline_figure(runs), out / "timeline.png"),
        save_figure(train_faults_figure(runs), out / "faults.png"),
    ]
