"""Engine steps against what the other cores were doing: a term the cost model lacks.

For every engine step of a campaign's runs (``fidelity_runs.py`` output), the step's measured
time over its fitted cost (the cost file's engine terms, core-mates included, at the run's
measured machine speed: ``laminar/calibrate/speed.py``), split by *other*: the share of the
step during which a core outside the engine's own set had work, i.e. another engine's steps on
other cores, or the trainer's updates when the trainer's cores are not the engine's. The
trainer's update intervals are rebuilt from ``steps.csv`` (laminar: wait, train, publish back to
back from the loop's start; sync: generate, train, publish).

A ratio that climbs from the ``other`` = 0 column to the ``other`` = 1 column says an engine
runs slower while the rest of the machine works, which the fit charges as an average to its
base cost. Run::

    python benchmarks/fidelity_crosscore.py --runs runs/fidelity8 \
        --cost docs/fidelity/campaign8/cost.json --out docs/fidelity/campaign8/crosscore.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.calibrate import read_run
from laminar.calibrate.fit import _covered, _length_before, mate_load
from laminar.calibrate.rundir import step_timeline
from laminar.calibrate.speed import run_speed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import run_dirs

BINS = [-0.01, 0.1, 0.5, 0.9, 1.01]
LABELS = ["other < 0.1", "0.1-0.5", "0.5-0.9", "other > 0.9"]


def overlap(intervals: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Length of the union of ``intervals`` (``[start, end]`` rows) inside each ``[a, b]``."""
    cover = _covered(intervals)
    return _length_before(b, cover) - _length_before(a, cover)


def trainer_intervals(run_dir: Path) -> np.ndarray:
    """The trainer's update intervals on the job clock (``step_timeline``)."""
    setup_s = float(json.loads((run_dir / "summary.json").read_text())["setup_s"])
    st = step_timeline(run_dir, setup_s)
    return np.column_stack([st["train_start_s"], st["train_start_s"] + st["train_s"]])


def other_share(run, run_dir: Path) -> np.ndarray:
    """Per engine-step row of ``run.engine``: the share of the step another core had work."""
    eng = run.engine
    cpus = [frozenset(c) for c in run.machine["rollout_cpus"]]
    trainer = frozenset(run.machine.get("trainer_cpus") or [])
    start = (eng["at_s"] - eng["step_s"]).to_numpy(float)
    end = eng["at_s"].to_numpy(float)
    ids = eng["replica_id"].astype(str).to_numpy()
    index = {rid: int(rid.lstrip("r")) for rid in np.unique(ids)}
    train = trainer_intervals(run_dir)
    out = np.zeros(len(eng))
    for rid, i in index.items():
        mine = ids == rid
        parts = [np.column_stack([start[ids == r], end[ids == r]])
                 for r, j in index.items() if r != rid and cpus[j] != cpus[i]]  # fmt: skip
        if trainer - cpus[i]:
            parts.append(train)
        if parts:
            length = np.maximum(end[mine] - start[mine], 1e-12)
            busy = overlap(np.vstack(parts), start[mine], end[mine])
            out[mine] = np.clip(busy / length, 0.0, 1.0)
    return out


def steps_table(run_dir: Path, content: dict) -> pd.DataFrame:
    """One row per decoding engine step: measured seconds, fitted seconds, other-core share."""
    c = {k: v["value"] for k, v in content["coefficients"].items()}
    rt = content["runtime"]
    run = read_run(run_dir)
    speed = run_speed(run)
    k = speed["speed_s"] / rt["speed_reference"]["speed_s"] if speed else 1.0
    eng = run.engine
    busy, spin, batch = mate_load(run, run.config.runtime.engine_spin_effective_s)
    solo = (c["decode_base_s"] + c["decode_per_seq_s"] * eng["decode_seqs"]
            + c["decode_per_kv_token_s"] * eng["kv_tokens"]
            + c["prefill_per_token_s"] * eng["prefill_tokens"])  # fmt: skip
    load = (rt["core_sharing_alpha"] * busy + rt["core_sharing_alpha_spin"] * spin
            + rt["core_sharing_alpha_batch"] * batch)  # fmt: skip
    df = pd.DataFrame({"step_s": eng["step_s"], "fit_s": solo * (1 + load) * k,
                       "other": other_share(run, run_dir), "mates": busy + spin,
                       "decode_seqs": eng["decode_seqs"]})  # fmt: skip
    return df[df["decode_seqs"] > 0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="output directory of fidelity_runs.py")
    p.add_argument("--cost", required=True, help="cost file (fidelity.py's cost.json)")
    p.add_argument("--out", help="Markdown table to write")
    args = p.parse_args(argv)
    runs = run_dirs(Path(args.runs))
    if not any(runs.values()):
        p.error(f"no run directories in {args.runs}")
    content = json.loads(Path(args.cost).read_text())
    frames = []
    for setting, dirs in runs.items():
        for d in dirs:
            df = steps_table(d, content)
            df["setting"] = setting
            frames.append(df)
    steps = pd.concat(frames, ignore_index=True)
    steps["bin"] = pd.cut(steps["other"], BINS, labels=LABELS)
    grouped = steps.groupby(["setting", "bin"], observed=False)
    ratio = (grouped["step_s"].sum() / grouped["fit_s"].sum()).unstack()
    count = grouped.size().unstack()
    mates = steps.groupby("setting")["mates"].mean()
    lines = ["| setting | core-mates (mean) | " + " | ".join(LABELS) + " |",
             "|---" * (len(LABELS) + 2) + "|"]  # fmt: skip
    for setting in ratio.index:
        cells = [f"{ratio.loc[setting, b]:.2f}x ({int(count.loc[setting, b])})"
                 if count.loc[setting, b] >= 100 else "-" for b in LABELS]  # fmt: skip
        lines.append(f"| {setting} | {mates[setting]:.2f} | " + " | ".join(cells) + " |")
    text = ("Measured engine-step time over its fitted cost, by the share of the step another "
            "core had work (steps in brackets; bins under 100 steps left out).\n\n"
            + "\n".join(lines) + "\n")  # fmt: skip
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
