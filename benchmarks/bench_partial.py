"""Seconds of a ``partial`` simulation, this tree against another's ``laminar`` package.

    git archive REV laminar | tar -x -C /tmp/ref
    LAMINAR_NATIVE=0 python benchmarks/bench_partial.py --against /tmp/ref --repeats 2

Each simulation runs in a fresh process with the tree's package first on ``sys.path``; the
trees alternate, so a machine's load hits both alike. Prints the seconds and the train
tokens/s of each (the figures tell whether the two trees simulate the same thing).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = (("paper-math-7b", 1024), ("paper-math-32b", 256))

CHILD = """
import sys, time
sys.path.insert(0, {root!r})
import laminar
assert laminar.__file__.startswith({root!r}), laminar.__file__
from laminar.config import load_config
from laminar.sim import simulate
cfg = load_config(preset={preset!r}, overrides=["cluster.gpus={gpus}", "sim.systems=[partial]",
                                                "workload.steps=10"])
t = time.perf_counter()
r = simulate(cfg, summary_only=True)
print(time.perf_counter() - t, float(r.summary.iloc[0]["train_tokens_per_s"]))
"""


def run(root: str, preset: str, gpus: int) -> tuple[float, float]:
    code = CHILD.format(root=root, preset=preset, gpus=gpus)
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, check=True).stdout.split()  # fmt: skip
    return float(out[0]), float(out[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="directory holding another laminar package")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    trees = {"this": str(ROOT), "against": str(Path(args.against).resolve())}
    for preset, gpus in CASES:
        seen: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
        for _ in range(args.repeats):
            for name, root in trees.items():
                seen[name].append(run(root, preset, gpus))
        best = {k: min(s for s, _ in v) for k, v in seen.items()}
        print(f"{preset} on {gpus} GPUs: this {best['this']:.2f} s "
              f"({seen['this'][0][1]:,.0f} tokens/s), against {best['against']:.2f} s "
              f"({seen['against'][0][1]:,.0f} tokens/s), ratio "
              f"{best['this'] / best['against']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
