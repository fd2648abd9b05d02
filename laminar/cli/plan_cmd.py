"""``laminar plan``: search GPU splits, rollout TP, batch sizes and systems for a cluster."""

from __future__ import annotations

import argparse
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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="search cluster configurations (split, TP, batch, repack, system) by simulation",
        description="Plan a cluster: for the model, hardware and workload of a config, search "
        "GPU counts x systems x trainer split (whole machines) x rollout TP x max batch x "
        "repack with an analytic screen, short simulations, then full ones for the best few. "
        "Writes plan.csv (every point, why rejected), pareto.csv, best.yaml (runnable by "
        "laminar simulate / train) and pareto.png; prints the best points and their "
        "bottleneck. Lists are comma-separated.",
    )
    add_config_args(p)
    add_out_args(p, "runs/plan-<time>")
    g = p.add_argument_group("what to search")
    g.add_argument("--gpus", metavar="LIST", help="GPU counts (default: cluster.gpus)")
    g.add_argument("--systems", metavar="LIST", default="all",
                   help="systems to compare (default: all)")  # fmt: skip
    g.add_argument("--trainer-fractions", metavar="LIST",
                   help="trainer shares of the machines, rounded to whole machines "
                   "(default: 0.125,0.25,...,0.875)")  # fmt: skip
    g.add_argument("--tp", metavar="LIST", help="rollout TP degrees (default: 1,2,4,8)")
    g.add_argument("--max-batch", metavar="LIST", help="sim.max_batch values (default: "
                   "64,128,256)")  # fmt: skip
    g.add_argument("--repack", choices=("both", "on", "off"), default="both",
                   help="repack settings for systems that have it (default: both)")  # fmt: skip
    g.add_argument("--vary", metavar="KEY=V1,V2", action="append", default=[],
                   help="vary any other config field too (repeatable)")  # fmt: skip
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
    arg("--cache-dir", metavar="DIR",
        help="result cache (default: $XDG_CACHE_HOME/laminar/plan, i.e. ~/.cache/laminar/plan)")
    arg("--no-cache", action="store_true", help="simulate every point anew")
    arg("--gpu-hour-price", type=float_in(1e-9, 1e9), metavar="USD",
        help="price of a GPU-hour: adds USD per million train tokens and a cost Pareto front")
    arg("--show", type=int_in(0, 100_000), default=10,
        help="rows of the printed table (default 10)")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from laminar.plan import PlanOptions, run_plan, top_table, write_plan_into
    from laminar.plan.evaluate import default_cache_dir
    from laminar.rundir import staged_output

    base = config_from_args(args)
    space = space_from_args(args, base)
    cache = None if args.no_cache else Path(args.cache_dir or default_cache_dir())
    opts = PlanOptions(
        short_steps=args.short_steps,
        short_warmup=args.short_warmup,
        screen_keep=args.screen_keep,
        top=args.top,
        jobs=args.jobs,
        address=args.address,
        cache_dir=cache,
        gpu_hour_price=args.gpu_hour_price,
    )
    target = out_target(args, "plan", base)  # checked before any work
    # Staged before the search: SIGINT/SIGTERM during it leave nothing behind.
    with staged_output(target) as stage:
        result = run_plan(base, space, opts)
        write_plan_into(result, stage)
    print(top_table(result, args.show))
    m = result.meta
    print(f"\n{m['simulated_short']} short and {m['simulated_full']} full simulations, "
          f"{m['cache_hits']} from the cache ({m['cache_dir'] or 'off'}), {m['wall_s']:.1f} s")
    if result.best is None:
        print("no point could be simulated: see the reasons in plan.csv")
    print(f"plan directory: {target.path}")
    return 0


def space_from_args(args: argparse.Namespace, base):
    """The :class:`~laminar.plan.SearchSpace` the arguments describe (errors name the flag)."""
    from laminar.plan import SearchSpace
    from laminar.plan.space import DEFAULT_FRACTIONS, DEFAULT_MAX_BATCHES, DEFAULT_TPS
    from laminar.sim.registry import all_systems

    systems = _names(args.systems, "--systems")
    if "all" in systems:
        systems = list(all_systems())
    fractions = _numbers(args.trainer_fractions, "--trainer-fractions", float, DEFAULT_FRACTIONS)
    if any(not 0 < f < 1 for f in fractions):
        raise ConfigError("laminar plan", "--trainer-fractions", "each must be between 0 and 1")
    space = SearchSpace(
        gpus=_numbers(args.gpus, "--gpus", int, (base.cluster.gpus,)),
        systems=tuple(systems),
        trainer_fractions=fractions,
        rollout_tps=_numbers(args.tp, "--tp", int, DEFAULT_TPS),
        max_batches=_numbers(args.max_batch, "--max-batch", int, DEFAULT_MAX_BATCHES),
        repack={"both": (True, False), "on": (True,), "off": (False,)}[args.repack],
        extra=dict(_vary(v, base) for v in args.vary),
    )
    for flag, values in (("--gpus", space.gpus), ("--tp", space.rollout_tps),
                         ("--max-batch", space.max_batches)):  # fmt: skip
        if any(v < 1 for v in values):
            raise ConfigError("laminar plan", flag, "values must be positive")
    for gpus in space.gpus:  # a GPU count the config cannot take fails here, not per point
        _validate(base, "cluster.gpus", gpus, f"--gpus {args.gpus}")
    return space


def _validate(base, key: str, value, source: str) -> None:
    """Raise ConfigError (naming ``source``) unless ``base`` with ``key = value`` validates."""
    from laminar.config.loader import apply_override, validate

    data = base.model_dump(mode="json")
    apply_override(data, key.split("."), value, f"{key}={value}")
    validate(data, source, {})


def _names(text: str, flag: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ConfigError("laminar plan", flag, "expected a comma-separated list")
    return list(dict.fromkeys(names))


def _numbers(text: str | None, flag: str, kind, default) -> tuple:
    if text is None:
        return tuple(default)
    try:
        values = [kind(s) for s in _names(text, flag)]
    except ValueError:
        what = "integers" if kind is int else "numbers"
        msg = f"expected comma-separated {what}, got {text!r}"
        raise ConfigError("laminar plan", flag, msg) from None
    return tuple(dict.fromkeys(values))


def _vary(text: str, base) -> tuple[str, tuple]:
    """``KEY=V1,V2`` -> (KEY, values); the key and every value must validate on ``base``."""
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        msg = "expected KEY=V1,V2,..., e.g. sim.kv_watermark=0.01,0.05"
        raise ConfigError(f"--vary {text}", "", msg)
    values = tuple(yaml.safe_load(v) for v in raw.split(","))
    for v in values:
        _validate(base, key, v, f"--vary {text}")
    return key, values
