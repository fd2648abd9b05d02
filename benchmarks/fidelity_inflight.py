"""Trajectories in flight, real vs simulated: where the fidelity study's generation error sits.

For every run of a campaign (``fidelity_runs.py`` output), the simulator replays the run's own
response lengths with a cost file (``sim.warmup_steps`` as in ``fidelity.py``), and both sides'
``trajectories.parquet`` give:

- *in flight*: the mean number of trajectories generating at once, the sum of every
  trajectory's generation time (``gen_end_s - gen_start_s``) over the span from the first start
  to the last end: what the rollouts keep going (flow control, refills, batch limits);
- *duration*: a trajectory's mean generation time: what each one costs (engine steps,
  core sharing, queueing), split by least squares into an *overhead* it pays once (admission,
  prefill, the way back to its rollout) and a time *per token*;
- *window*: the figures' window (the end of the warm-up steps to the end of the last step),
  whose ratio is the train tokens/s error of ``fidelity.py``.

Generated tokens per second is (in flight x tokens per trajectory / duration), so a ratio
sim / real below 1 in the first says the simulator keeps fewer trajectories going than the
runtime does, and in the second that it decodes each one slower. Run::

    python benchmarks/fidelity_inflight.py --runs runs/fidelity8 --speed speed_s \
        --cost docs/fidelity/campaign8/cost.json --out docs/fidelity/campaign8/inflight.csv
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.calibrate.rundir import step_timeline
from laminar.calibrate.speed import PROBE_FIGURES, at_speed, dir_speed
from laminar.sim import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import WARMUP_STEPS, job_config, run_dirs


def inflight(traj: pd.DataFrame, lo: float, hi: float) -> dict:
    """Mean trajectories generating at once over the window ``[lo, hi]`` (the figures' window:
    the end of the warm-up steps to the end of the last step) and the mean generation time of
    those that started in it (module docstring)."""
    t = traj[(traj["response_len"] > 0) & traj["gen_start_s"].notna() & traj["gen_end_s"].notna()]
    a, b = t["gen_start_s"].clip(lo, hi), t["gen_end_s"].clip(lo, hi)
    inside = t[(t["gen_start_s"] >= lo) & (t["gen_end_s"] <= hi)]
    dur = (inside["gen_end_s"] - inside["gen_start_s"]).to_numpy(float)
    # duration = overhead + response tokens x per-token time, least squares over the window's
    # trajectories: what a trajectory pays once (admission, prefill, return) and per token
    x = np.column_stack([np.ones(len(inside)), inside["response_len"].to_numpy(float)])
    (overhead, per_token), *_ = np.linalg.lstsq(x, dur, rcond=None)
    return {"in_flight": float((b - a).sum()) / (hi - lo), "duration_s": float(dur.mean()),
            "overhead_s": float(overhead), "per_token_s": float(per_token),
            "window_s": hi - lo, "started": len(inside),
            "tokens_per_trajectory": float(inside["response_len"].mean())}  # fmt: skip


def real_window(run: Path) -> tuple[float, float]:
    """The real run's figures' window on its job clock (``fidelity.measured``)."""
    s = json.loads((run / "summary.json").read_text())
    steps = step_timeline(run, 0.0)
    took, warm = steps["took_s"], steps["step"] < WARMUP_STEPS
    lo = s["setup_s"] + float(took[warm].sum())
    return lo, lo + float(took[~warm].sum())


def sim_window(steps: pd.DataFrame) -> tuple[float, float]:
    ends = steps.set_index("step")["end_s"]
    return float(ends[WARMUP_STEPS - 1]), float(ends.max())


def simulated(run: Path, cost: Path) -> dict:
    res = simulate(job_config(run, cost))  # the run's own lengths, as fidelity.py predicts
    return inflight(res.trajectories, *sim_window(res.steps))


def markdown(summary: pd.DataFrame) -> str:
    """The medians' table as Markdown (no tabulate dependency)."""
    cols = list(summary.columns)
    lines = ["| setting | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for name, row in summary.iterrows():
        cells = [f"{row[c]:.1f}" if "ms" in c or ("in flight" in c and "/" not in c)
                 else f"{row[c]:.3f}" for c in cols]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="output directory of fidelity_runs.py")
    p.add_argument("--cost", required=True, help="cost file (e.g. fidelity.py's cost.json)")
    p.add_argument("--out", required=True, help="CSV to write: one row per run")
    p.add_argument("--markdown", help="also write the medians' table here (Markdown)")
    p.add_argument("--speed", default="none", choices=["none", "speed_s", *PROBE_FIGURES],
                   help="predict each run at its own measured speed (as fidelity.py --speed)")
    args = p.parse_args(argv)
    runs = run_dirs(Path(args.runs))
    if not any(runs.values()):
        p.error(f"no run directories in {args.runs}")
    cost = Path(args.cost).resolve()
    if not cost.is_file():
        p.error(f"--cost {args.cost}: no such file")
    rows = []
    content = json.loads(cost.read_text())
    with tempfile.TemporaryDirectory() as scratch:
        for setting, dirs in runs.items():
            for d in dirs:
                real = inflight(pd.read_parquet(d / "trajectories.parquet"), *real_window(d))
                at = cost
                if args.speed != "none":  # the run's own measured speed (fidelity.py --speed)
                    at = Path(scratch) / f"{setting}-{d.name}.json"
                    speed = dir_speed(d, WARMUP_STEPS)
                    at.write_text(json.dumps(at_speed(content, speed, args.speed)))
                sim = simulated(d, at)
                row = {"setting": setting, "repeat": d.name}
                row.update({f"real_{k}": v for k, v in real.items()})
                row.update({f"sim_{k}": v for k, v in sim.items()})
                rows.append(row)
                print(f"{setting:20s} {d.name}: in flight real {real['in_flight']:5.1f} "
                      f"sim {sim['in_flight']:5.1f}; duration real {real['duration_s']:.3f} s "
                      f"sim {sim['duration_s']:.3f} s", flush=True)  # fmt: skip
    df = pd.DataFrame(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    med = df.groupby("setting")[[c for c in df.columns if c.startswith(("real_", "sim_"))]].median()
    summary = pd.DataFrame({
        "in flight real": med["real_in_flight"], "in flight sim": med["sim_in_flight"],
        "sim / real": med["sim_in_flight"] / med["real_in_flight"],
        "duration real s": med["real_duration_s"], "duration sim s": med["sim_duration_s"],
        "duration sim / real": med["sim_duration_s"] / med["real_duration_s"],
        "overhead real ms": med["real_overhead_s"] * 1e3,
        "overhead sim ms": med["sim_overhead_s"] * 1e3,
        "per token sim / real": med["sim_per_token_s"] / med["real_per_token_s"],
        "window sim / real": med["sim_window_s"] / med["real_window_s"],
    })  # fmt: skip
    print("\nmedians over repeats:")
    print(summary.round(3).to_string())
    if args.markdown:
        Path(args.markdown).write_text(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
