"""Time ``laminar plan`` and check that it recovers the presets' trainer splits (issue 14).

    python benchmarks/bench_plan.py [--jobs 2] [--part recover|large|all]

1. ``recover``: for each paper preset (Qwen2.5 7B/32B/72B, 1024 H800s), a plan over the trainer
   split (1/8 .. 7/8 of the machines) with Laminar at the preset's rollout TP and batch bound.
   The presets' splits were chosen by a sweep of full simulations (laminar/sim/README.md); the
   plan should land within one grid step (1/8) of them.
2. ``large``: the default search with a fourth batch bound (every system x 7 splits x TP
   1/2/4/8 x max batch 64/128/256/512 x repack on/off: 576 points) on the 7B preset at 1024
   GPUs: points, simulations, wall and CPU time (goal: a 450-point plan within 5 minutes on 2
   cores). No cache, so every simulation runs. The same plan from the command line:
   ``laminar plan --preset paper-math-7b --max-batch 64,128,256,512 --jobs 2 --no-cache``.

Prints one JSON object and Markdown tables; copy them into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

from laminar.config import load_config
from laminar.plan import PlanOptions, SearchSpace, run_plan
from laminar.plan.space import DEFAULT_FRACTIONS
from laminar.sim.registry import all_systems

PRESETS = ("paper-math-7b", "paper-math-32b", "paper-math-72b")
GRID_STEP = 0.125
LARGE_BATCHES = (64, 128, 256, 512)  # with the default grid otherwise: 576 points


def recover(jobs: int) -> dict:
    out = {}
    for preset in PRESETS:
        base = load_config(preset=preset)
        space = SearchSpace(
            gpus=(base.cluster.gpus,),
            systems=("laminar",),
            trainer_fractions=DEFAULT_FRACTIONS,
            rollout_tps=(base.model.rollout_tp,),
            max_batches=(base.sim.max_batch,),
            repack=(base.repack.enabled,),
        )
        t0 = time.perf_counter()
        result = run_plan(base, space, PlanOptions(jobs=jobs, progress=False))
        wall_s = time.perf_counter() - t0
        df = result.points.set_index("pid")
        best = df.loc[result.best]
        machines = base.cluster.gpus // base.cluster.gpus_per_machine
        found = int(best["trainer_gpus"]) / base.cluster.gpus_per_machine / machines
        sims = df[df["status"].isin(["short", "full"])]
        out[preset] = {
            "preset_fraction": base.cluster.trainer_fraction,
            "plan_fraction": found,
            "within_one_step": abs(found - base.cluster.trainer_fraction) <= GRID_STEP + 1e-9,
            "best_train_tokens_per_s": float(best["train_tokens_per_s"]),
            "bottleneck": best["bottleneck"],
            "by_fraction": {
                f"{int(r.trainer_gpus) / base.cluster.gpus:.3f}": {
                    "status": r.status,
                    "train_tokens_per_s": float(r.train_tokens_per_s),
                    "bottleneck": r.bottleneck,
                }
                for r in sims.itertuples()
            },
            "screened": int((df["status"] == "screened").sum()),
            "wall_s": wall_s,
        }
    return out


def large(jobs: int) -> dict:
    base = load_config(preset="paper-math-7b")
    space = SearchSpace(
        gpus=(base.cluster.gpus,), systems=tuple(all_systems()), max_batches=LARGE_BATCHES
    )
    t0, c0 = time.perf_counter(), time.process_time()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_plan(base, space, PlanOptions(jobs=jobs, progress=False))
    wall_s = time.perf_counter() - t0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu_s = (kids.ru_utime + kids.ru_stime) - (kids0.ru_utime + kids0.ru_stime)
    counts = result.points["status"].value_counts().to_dict()
    return {
        "points": len(result.points),
        "status": {k: int(v) for k, v in counts.items()},
        "short_simulations": result.meta["simulated_short"],
        "full_simulations": result.meta["simulated_full"],
        "wall_s": wall_s,
        "parent_cpu_s": time.process_time() - c0,
        "workers_cpu_s": workers_cpu_s,
        "load_avg_1min_at_end": os.getloadavg()[0],
        "jobs": jobs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--part", choices=("recover", "large", "all"), default="all")
    args = ap.parse_args()
    out = {}
    if args.part in ("recover", "all"):
        out["recover"] = recover(args.jobs)
    if args.part in ("large", "all"):
        out["large"] = large(args.jobs)
    print(json.dumps(out, indent=2))
    if "recover" in out:
        print("\n| preset | preset split | plan's split | within one step | tokens/s | "
              "bottleneck | wall (s) |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for name, r in out["recover"].items():
            print(f"| {name} | {r['preset_fraction']} | {r['plan_fraction']:.3f} | "
                  f"{r['within_one_step']} | {r['best_train_tokens_per_s']:,.0f} | "
                  f"{r['bottleneck']} | {r['wall_s']:.0f} |")  # fmt: skip
    if "large" in out:
        r = out["large"]
        print(f"\nlarge plan: {r['points']} points {r['status']}, {r['short_simulations']} "
              f"short + {r['full_simulations']} full simulations, {r['wall_s']:.0f} s wall "
              f"with --jobs {r['jobs']}")  # fmt: skip


if __name__ == "__main__":
    main()
