"""Engine steps against what the other cores were doing.

For every engine step of a campaign's runs (``fidelity_runs.py`` output), the step's measured
time over its fitted cost (the cost file's engine terms, core-mates and the cross-core term
included, at the run's measured machine speed: ``laminar/calibrate/speed.py``), split by
*other*: the share of the step during which a core outside the engine's own set had work,
i.e. another engine's steps on other cores, or the trainer's updates when the trainer's cores
are not the engine's (``laminar.calibrate.fit.other_core_share``, here for every engine, core
mates or not). The trainer's update intervals are rebuilt from ``steps.csv``.

A ratio that climbs from the ``other`` = 0 column to the ``other`` = 1 column says an engine
runs slower while the rest of the machine works than its fitted cost says. Cost files from
before ``cross_core_gamma`` have no term for that (the eighth campaign's table); with it, the
engines alone on their cores should show flat rows. Run::

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
from laminar.calibrate.fit import mate_load, other_core_share
from laminar.calibrate.speed import run_speed

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import emit, run_dirs

BINS = [-0.01, 0.1, 0.5, 0.9, 1.01]
LABELS = ["other < 0.1", "0.1-0.5", "0.5-0.9", "other > 0.9"]


def steps_table(run_dir: Path, content: dict) -> pd.DataFrame:
    """One row per decoding engine step: measured seconds, fitted seconds, other-core share."""
    c = {k: v["value"] for k, v in content["coefficients"].items()}
    rt = content["runtime"]
    run = read_run(run_dir)
    speed = run_speed(run)
    k = speed["speed_s"] / rt["speed_reference"]["speed_s"] if speed else 1.0
    eng = run.engine
    busy, spin, batch = mate_load(run, run.config.runtime.engine_spin_effective_s)
    cross = rt.get("cross_core_gamma", 0.0) * other_core_share(run)  # 0: an older cost file
    solo = (c["decode_base_s"] + c["decode_per_seq_s"] * eng["decode_seqs"]
            + c["decode_per_kv_token_s"] * eng["kv_tokens"]
            + c["prefill_per_token_s"] * eng["prefill_tokens"])  # fmt: skip
    load = (rt["core_sharing_alpha"] * busy + rt["core_sharing_alpha_spin"] * spin
            + rt["core_sharing_alpha_batch"] * batch)  # fmt: skip
    df = pd.DataFrame({"step_s": eng["step_s"], "fit_s": solo * (1 + load) * (1 + cross) * k,
                       "other": other_core_share(run, with_mates=True), "mates": busy + spin,
                       "decode_seqs": eng["decode_seqs"], "k": k})  # fmt: skip
    return df[df["decode_seqs"] > 0]


def per_run(steps: pd.DataFrame) -> str:
    """How well the speed probe tracks each run's engine: the run's engine-step time over its
    fitted cost at its measured speed (spread over runs), and log(measured / fitted at the
    reference speed) against log(the probe's speed ratio): slope and correlation."""
    g = steps.groupby("run").agg(step=("step_s", "sum"), fit=("fit_s", "sum"), k=("k", "first"))
    at_speed = g["step"] / g["fit"]
    x, y = np.log(g["k"]), np.log(at_speed * g["k"])
    slope = float(np.polyfit(x, y, 1)[0]) if x.std() > 0 else float("nan")
    corr = float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 else float("nan")
    return (f"Per run ({len(g)} runs): engine-step time over its fitted cost at the run's "
            f"measured speed {at_speed.min():.2f}-{at_speed.max():.2f} (median "
            f"{at_speed.median():.2f}); log(measured / fitted at the reference speed) against "
            f"log(the probe's speed over the reference): slope {slope:.2f}, correlation "
            f"{corr:.2f}.\n")  # fmt: skip


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
            df["setting"], df["run"] = setting, f"{setting}/{d.name}"
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
            + "\n".join(lines) + "\n\n" + per_run(steps))  # fmt: skip
    return emit(text, args.out)


if __name__ == "__main__":
    sys.exit(main())
