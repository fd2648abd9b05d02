"""Time the simulator (issue 4 speed goals).

    python benchmarks/bench_sim.py [--repeats 3] [--quick] [--headline-only [--against DIR]]

1. ``paper-math-7b`` at 1024 GPUs for 20 trainer steps, whole ``simulate()`` call (workload
   synthesis and tables included), median of ``--repeats``. Goal: <= 20 s (issue 4); issue 14
   asks 5x faster than 4.65 s. Side by side: the same run in the planner's summary-only mode
   (no per-trajectory or per-replica tables). With ``--against DIR`` (a directory holding an
   older ``laminar`` package, e.g. ``git archive main laminar | tar -x -C DIR``), each repeat
   also runs both modes on that code, in a fresh process per run, alternating with this
   code's, so a before/after ratio is measured side by side under the same machine load.
2. Event skipping vs the one-step-per-event reference stepper, side by side, on medium configs
   (the 7B preset at 64 and 256 GPUs, 64/128 prompts x 16 per step, 3 steps, 16K and 32K max
   response; per-replica series off in both, as the reference stepper would record a point per
   decode step). Ratios of the whole call, of its CPU time, and of the simulation proper (the
   ``run`` phase, without workload synthesis and output tables). Goal: >= 50x.
3. Growth with GPUs (64 -> 1024) and with max response length (4K -> 32K, the median scaled
   with it): time next to trajectories handed out and tokens decoded. It should follow
   trajectories, not tokens.

Each figure is given as wall time and as CPU time of this process: the machine is shared, and
CPU time is what other people's jobs disturb least. Prints one JSON object and a Markdown
table per part; copy them into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if os.environ.get("BENCH_SIM_SRC"):  # a child of ``against`` timing older code
    sys.path.insert(0, os.environ["BENCH_SIM_SRC"])

from laminar.config import load_config
from laminar.sim import simulate

MEDIUM = [
    "cluster.gpus=64",
    "workload.prompts_per_step=64",
    "workload.steps=3",
    "sim.warmup_steps=0",
    "sim.replica_series=false",
]
SPEEDUP_CONFIGS = {
    "64 GPUs, 16K": [],
    "256 GPUs, 16K": ["cluster.gpus=256", "workload.prompts_per_step=128"],
    "256 GPUs, 32K": [
        "cluster.gpus=256",
        "workload.prompts_per_step=128",
        "workload.max_response_len=32768",
        "workload.source.params.response_median_tokens=2600",
    ],
}


def timed(preset: str | None, overrides: list[str], *, summary_only: bool = False) -> dict:
    """Wall seconds of one ``simulate`` call, with the size of what it simulated."""
    cfg = load_config(preset=preset, overrides=overrides)
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(cfg, summary_only=summary_only)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    row = result.summary.iloc[0]
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "run_wall_s": sum(v for k, v in result.timings_s.items() if k.endswith(".run")),
        "trajectories": len(result.trajectories) or int(row["trajectories_done"]),
        "train_tokens_per_s": float(row["train_tokens_per_s"]),
        "decoded_tokens": int(row["decoded_tokens"]),
        "segments": len(result.replicas),
        "sim_time_s": float(row["sim_time_s"]),
        "steps": int(row["steps"]),
    }


def _headline_in_process(src: str | None, summary_only: bool) -> dict:
    """One headline run in a fresh interpreter, on the ``laminar`` package under ``src`` (None:
    this checkout's), so old and new code never share a process."""
    env = dict(os.environ, BENCH_SIM_SRC=src or "")
    cmd = [sys.executable, __file__, "--one-headline"]
    if summary_only:
        cmd.append("--summary-only")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def against(repeats: int, src: str) -> dict:
    """Before/after on the headline: ``src``'s code and this checkout's, alternating."""
    runs: dict[str, list[dict]] = {}
    for _ in range(repeats):
        for label, where in (("before", src), ("after", None)):
            for so in (False, True):
                key = f"{label}_{'summary_only' if so else 'full'}"
                runs.setdefault(key, []).append(_headline_in_process(where, so))
    out = {}
    for key, rs in runs.items():
        out[key] = {
            "cpu_s": statistics.median(r["cpu_s"] for r in rs),
            "wall_s": statistics.median(r["wall_s"] for r in rs),
            "cpu_s_all": [round(r["cpu_s"], 2) for r in rs],
            "train_tokens_per_s": rs[0]["train_tokens_per_s"],
            "trajectories": rs[0]["trajectories"],
        }
    for mode in ("full", "summary_only"):
        out[f"cpu_speedup_{mode}"] = out[f"before_{mode}"]["cpu_s"] / out[f"after_{mode}"]["cpu_s"]
    return out


def headline(repeats: int) -> dict:
    """The headline run, whole ``simulate()`` (tables included) and in the planner's
    summary-only mode (``laminar.plan``), alternating so both see the same machine load."""
    runs: dict[str, list[dict]] = {"full": [], "summary_only": []}
    for _ in range(repeats):
        runs["full"].append(timed("paper-math-7b", []))
        runs["summary_only"].append(timed("paper-math-7b", [], summary_only=True))
    out = {}
    for mode, rs in runs.items():
        out[mode] = dict(rs[0])
        for key in ("wall_s", "cpu_s"):
            out[mode][key] = statistics.median(r[key] for r in rs)
            out[mode][f"{key}_all"] = [round(r[key], 2) for r in rs]
    return out


def speedup(extra: list[str]) -> dict:
    fast = timed("paper-math-7b", [*MEDIUM, *extra])
    ref = timed("paper-math-7b", [*MEDIUM, *extra, "sim.decode=reference"])
    return {
        "event_wall_s": fast["wall_s"],
        "reference_wall_s": ref["wall_s"],
        "speedup_wall": ref["wall_s"] / fast["wall_s"],
        "speedup_cpu": ref["cpu_s"] / fast["cpu_s"],
        "speedup_run_wall": ref["run_wall_s"] / fast["run_wall_s"],
        "event_run_wall_s": fast["run_wall_s"],
        "reference_run_wall_s": ref["run_wall_s"],
        "trajectories": fast["trajectories"],
        "decoded_tokens": fast["decoded_tokens"],
    }


def scaling(steps: int, gpus: list[int], lens: list[int]) -> dict:
    base = [f"workload.steps={steps}", "sim.warmup_steps=0"]
    by_gpus = {g: timed("paper-math-7b", [*base, f"cluster.gpus={g}"]) for g in gpus}
    # The whole length distribution scales with the max (the dapo-math median is 1300 tokens
    # at 16K), so tokens per trajectory grow 8x from 4K to 32K while trajectories do not.
    by_len = {
        n: timed(
            "paper-math-7b",
            [
                *base,
                "cluster.gpus=256",
                f"workload.max_response_len={n}",
                f"workload.source.params.response_median_tokens={1300 * n / 16384}",
            ],
        )
        for n in lens
    }
    return {"gpus": by_gpus, "max_response_len": by_len}


def _table(title: str, rows: dict) -> str:
    lines = [
        f"| {title} | wall (s) | CPU (s) | trajectories | decoded tokens | CPU µs / trajectory "
        "| CPU ns / token |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, r in rows.items():
        per_traj = 1e6 * r["cpu_s"] / r["trajectories"]
        per_tok = 1e9 * r["cpu_s"] / r["decoded_tokens"]
        lines.append(
            f"| {key} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['trajectories']:,} "
            f"| {r['decoded_tokens']:,} | {per_traj:.0f} | {per_tok:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer steps and sizes (smoke run)")
    ap.add_argument("--headline-only", action="store_true", help="part 1 only")
    ap.add_argument("--against", metavar="DIR", help="with --headline-only: before/after, "
                    "DIR holding the older laminar package")
    ap.add_argument("--one-headline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--summary-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_headline:  # a child of ``against``
        print(json.dumps(timed("paper-math-7b", [], summary_only=args.summary_only)))
        return
    if args.headline_only and args.against:
        print(json.dumps({"against": against(args.repeats, args.against)}, indent=2))
        return
    if args.headline_only:
        print(json.dumps({"headline": headline(args.repeats)}, indent=2))
        return
    steps = 4 if args.quick else 10
    gpus = [64, 256] if args.quick else [64, 128, 256, 512, 1024]
    lens = [4096, 8192] if args.quick else [4096, 8192, 16384, 32768]
    out = {
        "headline": headline(1 if args.quick else args.repeats),
        "speedup": {
            name: speedup(extra)
            for name, extra in SPEEDUP_CONFIGS.items()
            if not args.quick or name == "64 GPUs, 16K"
        },
        "scaling": scaling(steps, gpus, lens),
    }
    print(json.dumps(out, indent=2))
    print()
    print("| config | event (s) | reference (s) | whole call | CPU | run phase |")
    print("|---|---|---|---|---|---|")
    for name, r in out["speedup"].items():
        print(
            f"| {name} | {r['event_wall_s']:.2f} | {r['reference_wall_s']:.2f} "
            f"| {r['speedup_wall']:.0f}x | {r['speedup_cpu']:.0f}x | {r['speedup_run_wall']:.0f}x |"
        )
    print()
    print(_table(f"GPUs (7B, 16K, {steps} steps)", out["scaling"]["gpus"]))
    print()
    print(_table("max response (7B, 256 GPUs)", out["scaling"]["max_response_len"]))


if __name__ == "__main__":
    main()
