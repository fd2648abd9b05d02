"""``laminar replay TRACE``: what would each system have done with these lengths? (DESIGN.md,
use 2)."""

from __future__ import annotations

import argparse

from laminar.cli.common import add_config_args, add_out_args, config_from_args, out_target
from laminar.cli.simulate_cmd import run_and_write, systems_override


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="simulate the systems on the response lengths of a trace file",
        description="Replay a trace: simulate each system on its prompt and response lengths "
        "(any layout `laminar trace show` reads: schema CSV/Parquet/JSONL, Azure, Vidur) and "
        "write the same run directory as `laminar simulate`. The trace is reshaped to the "
        "config's batch shape (workload.prompts_per_step x samples_per_prompt, steps); an "
        "ungrouped serving trace forms groups from consecutive rows.",
    )
    p.add_argument("trace", help="trace file (.csv, .parquet, .jsonl)")
    add_config_args(p, positional=False)
    p.add_argument(
        "--systems",
        metavar="NAMES",
        help="comma-separated systems to compare ('all' for every one); default: the config's",
    )
    add_out_args(p, "runs/replay-<time>")
    p.set_defaults(func=_replay)


def _replay(args: argparse.Namespace) -> int:
    extra = [systems_override(args.systems)] if args.systems else []
    # The trace replaces whatever workload source the config names; batch shape stays.
    extra.append(f"workload.source={{type: trace, path: {_quoted(args.trace)}}}")
    cfg = config_from_args(args, extra)
    return run_and_write(cfg, out_target(args, "replay"))


def _quoted(path: str) -> str:
    """``path`` as a YAML double-quoted scalar (paths may hold ':' or spaces)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
