"""Engine start-up of a real `laminar train` run with cold and warm compile caches, side by side.

Each repeat runs the same short tiny-cpu job twice, alternating: once with an empty
``LAMINAR_CACHE_DIR`` (what every run did when vLLM's and inductor's caches lived in the run's
scratch directory: vLLM's model inspection subprocess and the C++ kernel compiles run again) and
once with the cache the first runs filled (``laminar.runtime.cluster.nodes.cache_dir``). The
warm-up is cached for both. Prints each run's ``setup_s`` and ``engine_start_s`` from its
``summary.json``, and the medians' ratio.

Usage: PYTHONPATH=. python benchmarks/bench_engine_start.py [--repeats 2] [--steps 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LAMINAR = [sys.executable, "-c", "import sys; from laminar.cli import main; sys.exit(main())"]


def run(work: Path, name: str, cache: Path, steps: int) -> dict:
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    sets = ["workload.prompts_per_step=4", "workload.samples_per_prompt=4", "runtime.max_batch=16",
            f"runtime.warmup.cache_dir={work / 'warmup'}"]  # fmt: skip
    args = [*LAMINAR, "train", "--preset", "tiny-cpu", "--steps", str(steps), "--no-progress",
            "--out", str(out), *(x for s in sets for x in ("--set", s))]  # fmt: skip
    env = {**os.environ, "LAMINAR_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    s = json.loads((out / "summary.json").read_text())
    return {"setup_s": s["setup_s"], "engine_start_s": max(s["engine_start_s"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-engine-start-"))
    warm_cache = work / "warm-cache"
    try:
        run(work, "fill", warm_cache, a.steps)  # fills the warm cache and the warm-up cache
        rows = {"cold": [], "warm": []}
        for i in range(a.repeats):
            cold_cache = work / f"cold-cache-{i}"
            for kind, cache in (("cold", cold_cache), ("warm", warm_cache)):
                r = run(work, f"{kind}-{i}", cache, a.steps)
                rows[kind].append(r)
                print(f"{kind} #{i}: setup {r['setup_s']:.1f} s, engine start "
                      f"{r['engine_start_s']:.1f} s", flush=True)  # fmt: skip
        print("\n| compile caches | setup (median) | engine start (median) |\n|---|---|---|")
        med = {k: {m: statistics.median(r[m] for r in v) for m in ("setup_s", "engine_start_s")}
               for k, v in rows.items()}  # fmt: skip
        for k in ("cold", "warm"):
            print(f"| {k} | {med[k]['setup_s']:.1f} s | {med[k]['engine_start_s']:.1f} s |")
        print(f"\ncold / warm: setup {med['cold']['setup_s'] / med['warm']['setup_s']:.2f}x, "
              f"engine start {med['cold']['engine_start_s'] / med['warm']['engine_start_s']:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
