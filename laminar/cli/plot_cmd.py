"""``laminar plot RUN_DIR [RUN_DIR ...]``: the figures of simulated or real training runs
(DESIGN.md, use 4)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="draw the figures of run directories (throughput, KV use, staleness, timeline)",
        description="Draw PNG figures from run directories. A `laminar simulate` / `laminar "
        "replay` run gives throughput.png, kv_util.png, staleness.png, staleness_inherent.png, "
        "timeline.png and lengths.png (the workload's response lengths). A `laminar train` run "
        "gives throughput.png (trainer tokens/s and idle time per step), reward.png (mean "
        "reward per step), staleness.png (consumed staleness), kv_util.png (the rollouts' KV use "
        "over time) and timeline.png (each trajectory's generation, repack moves and recoveries "
        "marked). "
        "Several training runs are drawn into the same figures, one line per run, named by "
        "system (laminar, sync) or, when systems repeat, by directory; several simulated runs "
        "get a subdirectory each. The PNGs appear all together or not at all.",
        epilog="example: laminar train --mode sync --out runs/sync && laminar train --out "
        "runs/laminar && laminar plot runs/laminar runs/sync --out runs/compare",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where to write the PNGs (default RUN_DIR/plots; needed with several RUN_DIRs); "
        "a previous plot directory there is replaced, any other existing file or non-empty "
        "directory is refused",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into --out even if it holds other files (they are kept; PNGs of the same "
        "name are replaced)",
    )
    p.set_defaults(func=_plot)


def _plot(args: argparse.Namespace) -> int:
    from laminar.plotting import plot_runs

    for path in plot_runs(args.run_dirs, args.out, force=args.force):
        print(path)
    return 0
