"""Pictures of runs, drawn from the files of their run directories (STYLE.md: data first,
pictures second). One package for ``laminar plot`` and the notebooks in ``notebooks/``.

- simulated runs (``laminar simulate`` / ``laminar replay``): :func:`load_run` and the figures
  of :mod:`laminar.plotting.sim`;
- real training runs (``laminar train``): :func:`load_train_run` and the ``train_*`` figures of
  :mod:`laminar.plotting.train`, which take one run or a list to compare side by side;
- :func:`plot_runs`: every figure of one or several run directories of either kind, as PNGs.

Figures are :class:`matplotlib.figure.Figure` objects built without pyplot state, so a notebook
displays them and the CLI saves them (:func:`save_figure`, atomically). ``*_table`` and
``*_over_time`` functions return the plotted data, so a figure is never the only place a number
lives.

    from laminar.plotting import load_train_run, train_throughput_figure
    runs = [load_train_run("runs/laminar"), load_train_run("runs/sync")]
    train_throughput_figure(runs)
"""

from laminar.plotting.common import COLORS, RunDirError, color, save_figure
from laminar.plotting.plan import load_plan, pareto_figure, split_figure
from laminar.plotting.rundirs import plot_runs, run_kind
from laminar.plotting.sim import (
    Run,
    inherent_staleness,
    kv_figure,
    kv_over_time,
    load_run,
    plot_run,
    scaling_figure,
    staleness_figure,
    staleness_table,
    throughput_figure,
    throughput_over_time,
    timeline_figure,
)
from laminar.plotting.train import (
    TrainRun,
    kv_table,
    load_train_run,
    step_table,
    train_faults_figure,
    train_kv_figure,
    train_reward_figure,
    train_staleness_figure,
    train_staleness_table,
    train_throughput_figure,
    train_timeline_figure,
)

__all__ = [
    "COLORS",
    "Run",
    "RunDirError",
    "TrainRun",
    "color",
    "inherent_staleness",
    "kv_figure",
    "kv_over_time",
    "kv_table",
    "load_plan",
    "load_run",
    "load_train_run",
    "pareto_figure",
    "plot_run",
    "plot_runs",
    "run_kind",
    "save_figure",
    "scaling_figure",
    "split_figure",
    "staleness_figure",
    "staleness_table",
    "step_table",
    "throughput_figure",
    "throughput_over_time",
    "timeline_figure",
    "train_faults_figure",
    "train_kv_figure",
    "train_reward_figure",
    "train_staleness_figure",
    "train_staleness_table",
    "train_throughput_figure",
    "train_timeline_figure",
]
