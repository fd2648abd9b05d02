"""Core-mates, real vs simulated: how much of an engine's decoding time its core-mate decodes.

For every run of a campaign (``fidelity_runs.py`` output) whose engines share a core, and for
the simulator's replay of it (the run's own lengths, at the run's measured speed when
``--speed`` names a probe figure, as ``fidelity.py`` predicts it), inside the figures' window:

- *mate decoding*: the share of an engine's decoding time during which its core-mate decoded
  too (real: ``laminar.calibrate.fit.mate_load`` over the engine's steps, weighted by their
  time; simulated: the replicas' time series, a replica decoding while it holds trajectories);
- *batch*: the sequences an engine decodes, weighted by time;
- *outside*: trajectories in flight (started, not yet back at their rollout:
  ``fidelity_inflight.inflight``) but not in an engine's batch, on average, and what that is
  per trajectory by Little's law (that number over the trajectories finished per second): the
  runtime's hops between its rollouts and engines, which the simulator does not model.

A core-mate that decodes costs an engine's step the most (``core_sharing_alpha``), so a
simulator whose mates decode more of the time than the runtime's runs each step slower, holds
each trajectory longer and keeps the mates busier still. Run::

    python benchmarks/fidelity_sharing.py --runs runs/fidelity9 \\
        --cost docs/fidelity/campaign9/cost.json --speed none --out sharing.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from laminar.calibrate import read_run
from laminar.calibrate.fit import _covered, _length_before, mate_load
from laminar.calibrate.speed import PROBE_FIGURES, at_speed, dir_speed
from laminar.sim import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import WARMUP_STEPS, emit, job_config, run_dirs
from fidelity_inflight import inflight, real_window, sim_window


def real(run_dir: Path) -> dict | None:
    """Mate decoding share and batch of the run's engines that share a core (None: none do)."""
    run = read_run(run_dir)
    cpus = [tuple(c) for c in run.machine["rollout_cpus"]]
    if all(cpus.count(c) == 1 for c in cpus):
        return None
    lo, hi = real_window(run_dir)
    eng = run.engine
    busy, _, _ = mate_load(run, run.config.runtime.engine_spin_effective_s)
    keep = ((eng["decode_seqs"] > 0) & (eng["at_s"] - eng["step_s"] >= lo)
            & (eng["at_s"] <= hi)).to_numpy()  # fmt: skip
    w = eng["step_s"].to_numpy(float)[keep]
    running = 0.0  # the engines' batches over the window (``running`` after each step)
    for _, g in eng.sort_values("at_s").groupby(eng["replica_id"].astype(str)):
        t = np.clip(g["at_s"].to_numpy(float), lo, hi)
        running += float((g["running"].to_numpy(float)[:-1] * np.diff(t)).sum()) / (hi - lo)
    traj = pd.read_parquet(run_dir / "trajectories.parquet")
    return {"mate_decoding": float(np.average(busy[keep], weights=w)),
            "batch": float(np.average(eng["decode_seqs"].to_numpy(float)[keep], weights=w)),
            **outside(traj, lo, hi, running)}  # fmt: skip


def outside(traj: pd.DataFrame, lo: float, hi: float, running: float) -> dict:
    """Trajectories in flight but not in an engine's batch, and seconds per trajectory."""
    flying = inflight(traj, lo, hi)["in_flight"]
    done = traj["gen_end_s"].between(lo, hi) & (traj["response_len"] > 0)
    rate = float(done.sum()) / (hi - lo)
    return {"outside": flying - running, "outside_ms": 1000 * (flying - running) / rate}


def simulated(run_dir: Path, cost: Path) -> dict:
    """The same two figures for the simulator's replay of the run."""
    res = simulate(job_config(run_dir, cost))
    lo, hi = sim_window(res.steps)
    rep = res.replicas.sort_values("t_s")
    spans, batch, held = {}, [], 0.0
    for rid, g in rep.groupby("replica_id"):
        t = g["t_s"].to_numpy(float)
        a, b = np.clip(t, lo, hi), np.clip(np.append(t[1:], hi), lo, hi)
        running = g["running"].to_numpy(float)
        on = (running > 0) & (b > a)
        spans[rid] = np.column_stack([a[on], b[on]])
        batch.append((running[on] * (b - a)[on]).sum() / max((b - a)[on].sum(), 1e-12))
        held += float((running * (b - a)).sum()) / (hi - lo)
    shares = []
    for rid, mine in spans.items():
        mates = [s for r, s in spans.items() if r != rid]
        if not mates or len(mine) == 0:
            continue
        cover = _covered(np.vstack(mates))
        both = _length_before(mine[:, 1], cover) - _length_before(mine[:, 0], cover)
        shares.append(both.sum() / (mine[:, 1] - mine[:, 0]).sum())
    return {"mate_decoding": float(np.mean(shares)), "batch": float(np.mean(batch)),
            **outside(res.trajectories, lo, hi, held)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="output directory of fidelity_runs.py")
    p.add_argument("--cost", required=True, help="cost file (fidelity.py's cost.json)")
    p.add_argument("--speed", default="none", choices=["none", "speed_s", *PROBE_FIGURES],
                   help="predict each run at its measured speed by this probe figure")
    p.add_argument("--out", help="Markdown table to write")
    args = p.parse_args(argv)
    runs = run_dirs(Path(args.runs))
    content = json.loads(Path(args.cost).read_text())
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for setting, dirs in runs.items():
            for d in dirs:
                measured = real(d)
                if measured is None:
                    continue
                cost = Path(args.cost).resolve()
                if args.speed != "none":
                    cost = Path(scratch) / f"{setting}-{d.name}.json"
                    speed = dir_speed(d, WARMUP_STEPS)
                    cost.write_text(json.dumps(at_speed(content, speed, args.speed)))
                sim = simulated(d, cost)
                rows.append({"setting": setting, "repeat": d.name,
                             **{f"real_{k}": v for k, v in measured.items()},
                             **{f"sim_{k}": v for k, v in sim.items()}})  # fmt: skip
                print(f"{setting:20s} {d.name}: mate decoding real "
                      f"{measured['mate_decoding']:.2f} sim {sim['mate_decoding']:.2f}", flush=True)
    df = pd.DataFrame(rows)
    med = df.groupby("setting").median(numeric_only=True)
    lines = ["| setting | runs | mate decoding real | sim | batch real | sim | "
             "outside real | sim | outside ms real | sim |",
             "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for setting, r in med.iterrows():
        n = int((df["setting"] == setting).sum())
        lines.append(f"| {setting} | {n} | {r['real_mate_decoding']:.2f} | "
                     f"{r['sim_mate_decoding']:.2f} | {r['real_batch']:.1f} | "
                     f"{r['sim_batch']:.1f} | {r['real_outside']:.1f} | "
                     f"{r['sim_outside']:.1f} | {r['real_outside_ms']:.0f} | "
                     f"{r['sim_outside_ms']:.0f} |")  # fmt: skip
    text = ("Share of an engine's decoding time its core-mate decoded too, the batch it "
            "decoded (time-weighted), and the trajectories in flight outside the engines "
            "(module docstring), medians over the runs, inside the figures' window.\n\n"
            + "\n".join(lines) + "\n")  # fmt: skip
    return emit(text, args.out)


if __name__ == "__main__":
    sys.exit(main())
