"""``laminar plan``: search GPU splits, rollout TP, batch sizes and systems for a cluster."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from laminar.cli.common import (
    add_config_args,
    add_out_args,
    config_from_args,
    float_in,
    int_in,
    out_target,
)
from laminar.errors import ConfigError
from laminar.plan.checks import MAX_POINTS, MAX_POINTS_CEILING


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="search cluster configurations (split, TP, batch, repack, system) by simulation",
        description="Plan a cluster: for the model, hardware and workload of a config, search "
        "GPU counts x systems x trainer split (whole machines) x rollout TP x max batch x "
        "repack with an analytic screen, short simulations, then full ones for the best few. "
        "Writes plan.csv (every point, why rejected), pareto.csv, best.yaml (runnable by "
        "laminar simulate / train) and pareto.png; prints the best points and their "
        "bottleneck. Lists are comma-separated. Without its flag, an axis takes the value a "
        "--set gives its key (if any). A grid of more than --max-points points is refused "
        "before any work.",
    )
    add_config_args(p)
    add_out_args(p, "runs/plan-<time>")
    g = p.add_argument_group("what to search")
    g.add_argument("--gpus", metavar="LIST", help="GPU counts (default: cluster.gpus)")
    g.add_argument("--systems", metavar="LIST",
                   help="systems to compare, or 'all' (default: all)")  # fmt: skip
    g.add_argument("--trainer-fractions", metavar="LIST",
                   help="trainer shares of the machines, rounded to whole machines "
                   "(default: 0.125,0.25,...,0.875)")  # fmt: skip
    g.add_argument("--tp", metavar="LIST", help="rollout TP degrees (default: 1,2,4,8; for a "
                   "model none of those hold, powers of two from the smallest that does)")
    g.add_argument("--max-batch", metavar="LIST", help="sim.max_batch values (default: "
                   "64,128,256)")  # fmt: skip
    g.add_argument("--trainer-layouts", metavar="LIST",
                   help="trainer layouts TPxPPxEPxCP (e.g. 1x1x8x1), or auto: the config's, "
                   "data parallelism alone and, for MoE models, EP over a machine (default: "
                   "auto)")  # fmt: skip
    g.add_argument("--repack", choices=("both", "on", "off"),
                   help="repack settings for systems that have it (default: both)")  # fmt: skip
    g.add_argument("--vary", metavar="KEY=V1,V2", action="append", default=[],
                   help="vary any other config field too (repeatable, one --vary a key; not a "
                   "key the flags above vary)")  # fmt: skip
    h = p.add_argument_group("how to search")
    arg = h.add_argument
    arg("--short-steps", type=int_in(2, 1_000_000), default=4,
        help="trainer steps of a short simulation (default 4)")
    arg("--short-warmup", type=int_in(0, 1_000_000), default=1,
        help="warm-up steps left out of a short simulation's rates (default 1)")
    arg("--screen-keep", type=float_in(0.0, 1.0), default=0.5,
        help="keep points whose analytic estimate is at least this share of their system's "
        "best (default 0.5; 0: simulate every feasible point)")
    arg("--top", type=int_in(1, 10_000), default=4,
        help="full simulations of this many best short ones, plus each system's best and up "
        "to this many along the Pareto front (default 4)")
    arg("--jobs", type=int_in(1, 4096), default=os.cpu_count() or 1,
        help="local worker processes (default: the CPU count)")
    arg("--address", help="run the simulations on a Ray cluster at this address ('auto': the "
        "one this machine is in; 'local': start one here)")
    arg("--max-points", type=int_in(1, MAX_POINTS_CEILING), default=MAX_POINTS,
        help=f"refuse a grid of more points (default {MAX_POINTS:,}; a refusal names the count "
        "and a rough CPU time)")
    cache = h.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", metavar="DIR",
                       help="result cache (default: $XDG_CACHE_HOME/laminar/plan, i.e. "
                       "~/.cache/laminar/plan); entries are checked when read")  # fmt: skip
    cache.add_argument("--no-cache", action="store_true", help="simulate every point anew")
    arg("--gpu-hour-price", type=float_in(1e-9, 1e9), metavar="USD",
        help="price of a GPU-hour: adds USD per million train tokens and a cost Pareto front")
    arg("--show", type=int_in(0, 100_000), default=10,
        help="rows of the printed table (default 10)")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from laminar.cli.plan_args import space_from_args, validate_space
    from laminar.plan import PlanOptions, run_plan, top_table, write_plan_into
    from laminar.plan.checks import check_bound
    from laminar.plan.search import check_plan
    from laminar.rundir import staged_output

    base = config_from_args(args)
    space = space_from_args(args, base)
    opts = PlanOptions(
        short_steps=args.short_steps,
        short_warmup=args.short_warmup,
        screen_keep=args.screen_keep,
        top=args.top,
        jobs=args.jobs,
        address=args.address,
        gpu_hour_price=args.gpu_hour_price,
        max_points=args.max_points,
    )
    check_bound(base, space, opts.max_points, opts.short_steps)  # before validating values
    validate_space(space, base, args)
    check_plan(base, space, opts)
    if args.address is not None:
        from laminar.plan.executors import check_address

        check_address(args.address)
    target = out_target(args, "plan", base)  # checked before any work
    opts = dataclasses.replace(opts, cache_dir=_cache_dir(args, target.path))
    # Staged before the search: SIGINT/SIGTERM during it leave nothing behind.
    with staged_output(target) as stage:
        result = run_plan(base, space, opts)
        write_plan_into(result, stage)
    print(top_table(result, args.show))
    print(_footer(result.meta))
    if result.best is None:
        print("no point could be simulated: see the reasons in plan.csv")
    print(f"plan directory: {target.path}")
    return 0


def _cache_apart(path: Path, args: argparse.Namespace) -> None:
    """A cache directory is written: it may not be, hold or lie inside an input of the plan,
    nor lie in a Laminar run directory (``--cache-dir RUN`` filled a training run with cache
    entries)."""
    from laminar.cli.common import config_inputs
    from laminar.guard import check_apart, inside_run_dir
    from laminar.rundir import MARKER

    check_apart(path, config_inputs(args.config, None), flag="--cache-dir")
    run = path if (path / MARKER).is_file() else inside_run_dir(path, MARKER)
    if run is not None:
        raise ConfigError("laminar plan", "--cache-dir", f"{path} lies in the Laminar run "
                          f"directory {run}; give the cache a directory of its own")  # fmt: skip


def _cache_dir(args: argparse.Namespace, out: Path) -> Path | None:
    """The checked cache directory (``laminar.plan.cache.prepare_cache_dir``); never inside
    the plan directory, which a rerun replaces, nor holding it."""
    from laminar.guard import resolved
    from laminar.plan.cache import default_cache_dir, prepare_cache_dir

    if args.no_cache:
        return None
    explicit = args.cache_dir is not None
    if explicit and not args.cache_dir.strip():
        raise ConfigError("laminar plan", "--cache-dir", "expected a directory, got ''")
    path = Path(args.cache_dir) if explicit else default_cache_dir()
    if "\x00" not in str(path):
        _cache_apart(path, args)
        a, b = resolved(path), resolved(out)
        if a == b or b in a.parents or a in b.parents:
            raise ConfigError("laminar plan", "--cache-dir" if explicit else "--out",
                              f"the cache {path} and the plan directory {out} must not lie "
                              "inside one another")  # fmt: skip
    return prepare_cache_dir(path, explicit=explicit)


def _footer(m: dict) -> str:
    dup = f"; {m['duplicates']} duplicate points" if m["duplicates"] else ""
    return (f"\n{m['simulated_short']} short and {m['simulated_full']} full simulations: "
            f"{m['simulations_run']} run, {m['cache_hits']} from the cache "
            f"({m['cache_dir'] or 'off'}){dup}; {m['wall_s']:.1f} s")  # fmt: skip
