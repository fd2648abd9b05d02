"""``laminar plot RUN_DIR``: the figures of a simulated run (DESIGN.md, use 4)."""

from __future__ import annotations

import argparse
from pathlib import Path

from laminar.errors import LaminarError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="draw the figures of a run directory (throughput, KV use, staleness, timeline)",
        description="Draw PNG figures from a run directory written by `laminar simulate` or "
        "`laminar replay`: throughput.png, kv_util.png, staleness.png, timeline.png and "
        "lengths.png (the workload's response lengths).",
    )
    p.add_argument("run_dir", help="run directory")
    p.add_argument("--out", metavar="DIR", help="where to write the PNGs (default RUN_DIR/plots)")
    p.set_defaults(func=_plot)


class RunDirError(LaminarError):
    """The directory is not a readable run directory."""


def _plot(args: argparse.Namespace) -> int:
    from laminar.plotting import plot_run

    run = Path(args.run_dir)
    missing = [n for n in ("summary.csv", "steps.csv", "trajectories.parquet",
                           "replicas.parquet") if not (run / n).is_file()]  # fmt: skip
    if missing:
        raise RunDirError(f"{run}: not a run directory (missing {', '.join(missing)})")
    for path in plot_run(run, args.out):
        print(path)
    return 0
