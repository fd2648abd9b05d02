"""Why one laminar run took twice as long as the same run before it: Ray's worker niceness.

Ray starts its worker processes (trainer, engines, pools) at niceness 15 unless told
otherwise. Linux's scheduler then gives an ordinary (niceness 0) process sharing a core about
28 times the CPU (weights 1024 against 36): whenever something else runs on the trainer's
core, the trainer nearly stops. This runs the same short laminar job twice, each time with one
ordinary busy process pinned to the trainer's core (a stand-in for another user's work on a
shared machine): once with Ray's default niceness 15, once with the runtime's setting 0.

    flock /tmp/laminar-heavy.lock python benchmarks/niceness_ab.py --out docs/fidelity/niceness.csv
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import pandas as pd

from laminar.config import load_config
from laminar.runtime.run import ray_run
from laminar.runtime.run.driver import train

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def one(niceness: int, steps: int, hog_s: float) -> dict:
    cfg = load_config(preset="tiny-cpu", overrides=[f"workload.steps={steps}",
                                                    "runtime.eval_prompts=0"])  # fmt: skip
    ray_run.OFFLINE_ENV["RAY_worker_niceness"] = str(niceness)  # read when Ray starts
    core = cfg.runtime.placement().trainer_cpus
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(s=hog_s)])
    try:
        os.sched_setaffinity(hog.pid, core)
        result = train(cfg, on_step=lambda m: None)
    finally:
        hog.kill()  # our own busy process, by its pid
        hog.wait()
    steps_ = pd.DataFrame(result["steps"])
    win = steps_[steps_["step"] >= 1]
    return {
        "ray_worker_niceness": niceness,
        "wall_s": result["wall_s"],
        "train_s_sum": float(win["train_s"].sum()),
        "train_cpu_s_sum": float(win["train_cpu_s"].sum()),
        "trainer_cpu_share": float(win["train_cpu_s"].sum() / win["train_s"].sum()),
        "train_tokens_per_s": float(steps_["tokens"].sum() / result["wall_s"]),
        "loadavg_1m": float(steps_["loadavg_1m"].median()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--hog-s", type=float, default=600.0, help="lifetime cap of the busy process")
    p.add_argument("--out", help="CSV to write")
    args = p.parse_args(argv)
    rows = []
    for niceness in (15, 0):
        t = time.time()
        rows.append(one(niceness, args.steps, args.hog_s))
        print(rows[-1], f"({time.time() - t:.0f} s with start-up)", flush=True)
    df = pd.DataFrame(rows)
    print(df.round(3).to_string(index=False))
    if args.out:
        df.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
