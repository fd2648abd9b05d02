"""Do two versions of the simulator give the same tables? (speed work must not change results)

    PYTHONPATH=. python benchmarks/sim_identity.py --against DIR

``DIR`` holds an older ``laminar`` package (``git archive main laminar | tar -x -C DIR``). Each
version runs, in a process of its own, the same configs: the headline (``paper-math-7b``, 1024
GPUs, 20 steps) in full and summary-only mode, every system at 128 GPUs with the replica series
on and off, the reference stepper, the 32B and 72B presets, and rollout-machine, trainer and
relay faults. Every table (summary, steps, trajectories, replicas, faults) is compared with
``pandas.testing.assert_frame_equal(check_exact=True)`` over the older version's columns (a
column the newer one adds is listed, not compared: new figures leave old ones as they were; a
column it drops is a difference); prints one line per table and exits 1 if any differs.
``--ignore COLUMN`` leaves a column out of the comparison (named in the table's line), for a
change that relabels a column on purpose and must leave every figure as it was.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile

if os.environ.get("SIM_IDENTITY_SRC"):  # a child running older code
    sys.path.insert(0, os.environ["SIM_IDENTITY_SRC"])

SMALL = ["cluster.gpus=128", "workload.prompts_per_step=128", "workload.steps=6",
         "sim.warmup_steps=0"]  # fmt: skip
FOUR = ["cluster.gpus=32", "workload.prompts_per_step=12", "workload.steps=8",
        "sim.warmup_steps=0"]  # fmt: skip
FAULTS = {
    "rollout machine": "{type: rollout_machine, at_s: 12.0, machine: 1, recover_s: 20.0}",
    "trainer": "{type: trainer, at_s: 12.0, recover_s: 20.0}",
    "relay": "{type: relay, at_s: 12.0, machine: 1, recover_s: 20.0}",
}
TABLES = ("summary", "steps", "trajectories", "replicas", "faults")


def cases() -> dict[str, tuple[str, list[str], bool]]:
    """name -> (preset, overrides, summary_only)."""
    out = {
        "headline, summary only": ("paper-math-7b", [], True),
        "headline": ("paper-math-7b", [], False),
        "reference stepper, 64 GPUs": ("paper-math-7b", [
            "cluster.gpus=64", "workload.prompts_per_step=32", "workload.steps=2",
            "sim.warmup_steps=0", "sim.decode=reference", "sim.replica_series=false"], False),
        "32B, 6 steps, summary only": ("paper-math-32b", ["workload.steps=6"], True),
        "72B, 4 steps": ("paper-math-72b", ["workload.steps=4", "sim.warmup_steps=0"], False),
    }  # fmt: skip
    for s in ("laminar", "verl", "one-step", "stream", "partial"):
        out[f"{s}, 128 GPUs"] = ("paper-math-7b", [*SMALL, f"sim.systems=[{s}]"], False)
        out[f"{s}, 128 GPUs, no series"] = (
            "paper-math-7b", [*SMALL, f"sim.systems=[{s}]", "sim.replica_series=false"], False
        )  # fmt: skip
    for name, fault in FAULTS.items():
        for s in ("laminar", "verl"):
            out[f"{name} fault, {s}"] = (
                "paper-math-7b", [*FOUR, f"sim.systems=[{s}]", f"faults.events=[{fault}]"], False
            )  # fmt: skip
    return out


def run_all(path: str) -> None:
    """Child: run every case on the ``laminar`` importable here, pickle the tables."""
    from laminar.config import load_config
    from laminar.sim import simulate

    out = {}
    for name, (preset, overrides, summary_only) in cases().items():
        result = simulate(load_config(preset=preset, overrides=overrides),
                          summary_only=summary_only)  # fmt: skip
        out[name] = {t: getattr(result, t) for t in TABLES}
    with open(path, "wb") as f:
        pickle.dump(out, f)


def tables_of(src: str | None, path: str) -> dict:
    env = dict(os.environ, SIM_IDENTITY_SRC=src or "")
    subprocess.run([sys.executable, __file__, "--child", path], env=env, check=True)
    with open(path, "rb") as f:
        return pickle.load(f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", metavar="DIR", help="directory holding the older laminar")
    ap.add_argument("--child", metavar="PICKLE", help=argparse.SUPPRESS)
    ap.add_argument("--ignore", metavar="COLUMN", action="append", default=[],
                    help="leave this column out of the comparison (repeatable)")  # fmt: skip
    args = ap.parse_args()
    if args.child:
        run_all(args.child)
        return
    if not args.against:
        ap.error("--against DIR is required")
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        before = tables_of(args.against, os.path.join(tmp, "before.pkl"))
        after = tables_of(None, os.path.join(tmp, "after.pkl"))
    differ = 0
    for name in before:
        for table in TABLES:
            a, b = before[name][table], after[name][table]
            gone = [c for c in args.ignore if c in a.columns or c in b.columns]
            a, b = a.drop(columns=gone, errors="ignore"), b.drop(columns=gone, errors="ignore")
            added = [c for c in b.columns if c not in a.columns]
            try:
                pd.testing.assert_frame_equal(a, b.drop(columns=added), check_exact=True)
                more = f" (+{len(added)} new columns: {', '.join(added)})" if added else ""
                left = f" (not compared: {', '.join(gone)})" if gone else ""
                print(f"same     {name}: {table} {a.shape}{more}{left}")
            except AssertionError as e:
                differ += 1
                print(f"DIFFERS  {name}: {table}: {str(e).splitlines()[0]}")
    print(f"{differ} of {len(before) * len(TABLES)} tables differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
