"""Time the simulator (issue 4 speed goals).

    python benchmarks/bench_sim.py [--repeats 3] [--quick] [--headline-only [--against DIR...]]
        [--set KEY=VALUE ...]
    python benchmarks/bench_sim.py --phases

1. ``paper-math-7b`` at 1024 GPUs for 20 trainer steps, whole ``simulate()`` call (workload
   synthesis and tables included), median of ``--repeats``. Goal: <= 20 s (issue 4); issue 14
   asks 5x faster than 4.65 s. Side by side: the same run in the planner's summary-only mode
   (no per-trajectory or per-replica tables). With ``--against DIR`` (a directory holding an
   older ``laminar`` package, e.g. ``git archive main laminar | tar -x -C DIR``), each repeat
   also runs both modes on that code, in a fresh process per run, alternating with this
   code's, so a before/after ratio is measured side by side under the same machine load.
   Several DIRs are timed in the same rotation; code older than the summary-only mode runs
   the whole call only, which is then what this code's summary-only call is compared with.
   ``--against pure`` is this checkout with its mypyc-compiled modules off
   (``laminar.native``, ``LAMINAR_NATIVE=0``). ``--set KEY=VALUE`` changes the headline config
   in every run of part 1, e.g. ``--set sim.systems=[partial]`` to time a baseline instead.
   ``--phases``: where the summary-only headline's CPU time goes (the rollout manager's repack
   checks, prompt hand-out, trainer consumption, SimPy's own event loop), by timing those
   calls in place, next to the whole call.
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
import inspect
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


PURE = "pure"  # ``--against pure``: this checkout with its compiled modules off


def native_status() -> str:
    """Which simulator modules this process runs: compiled (``laminar.native``) or not."""
    import laminar

    try:
        from laminar import native
    except ImportError:
        return "(older code: none)"
    if os.path.dirname(native.__file__) != os.path.dirname(laminar.__file__):
        return "(older code: none)"  # an editable install's hook found this checkout's module
    return native.status()


def has_summary_only() -> bool:
    """Whether this ``simulate`` has the planner's summary-only mode (older code does not)."""
    return "summary_only" in inspect.signature(simulate).parameters


def timed(preset: str | None, overrides: list[str], *, summary_only: bool = False) -> dict:
    """Wall seconds of one ``simulate`` call, with the size of what it simulated."""
    cfg = load_config(preset=preset, overrides=overrides)
    kwargs = {"summary_only": True} if summary_only else {}
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(cfg, **kwargs)
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
        "native": native_status(),
        "sim_time_s": float(row["sim_time_s"]),
        "steps": int(row["steps"]),
    }


def _headline_in_process(src: str | None, summary_only: bool, sets: list[str]) -> dict:
    """One headline run (its config changed by ``sets``) in a fresh interpreter, on the
    ``laminar`` package under ``src`` (None: this checkout's), so old and new code never share
    a process."""
    env = dict(os.environ, BENCH_SIM_SRC=src or "", BENCH_SIM_SETS=json.dumps(sets))
    if src == PURE:  # this checkout, its compiled modules off (``laminar.native``)
        env.update(BENCH_SIM_SRC="", LAMINAR_NATIVE="0")
    cmd = [sys.executable, __file__, "--one-headline"]
    if summary_only:
        cmd.append("--summary-only")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _summary_only_in(src: str) -> bool:
    """Whether the code under ``src`` has ``simulate(..., summary_only=...)``."""
    if src == PURE:
        return True
    env = dict(os.environ, BENCH_SIM_SRC=src)
    cmd = [sys.executable, __file__, "--has-summary-only"]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _medians(rs: list[dict]) -> dict:
    return {
        "cpu_s": statistics.median(r["cpu_s"] for r in rs),
        "cpu_s_min": min(r["cpu_s"] for r in rs),  # the least disturbed by other jobs
        "wall_s": statistics.median(r["wall_s"] for r in rs),
        "cpu_s_all": [round(r["cpu_s"], 2) for r in rs],
        "train_tokens_per_s": rs[0]["train_tokens_per_s"],
        "trajectories": rs[0]["trajectories"],
        "native": rs[0].get("native", "(older code: none)"),
    }


def against(repeats: int, srcs: list[str], sets: list[str]) -> dict:
    """Before/after on the headline: each of ``srcs``' code and this checkout's, alternating
    (every repeat runs each version once per mode, in a fresh process each).

    Code older than the planner's summary-only mode runs only the whole call; its ratio to
    this code's summary-only call is then whole call before / summary-only after (what a
    plan cost before that mode existed)."""
    modes = {src: (False, True) if _summary_only_in(src) else (False,) for src in srcs}
    runs: dict[tuple[str, bool], list[dict]] = {}
    for _ in range(repeats):
        for label, where, so_modes in [*((s, s, m) for s, m in modes.items()),
                                       ("after", None, (False, True))]:  # fmt: skip
            for so in so_modes:
                runs.setdefault((label, so), []).append(_headline_in_process(where, so, sets))
    after = {"full": _medians(runs["after", False]),
             "summary_only": _medians(runs["after", True])}  # fmt: skip
    out: dict = {"after": after, "before": {}}
    for src, so_modes in modes.items():
        full = _medians(runs[src, False])
        so = _medians(runs[src, True]) if True in so_modes else full
        out["before"][src] = {
            "full": full,
            "summary_only": so,
            "has_summary_only": True in so_modes,
            "cpu_speedup_full": full["cpu_s"] / after["full"]["cpu_s"],
            "cpu_speedup_summary_only": so["cpu_s"] / after["summary_only"]["cpu_s"],
            "cpu_speedup_full_of_mins": full["cpu_s_min"] / after["full"]["cpu_s_min"],
            "cpu_speedup_summary_only_of_mins": (
                so["cpu_s_min"] / after["summary_only"]["cpu_s_min"]
            ),
        }
    return out


def phases() -> dict:
    """CPU seconds of the summary-only headline spent in a few named calls (wrapped in place,
    a handful of calls each, so the timing barely disturbs the run), and of SimPy alone: as
    many bare timeouts as the run processed events, over as many processes as replicas."""
    import simpy

    from laminar.sim import manager, pools, trainer

    spent: dict[str, float] = {}

    def wrap(owner, name: str, key: str) -> None:
        inner = getattr(owner, name)

        def timed_call(*args, **kwargs):
            c0 = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.process_time() - c0

        setattr(owner, name, timed_call)

    wrap(manager.RolloutManager, "check", "repack checks (all)")
    wrap(manager.RolloutManager, "_snapshots", "repack checks: snapshots")
    wrap(manager, "plan_repack", "repack checks: policy plan_repack")
    wrap(pools.PromptPool, "take", "prompt hand-out (trajectory records)")
    wrap(trainer.Trainer, "_consume", "trainer consumption")
    cfg = load_config(preset="paper-math-7b", overrides=[])
    events = {"n": 0}
    step = simpy.Environment.step

    def counted_step(env):
        events["n"] += 1
        step(env)

    simpy.Environment.step = counted_step
    try:
        c0 = time.process_time()
        result = simulate(cfg, summary_only=True)
        total = time.process_time() - c0
    finally:
        simpy.Environment.step = step
    env = simpy.Environment()
    replicas = int(result.summary.iloc[0]["replicas"])
    per = events["n"] // replicas + 1

    def bare(env):
        for i in range(per):
            yield env.timeout(1.0 + i * 1e-3)

    for _ in range(replicas):
        env.process(bare(env))
    c0 = time.process_time()
    env.run()
    spent["SimPy alone (bare timeouts)"] = time.process_time() - c0
    return {"cpu_s": total, "events": events["n"], "phases_cpu_s": spent,
            "timings_s": result.timings_s}


def headline(repeats: int, sets: list[str] = ()) -> dict:
    """The headline run (its config changed by ``sets``), whole ``simulate()`` (tables
    included) and in the planner's summary-only mode (``laminar.plan``), alternating so both
    see the same machine load."""
    runs: dict[str, list[dict]] = {"full": [], "summary_only": []}
    for _ in range(repeats):
        runs["full"].append(timed("paper-math-7b", list(sets)))
        runs["summary_only"].append(timed("paper-math-7b", list(sets), summary_only=True))
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
    ap.add_argument("--against", metavar="DIR", nargs="+", help="with --headline-only: "
                    "before/after, each DIR holding an older laminar package ('pure': this "
                    "checkout without its compiled modules)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="with --headline-only: change the headline config in every run, e.g. "
                    "sim.systems=[partial]")  # fmt: skip
    ap.add_argument("--phases", action="store_true", help="where the headline's time goes")
    ap.add_argument("--one-headline", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--has-summary-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--summary-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phases:
        print(json.dumps({"phases": phases()}, indent=2))
        return
    if args.has_summary_only:  # a child of ``against``
        print(json.dumps(has_summary_only()))
        return
    if args.one_headline:  # a child of ``against``
        sets = json.loads(os.environ.get("BENCH_SIM_SETS") or "[]")
        print(json.dumps(timed("paper-math-7b", sets, summary_only=args.summary_only)))
        return
    if args.headline_only and args.against:
        print(json.dumps({"against": against(args.repeats, args.against, args.sets)}, indent=2))
        return
    if args.headline_only:
        print(json.dumps({"headline": headline(args.repeats, args.sets)}, indent=2))
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
