"""Laminar vs sync on the real runtime, side by side, and repack on vs off.

Usage::

    PYTHONPATH=. python benchmarks/bench_runtime.py [--preset tiny-cpu] [--steps 40]
        [--repeats 4] [--skip-repack] [--json out.json] [--set KEY=VALUE ...]

Each repeat runs, on the same preset, model, task, seed and cores:

1. ``laminar`` and ``sync`` for the same number of trainer steps (the budget). The headline is
   the ratio of trainer throughput, ``train_tokens_per_s`` (prompt + response tokens consumed per
   second of the RL loop); steps per second are printed too. Goal on tiny-cpu: >= 1.3x.
2. laminar with repack on and off while generation is saturated (``prefetch_steps`` large, so
   rollouts never wait for the trainer's flow control): the ratio of ``gen_tokens_per_s``.

All runs share one Ray session and the same two engines (re-pinned to each mode's cores), so a
run costs its loop, not a minute of engine start-up, and the modes alternate quickly (ABBA...):
other work on a shared machine drifts, and side by side it drifts for both. Each run has its own
trainer (from the cached warm-up), pools, weight versions and manager. Only the loop's wall time
counts. Results go to stdout as JSON lines and a table; record them in
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import ExitStack

from laminar.config import LaminarConfig, load_config
from laminar.runtime.run import driver, loops, ray_run
from laminar.runtime.run.outputs import summarize

KEYS = ("wall_s", "train_tokens_per_s", "gen_tokens_per_s", "staleness_mean", "staleness_max")
KEYS += ("trajectories_lost", "repack_moves", "trainer_wait_s", "setup_s")


def run_job(cfg: LaminarConfig, dirs, stack: ExitStack, engines, job: str) -> tuple[dict, dict]:
    """One training run on the shared engines; returns its summary figures and the engines."""
    t0 = time.time()
    a = driver.launch(cfg, dirs, t0, stack, rollouts=engines, job=job)
    setup_s = time.time() - t0
    loop = loops.run_laminar if cfg.runtime.mode == "laminar" else loops.run_sync
    t = time.perf_counter()
    steps = loop(a, cfg, lambda m: None)
    wall_s = time.perf_counter() - t
    result = loops.collect(a)
    nan = {"reward": float("nan"), "version": -1}
    result.update(steps=steps, wall_s=wall_s, setup_s=setup_s, info=a.info, run_id=job)
    result.update(eval_first=nan, eval_last=nan)
    summary = summarize(cfg, result)
    driver.end_job(a)
    out = {k: summary[k] for k in KEYS}
    out["steps_per_s"] = summary["steps"] / summary["wall_s"]
    return out, a.rollouts


def ratio(a: list[dict], b: list[dict], key: str) -> list[float]:
    return [x[key] / y[key] for x, y in zip(a, b, strict=True)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny-cpu")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--skip-repack", action="store_true")
    p.add_argument("--json", help="also write every run to this file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    runs: dict[str, list[dict]] = {"laminar": [], "sync": [], "repack_on": [], "repack_off": []}
    plans = {
        "laminar": ["runtime.mode=laminar"],
        "sync": ["runtime.mode=sync"],
        "repack_on": ["runtime.mode=laminar", "runtime.prefetch_steps=1000", "repack.enabled=true"],
        "repack_off": [
            "runtime.mode=laminar",
            "runtime.prefetch_steps=1000",
            "repack.enabled=false",
        ],
    }
    names = ["laminar", "sync"] + ([] if args.skip_repack else ["repack_on", "repack_off"])
    common = [f"workload.steps={args.steps}", "runtime.eval_prompts=0", *args.overrides]
    cfgs = {n: load_config(preset=args.preset, overrides=[*common, *plans[n]]) for n in names}
    engines = None
    with ray_run.ray_session(cfgs["laminar"]) as dirs, ExitStack() as stack:
        for rep in range(args.repeats):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                res, engines = run_job(cfgs[name], dirs, stack, engines, f"{name}-{rep}")
                runs[name].append(res)
                print(json.dumps({"repeat": rep, "run": name, **res}), flush=True)
    report = {
        "laminar_over_sync_train_tokens": ratio(
            runs["laminar"], runs["sync"], "train_tokens_per_s"
        ),
        "laminar_over_sync_steps": ratio(runs["laminar"], runs["sync"], "steps_per_s"),
    }
    if not args.skip_repack:
        report["repack_on_over_off_gen_tokens"] = ratio(
            runs["repack_on"], runs["repack_off"], "gen_tokens_per_s"
        )
    print("\nratio                                  per repeat              median")
    for key, values in report.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{key:38s} {shown:22s}  {statistics.median(values):.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "ratios": report, "args": vars(args)}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
