"""``laminar calibrate RUN_DIR [RUN_DIR ...] -o cost.json``: fit the simulator to real runs."""

from __future__ import annotations

import argparse
import math


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit the simulator's cost model to `laminar train` run directories",
        description="Fit every cost-model coefficient (engine step vs batch and KV tokens, "
        "prefill, trainer rate, weight publish and load) to the profile/ of `laminar train` "
        "run directories of one machine and model; print each term's fit quality and the "
        "ranges of batch, KV tokens and lengths the fit saw; measure how the runs' policy "
        "answered its task (the simulator's task lengths); write a cost file that `laminar "
        "simulate CONFIG --cost FILE` loads to predict the job CONFIG trains (it warns when "
        "the prediction leaves those ranges).",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="`laminar train` run directories")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="cost file to write (.json)")
    p.add_argument(
        "--at-speed-of",
        metavar="RUN_DIR",
        help="scale the time coefficients to the machine speed measured beside this run "
        "(its profile/speed_probe.csv; laminar/calibrate/speed.py): predict a run made while "
        "the machine ran faster or slower than during the calibration runs",
    )
    p.add_argument(
        "--lengths-from",
        nargs="+",
        default=[],
        metavar="RUN_DIR",
        help="measure how the policy answers its task (the simulator's task lengths) from "
        "these runs instead: a short run of the job you will predict (e.g. `laminar train "
        "JOB.yaml --set workload.steps=4`), whose policy the calibration runs' may not be",
    )
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    from laminar.calibrate import calibrate, check_fitted, cost_file_json
    from laminar.rundir import prepare_file_out, staged_file

    # before the fit, not after it; never over, nor into, a run directory it reads
    inputs = [*args.runs, *args.lengths_from, args.at_speed_of or ""]
    prepare_file_out(args.out, inputs=inputs, outside_run_dirs=True, suffixes=(".json",))
    content, fits = calibrate(args.runs, args.lengths_from)
    if args.at_speed_of:
        content = _at_speed_of(content, args.at_speed_of)
        check_fitted(content, [*args.runs, args.at_speed_of])  # still a plausible cost model
    print(fit_table(fits))
    print()
    for name, c in content["coefficients"].items():
        print(f"  {name:26s} {c['value']:12.4g} {c['unit']}")
    with staged_file(args.out) as tmp:
        tmp.write_text(cost_file_json(content))
    ref = content["runtime"].get("speed_reference")
    if ref:
        print(f"\nmachine speed (probe): {ref['speed_s'] * 1e3:.2f} ms"
              + (f", {content['runtime']['speed_scaled_by']:.3f}x the calibration runs' time"
                 if "speed_scaled_by" in content["runtime"] else ""))  # fmt: skip
    print("\n" + ranges_table(content.get("ranges", {})))
    answers = content.get("policy_lengths")
    if answers and answers.get("tasks"):
        where = "the --lengths-from run(s)" if args.lengths_from else "the calibration runs"
        print(f"\ntask lengths as {where} answered (policy_lengths, {answers['runs']} run(s)): "
              + "; ".join(f"median_len {t['median_len']:g}, tail_ratio {t['tail_ratio']:g}, "
                          f"max_response_len {t['max_response_len']}" for t in answers["tasks"])
              + "; a job with another task: probe it and recalibrate with --lengths-from")
    _print_protocol(args.runs)
    print(f"\ncost file: {args.out}  (laminar simulate CONFIG --cost {args.out})")
    return 0


def _print_protocol(run_dirs: list[str]) -> None:
    """Say what the calibration runs lack of docs/fidelity.md's protocol
    (``laminar.calibrate.protocol``), and what accuracy that costs."""
    from laminar.calibrate.protocol import SHORTCUT, protocol_gaps, read_protocol_inputs

    gaps = protocol_gaps(read_protocol_inputs(run_dirs))
    if not gaps:
        print("\nprotocol: the runs meet docs/fidelity.md's (steps, repeats, a one-rollout run)")
        return
    print("\nprotocol (docs/fidelity.md, Calibrating on your cluster): read predictions from this "
          "cost file as rougher than that page's figures:")  # fmt: skip
    for gap in gaps:
        print(f"  - {gap}")
    print(f"  ({SHORTCUT})")


def _at_speed_of(content: dict, run_dir: str) -> dict:
    from laminar.calibrate import RunDirError, read_run
    from laminar.calibrate.speed import at_speed, run_speed

    measured = run_speed(read_run(run_dir))
    if measured is None:
        raise RunDirError(f"{run_dir}/profile/speed_probe.csv: missing or empty (a run recorded "
                          "with runtime.speed_probe_s=0, or from before the probe)")  # fmt: skip
    return at_speed(content, measured)


def ranges_table(ranges: dict) -> str:
    """What the fit saw of each quantity (``laminar.calibrate.ranges``): one line each."""
    lines = ["calibrated ranges (laminar simulate --cost warns outside them):"]
    for name, s in ranges.items():
        lines.append(f"  {name:20s} {s['min']:10,.0f} .. {s['max']:<10,.0f} "
                     f"p50 {s['p50']:,.0f}  p99 {s['p99']:,.0f}  {s['unit']}")  # fmt: skip
    return "\n".join(lines)


def fit_table(fits) -> str:
    """One line per fitted term: samples, R², median and p90 relative residual."""
    lines = [f"{'term':22s} {'samples':>8s} {'R2':>7s} {'|res|/y p50':>12s} {'p90':>7s}  note"]
    for f in fits:
        r2 = "-" if math.isnan(f.r2) else f"{f.r2:.3f}"
        p50 = "-" if math.isnan(f.rel_err_median) else f"{f.rel_err_median:.1%}"
        p90 = "-" if math.isnan(f.rel_err_p90) else f"{f.rel_err_p90:.1%}"
        lines.append(
            f"{f.name:22s} {f.samples:8d} {r2:>7s} {p50:>12s} "
            f"{p90:>7s}  {f.caveat or (f.note if not f.name.startswith('trainer') else '')}"
        )
    return "\n".join(lines)
