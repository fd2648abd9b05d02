"""``laminar simulate``: what would this cluster configuration do? (DESIGN.md, use 1)."""

from __future__ import annotations

import argparse

from laminar.cli.common import add_config_args, add_out_args, config_from_args, out_target


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="simulate a cluster: throughput, staleness, idle time per system",
        description="Simulate RL post-training on a cluster (SimPy) and write a run directory: "
        "config.yaml, cost_model.json, summary.csv, steps.csv, trajectories.parquet, "
        "replicas.parquet. Without a config or preset, runs the built-in default "
        "(Qwen2.5-7B math on 1024 H800s).",
    )
    add_config_args(p)
    p.add_argument(
        "--systems",
        metavar="NAMES",
        help="comma-separated systems to compare on the same workload (shorthand for "
        "--set sim.systems=[...]; 'all' for every one)",
    )
    p.add_argument(
        "--cost",
        metavar="FILE",
        help="cost file (shorthand for --set sim.cost_file=FILE); one written by `laminar "
        "calibrate` makes CONFIG (a `laminar train` config or a train run's config.yaml) "
        "simulate the job it trains (sim.setting auto)",
    )
    add_out_args(p, "runs/simulate-<time>")
    p.set_defaults(func=_simulate)


def _simulate(args: argparse.Namespace) -> int:
    extra = [systems_override(args.systems)] if args.systems else []
    own_cost = config_from_args(args, extra).sim.cost_file if args.cost else ""
    if args.cost:
        extra.append(f"sim.cost_file={args.cost}")
    cfg = config_from_args(args, extra)
    if args.cost and not own_cost:
        _note_step_bound(cfg)
    check = None
    if cfg.sim.cost_file:
        from laminar.costfile import read_cost_file

        cost = read_cost_file(cfg.sim.cost_file)  # once, for the notes and the range check
        _note_calibration(cfg)
        _note_task(cfg, cost.policy_lengths)
        check = _range_check(cfg, cost.ranges)
    return run_and_write(cfg, out_target(args, "simulate", cfg), check=check)


def _range_check(cfg, calibrated: dict | None):
    """With a cost file that records the ranges its calibration saw (``calibrated``,
    ``laminar.calibrate.ranges``): a check of the result that warns on stderr, one line per
    quantity the prediction takes outside them; None for a file without ranges."""
    import sys

    from laminar.calibrate.ranges import outside, predicted_ranges

    if not calibrated:
        return None

    def check(result) -> None:
        needs = predicted_ranges(result.replicas, result.trajectories,
                                 cfg.runtime.grpo.micro_batch_tokens)  # fmt: skip
        for line in outside(calibrated, needs):
            print(line, file=sys.stderr)

    return check


CROSS_GAP = 0.05
"""How far the cost file's ``cross_core_gamma`` may sit from what its runs' cores' CPU gives
(``laminar.calibrate.background``) or, in files without it, from what its runs support within
each run (``laminar.calibrate.fit.within_run_gamma``) before ``simulate`` warns."""


def _note_calibration(cfg) -> None:
    """For a job simulated as the runtime's own (``sim.setting``), the warnings on what its
    cost file's calibration runs did not show: the cost file's runtime block read once."""
    from laminar.sim.setting import cost_extras, resolve_setting

    extras = cost_extras(cfg)
    if not extras or not resolve_setting(cfg):
        return
    _note_cross_core(cfg, extras)
    _note_placement(cfg, extras)


def _note_cross_core(cfg, extras: dict) -> None:
    """Warn when the job's engines are charged a cross-core factor that the calibration runs
    support only as a difference between runs (docs/fidelity.md, *Issue 31*)."""
    import sys

    from laminar.sim.local import CoreSharing

    gamma = extras.get("cross_core_gamma")
    measured = extras.get("cross_core_gamma_measured")
    within = measured if measured is not None else extras.get("cross_core_gamma_within_runs")
    if gamma is None or within is None or abs(gamma - within) <= CROSS_GAP:
        return
    if not CoreSharing(cfg).charges_cross():
        return
    gap = (1.0 + gamma) / (1.0 + within) - 1.0
    shows = ("their cores' CPU accounting gives" if measured is not None
             else "their steps show within each run")  # fmt: skip
    print(f"warning: {cfg.sim.cost_file}: cross_core_gamma {gamma:.2f}, fitted across its "
          f"calibration runs, is not what {shows} ({within:.2f}): "
          f"this job's engines alone on their cores are charged {1 + gamma:.2f}x "
          f"beside another core set's work, so their time may be off by up to "
          f"{abs(gap):.0%} (docs/fidelity.md, Issue 31)", file=sys.stderr)


def _note_placement(cfg, extras: dict) -> None:
    """Warn when the job's placement (runtime mode, rollouts) is none of the calibration runs':
    how its engines share the machine was never measured (docs/fidelity.md, *Issue 31*: a
    single sync engine beside an idle core, calibrated on two-engine runs alone, came out
    25-35% slow in two campaigns)."""
    import sys

    seen = extras.get("placements")
    if not seen:
        return
    rt = cfg.runtime
    if {"mode": rt.mode, "rollouts": rt.rollouts} in seen:
        return
    had = ", ".join(f"{p['mode']} x{p['rollouts']}" for p in seen)
    print(f"warning: {cfg.sim.cost_file}: this job's placement ({rt.mode}, {rt.rollouts} "
          f"rollout(s)) is none of its calibration runs' ({had}): how its engines share the "
          "machine is extrapolated; add a run of this placement to the calibration "
          "(docs/fidelity.md, Calibrating on your cluster)", file=sys.stderr)


def _note_task(cfg, answers: dict | None) -> None:
    """Warn when the job draws its task's lengths as the calibration runs' policy answered
    (``answers``, the cost file's ``policy_lengths``) a task other than its own: a job with
    another task trains another policy, which answers otherwise (docs/fidelity.md, *Issue
    31*: the held-out job's policy ran twice as long)."""
    import sys

    from laminar.calibrate.answers import task_of
    from laminar.sim.setting import resolve_setting

    tasks = (answers or {}).get("tasks")
    drawn = cfg.workload.source.type != "trace" and getattr(cfg.runtime.task, "type",
                                                             "repeat") == "repeat"  # fmt: skip
    if not tasks or not drawn or not resolve_setting(cfg):
        return
    mine = task_of(cfg)
    if mine in tasks:
        return

    def said(t: dict) -> str:
        return (f"median_len {t['median_len']:g}, tail_ratio {t['tail_ratio']:g}, "
                f"max_response_len {t['max_response_len']}")  # fmt: skip

    theirs = "; ".join(said(t) for t in tasks)
    print(f"warning: {cfg.sim.cost_file}: this job's task lengths are drawn as its calibration "
          f"runs' policy answered their task ({theirs}); this job's ({said(mine)}) trains "
          "another policy, which may answer otherwise (such predictions missed by up to 50% on "
          "train tokens/s in fidelity campaigns 15-18, where replaying the job's own lengths "
          "came within 15%): run a few steps of it and calibrate with --lengths-from "
          "THAT_RUN, or replay a trace (docs/fidelity.md, Calibrating on your cluster, 5)",
          file=sys.stderr)  # fmt: skip


def _note_step_bound(cfg) -> None:
    """The runtime bounds repack's decode steps only when it trains with a cost file: say so
    when ``--cost`` gives the simulated job a bound the config alone would not train with."""
    import sys

    from laminar.sim.setting import resolve_setting

    rp = cfg.repack
    if resolve_setting(cfg) and rp.enabled and rp.max_step_slowdown > 0:
        print(
            f"note: this simulates repack with its step bound (repack.max_step_slowdown "
            f"{rp.max_step_slowdown:g}); `laminar train` applies it only with a cost file "
            f"(--set sim.cost_file=FILE), and a train run's config.yaml records the bound it "
            "ran with",
            file=sys.stderr,
        )


def systems_override(names: str) -> str:
    """``--systems a,b`` as the ``--set`` it stands for."""
    listed = [s.strip() for s in names.split(",") if s.strip()]
    if not listed:
        from laminar.errors import LaminarError

        raise LaminarError(f"--systems {names[:40]!r}: names no system (e.g. laminar,verl or all)")
    return f"sim.systems=[{', '.join(listed)}]"


def run_and_write(cfg, target, check=None) -> int:
    """Simulate ``cfg`` with a progress bar, write the run directory of ``target`` (an
    :class:`~laminar.rundir.OutputTarget`, checked before the run), print the table (shared by
    ``laminar simulate`` and ``laminar replay``); ``check(result)``, when given, runs after
    the simulation (``laminar simulate --cost``'s calibrated-range warnings)."""
    from tqdm import tqdm

    from laminar.rundir import staged_output
    from laminar.sim import simulate
    from laminar.sim.report import summary_table

    total = cfg.workload.steps * len(cfg.sim.systems)
    # Staged before the run: SIGINT/SIGTERM during it leave nothing behind.
    with staged_output(target) as stage:
        # delay: the bar only appears on runs long enough to want one; disable=None: TTYs only.
        with tqdm(total=total, unit="step", delay=2.0, disable=None, leave=False) as bar:

            def on_step(system: str, steps_done: int) -> None:
                bar.set_description(system)
                bar.update(1)

            result = simulate(cfg, on_step=on_step)
        result.write_into(stage)
    if check is not None:
        check(result)
    print(summary_table(result.summary))
    print(f"\nrun directory: {target.path}")
    return 0
