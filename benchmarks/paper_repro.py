"""The paper, side by side: run the simulator on the paper's setups and write
``docs/paper-reproduction.md`` with tables and PNG figures next to the paper's numbers.

    PYTHONPATH=. python benchmarks/paper_repro.py [--jobs 2] [--quick] [--reuse]

Experiments (paper §8 on 1024 H800s, Qwen2.5 7B/32B/72B, DAPO-Math-like lengths, GRPO
512 prompts x 16, 2K prompt / 16K response):

1. throughput of every system vs GPUs (64 -> 1024) for each model (Fig. 11), each decoupled
   system on its best trainer/rollout split of ``FRACTIONS`` (the paper tunes allocations per
   system, App. A.2; its Table 2 is not in our copy); speedups and strong-scaling efficiency;
2. repack on/off for Laminar (Table 1, Fig. 16), and at the largest scale the long tail's
   generation time and the staleness after 20 and 60 steps with repack off, on (bounded by
   ``repack.max_step_slowdown``) and unbounded (§8.4);
3. actor stall and rollout weight-load time (Fig. 14);
4. staleness distributions (Fig. 10), consumed and inherent (§6);
5. a rollout machine killed and recovered in 252 s (Fig. 15).

Runs are shorter than the paper's (10 trainer steps, rates after 3 warm-up steps, vs. its 5
iterations after 10 warm-up) so the whole script takes minutes here. Raw results go to
``docs/paper-reproduction/*.csv``; ``--reuse`` redraws the document from them.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
from bench_repack_tail import tail_latency

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate

MODELS = ("7b", "32b", "72b")
GPUS = (64, 128, 256, 512, 1024)
FRACTIONS = (0.25, 0.5, 0.75)
DECOUPLED = ("laminar", "one-step", "stream", "partial")
STEPS, WARMUP = 10, 3
DOCS = Path("docs")
DATA = DOCS / "paper-reproduction"


def config(model: str, gpus: int, systems, *extra: str, steps: int = STEPS, warmup: int = WARMUP):
    """The ``paper-math-<model>`` preset at ``gpus`` GPUs, shortened to ``steps``."""
    names = ", ".join(systems)
    return load_config(
        preset=f"paper-math-{model}",
        overrides=[f"cluster.gpus={gpus}", f"workload.steps={steps}",
                   f"sim.warmup_steps={warmup}", f"sim.systems=[{names}]", *extra],
    )  # fmt: skip


def _grid_task(task: tuple) -> list[dict]:
    model, gpus, systems, fraction = task
    extra = ["sim.replica_series=false"]
    if fraction is not None:
        extra.append(f"cluster.trainer_fraction={fraction}")
    try:
        summary = simulate(config(model, gpus, systems, *extra)).summary
    except ConfigError:  # does not fit in memory (laminar.specs.memory): not a candidate split
        return []
    return [{**row, "model": model, "fraction": fraction} for row in summary.to_dict("records")]


def throughput_grid(jobs: int, models, gpus_list) -> pd.DataFrame:
    """Every (model, GPUs, system, trainer fraction) run; verl is colocated (no fraction)."""
    tasks = [(m, g, ["verl"], None) for m in models for g in gpus_list]
    tasks += [(m, g, list(DECOUPLED), f) for m in models for g in gpus_list for f in FRACTIONS]
    with ProcessPoolExecutor(jobs) as pool:
        rows = [r for part in pool.map(_grid_task, tasks) for r in part]
    return pd.DataFrame(rows)


def best_split(grid: pd.DataFrame) -> pd.DataFrame:
    """Each system's best training throughput per (model, GPUs), over the splits tried."""
    idx = grid.groupby(["model", "gpus", "system"])["train_tokens_per_s"].idxmax()
    return grid.loc[idx].reset_index(drop=True)


def _repack_task(task: tuple) -> dict:
    model, gpus, fraction, enabled = task
    cfg = config(model, gpus, ["laminar"], f"repack.enabled={str(enabled).lower()}",
                 f"cluster.trainer_fraction={fraction}", "sim.replica_series=false")  # fmt: skip
    s = simulate(cfg).summary.iloc[0]
    return {**s.to_dict(), "model": model, "fraction": fraction, "repack": enabled}


def repack_runs(jobs: int, best: pd.DataFrame, gpus_list) -> pd.DataFrame:
    """Laminar with repack on and off (Table 1, Fig. 16), each on Laminar's best split."""
    lam = best[(best["system"] == "laminar") & best["gpus"].isin(gpus_list)]
    tasks = [(r.model, r.gpus, r.fraction, on) for r in lam.itertuples() for on in (True, False)]
    with ProcessPoolExecutor(jobs) as pool:
        return pd.DataFrame(list(pool.map(_repack_task, tasks)))


TAIL_STEPS = (20, 60)
TAIL_SETTINGS = {"off": ["repack.enabled=false"], "on": [],
                 "unbounded": ["repack.max_step_slowdown=0"]}  # fmt: skip


def _tail_task(task: tuple) -> dict:
    model, gpus, fraction, steps, setting = task
    cfg = config(model, gpus, ["laminar"], f"cluster.trainer_fraction={fraction}",
                 "sim.replica_series=false", *TAIL_SETTINGS[setting], steps=steps,
                 warmup=steps // 4)  # fmt: skip
    res = simulate(cfg)
    s = res.summary.iloc[0]
    return {**s.to_dict(), **tail_latency(res), "model": model, "fraction": fraction,
            "setting": setting}  # fmt: skip


def repack_tail_runs(jobs: int, best: pd.DataFrame, gpus: int) -> pd.DataFrame:
    """§8.4 at ``gpus`` GPUs, Laminar's best split: repack off / on / unbounded, 20 and 60
    steps (a quarter of each left out as warm-up): long-tail latency and staleness."""
    lam = best[(best["system"] == "laminar") & (best["gpus"] == gpus)]
    tasks = [(r.model, r.gpus, r.fraction, n, k) for r in lam.itertuples()
             for n in TAIL_STEPS for k in TAIL_SETTINGS]  # fmt: skip
    with ProcessPoolExecutor(jobs) as pool:
        return pd.DataFrame(list(pool.map(_tail_task, tasks)))


def staleness_runs(model: str, gpus: int, fraction: float) -> dict:
    """Fig. 10, §6: Laminar, one-step and partial at one scale on Laminar's best split, plus
    Laminar without repack (to separate what repack does to the long tail's latency)."""
    split = f"cluster.trainer_fraction={fraction}"
    on = simulate(config(model, gpus, ["laminar", "one-step", "partial"], split,
                         "sim.replica_series=false"))  # fmt: skip
    off = simulate(config(model, gpus, ["laminar"], split, "repack.enabled=false",
                          "sim.replica_series=false"))  # fmt: skip
    return {"on": on, "off": off, "model": model, "gpus": gpus, "fraction": fraction}


def fault_runs(model: str, gpus: int, kill_s: float) -> dict:
    """Fig. 15: rollout machine 3 killed at ``kill_s`` and back 252 s later (§8.5), and the same
    runs without the fault; each stops 1500 s after the recovery (``sim.max_sim_time_s``).
    The split (0.625) leaves the rollouts, not the trainer, the bottleneck, so a lost machine
    shows in the throughput instead of being absorbed by backpressure."""
    fault = f"faults.events=[{{type: rollout_machine, at_s: {kill_s}, machine: 3, recover_s: 252}}]"
    common = ["sim.replica_series=false", "cluster.trainer_fraction=0.625",
              f"sim.max_sim_time_s={kill_s + 252 + 1500}"]  # fmt: skip
    systems = ["laminar", "one-step", "verl"]
    return {
        "fault": simulate(config(model, gpus, systems, fault, *common, steps=40, warmup=1)),
        "clean": simulate(config(model, gpus, systems, *common, steps=40, warmup=1)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="simulations run in parallel")
    ap.add_argument("--quick", action="store_true", help="7B only, 64 and 256 GPUs (smoke)")
    ap.add_argument("--reuse", action="store_true", help="redraw from the saved CSVs")
    ap.add_argument("--out", default=str(DOCS), help="directory of paper-reproduction.md")
    args = ap.parse_args()
    from paper_repro_doc import write_document

    out = Path(args.out)
    data = out / "paper-reproduction"
    data.mkdir(parents=True, exist_ok=True)
    models = ("7b",) if args.quick else MODELS
    gpus_list = (64, 256) if args.quick else GPUS
    t0 = time.perf_counter()
    if args.reuse:
        grid = pd.read_csv(data / "throughput_grid.csv")
        repack = pd.read_csv(data / "repack.csv")
        tails = pd.read_csv(data / "repack_tail.csv")
    else:
        grid = throughput_grid(args.jobs, models, gpus_list)
        grid.to_csv(data / "throughput_grid.csv", index=False)
        repack = repack_runs(
            args.jobs, best_split(grid), sorted({gpus_list[0], 256, gpus_list[-1]})
        )
        repack.to_csv(data / "repack.csv", index=False)
        tails = repack_tail_runs(args.jobs, best_split(grid), gpus_list[-1])
        tails.to_csv(data / "repack_tail.csv", index=False)
    best = best_split(grid)
    lam = best[(best["system"] == "laminar") & (best["gpus"] == gpus_list[-1])]
    lam = lam.assign(size=lam["model"].str.rstrip("b").astype(float)).sort_values("size")
    stale = [staleness_runs(r.model, r.gpus, r.fraction) for r in lam.itertuples()]
    faults = fault_runs("72b", 256, 1500.0)
    seconds = time.perf_counter() - t0
    timing = data / "seconds.txt"  # the full run's time, kept when --reuse redraws the page
    if args.reuse and timing.exists():
        seconds = float(timing.read_text())
    else:
        timing.write_text(f"{seconds:.0f}\n")
    write_document(out, grid, best, repack, tails, stale, faults, seconds=seconds,
                   quick=args.quick)  # fmt: skip
    print(f"wrote {out / 'paper-reproduction.md'} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
