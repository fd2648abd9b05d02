"""Laminar vs sync on the real runtime, side by side, and repack on vs off.

Usage::

    PYTHONPATH=. python benchmarks/bench_runtime.py [--preset tiny-cpu] [--steps 40]
        [--repeats 4] [--skip-repack] [--json out.json] [--set KEY=VALUE ...]
        [--task preset|repeat|jsonl|calculator] [--env-latency-s 1.0] [--env-latency-sigma 1.0]
        [--out DIR]

Each repeat runs, on the same preset, model, task, seed and cores:

1. ``laminar`` and ``sync`` for the same number of trainer steps (the budget). The headline is
   the ratio of trainer throughput, ``train_tokens_per_s`` (prompt + response tokens consumed per
   second of the RL loop); steps per second are printed too. Goal on tiny-cpu: >= 1.3x.
2. laminar with repack on and off while generation is saturated (``prefetch_steps`` large, so
   rollouts never wait for the trainer's flow control): the ratio of ``gen_tokens_per_s``.

All runs share one Ray session and two engines (re-pinned to each mode's cores; one pair for the
runs whose engines start alike, ``ray_run.engine_start_key``: a sync job's on CPU spin less than
a laminar job's), so a run costs its loop, not a minute of engine start-up, and the modes
alternate quickly (ABBA...): other work on a shared machine drifts, and side by side it drifts
for both. Each run has its own trainer (from the cached warm-up), pools, weight versions and
manager. Only the loop's wall time counts. Results go to stdout as JSON lines and a table;
record them in ``benchmarks/RESULTS.md``.

``--task`` picks the runtime task (``runtime.task``) of every run: ``preset`` (default: the
preset's own, the repeat task on tiny-cpu), ``repeat``, ``jsonl`` (small additions written
here, ``localmodel.arithmetic_jsonl``; a pretrained model only: the tiny vocabulary cannot write
its ``\\boxed{}`` target) or ``calculator``: the same problems behind the shipped calculator tool,
a slow environment whose latency per call is log-normal (``--env-latency-s`` median,
``--env-latency-sigma``, at most 30 s; seeded, so both modes wait alike), up to 4 turns. On the
tiny model it is ``benchmarks/calculator_tiny.py`` (the calculator with a call the char
vocabulary can write, ``calc:a+b``, and a warm-up that teaches it for about half the problems;
what the model does after the tool's answer is not taught); on a pretrained model the shipped
``calculator`` task type. The JSON lines then carry what the environment did:
``turns_gt1_share`` (trajectories that called the tool), ``turns_mean``, ``tool_latency_mean_s``.

``--out DIR`` writes every laminar and sync run's directory (``DIR/<mode>/rep<k>``, as
``laminar train`` would, speed probe included), then calibrates the simulator on all of them
(``laminar calibrate``: ``DIR/cost.json``) and simulates each run's own config with that cost
file, its response lengths replayed from its trace (``laminar simulate``, as
``benchmarks/fidelity.py`` does), and prints measured against simulated train tokens/s and the
laminar/sync ratio. Both figures are over the steps after the first (the simulator's
``sim.warmup_steps=1``), so they differ from the headline's whole-loop figures. A multi-turn
trace's turns and environment waits are replayed too (``laminar.sim.turns``). ``--cost FILE``
simulates with that cost file (``laminar calibrate`` on other runs of this machine) instead of
calibrating on these runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from laminar.config import LaminarConfig, load_config
from laminar.runtime.run import driver, loops, ray_run
from laminar.runtime.run.outputs import summarize

KEYS = ("wall_s", "train_tokens_per_s", "gen_tokens_per_s", "staleness_mean", "staleness_max")
KEYS += ("trajectories_lost", "repack_moves", "trainer_wait_s", "setup_s")
HERE = Path(__file__).resolve().parent
TASKS = ("preset", "repeat", "jsonl", "calculator")
CALC_MAX_TURNS = 4
CALC_LATENCY_MAX_S = 30.0


def problems_file(n: int, seed: int = 0) -> Path:
    """The arithmetic problems (``localmodel.arithmetic_jsonl``), at a path that depends only on
    ``n`` and ``seed``: the warm-up cache is keyed by the task's path, so every invocation of
    the bench reuses one warm-up."""
    from laminar.runtime.models.localmodel import arithmetic_jsonl

    path = Path(tempfile.gettempdir()) / "laminar-bench" / f"arithmetic-{n}-{seed}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        arithmetic_jsonl(tmp, n=n, seed=seed)
        tmp.replace(path)
    return path


def task_overrides(task: str, *, model_type: str, path: str | Path | None = None,
                   latency_s: float = 1.0, sigma: float = 1.0) -> list[str]:  # fmt: skip
    """The ``--set`` overrides that make ``task`` every run's ``runtime.task`` (module doc);
    ``path``: the problems file of ``jsonl`` and ``calculator``."""
    if task == "preset":
        return []
    if task == "repeat":
        return ["runtime.task={type: repeat}"]
    if task == "jsonl":
        if model_type == "tiny":
            raise ValueError("--task jsonl needs a pretrained model (runtime.model): the tiny "
                             "vocabulary cannot write its \\boxed{} warm-up target")  # fmt: skip
        return [f"runtime.task={{type: jsonl, path: {json.dumps(str(path))}}}"]
    if task != "calculator":
        raise ValueError(f"--task {task!r}: one of {', '.join(TASKS)}")
    latency = (f"latency_median_s: {latency_s}, latency_sigma: {sigma}, "
               f"latency_max_s: {CALC_LATENCY_MAX_S}")  # fmt: skip
    timeout = 2 * CALC_LATENCY_MAX_S
    if model_type == "tiny":
        args = f"{{path: {json.dumps(str(path))}, {latency}, system_prompt: ''}}"
        return [f"runtime.task={{type: python, entry: 'calculator_tiny:make', "
                f"module_dir: {json.dumps(str(HERE))}, args: {args}, "
                f"max_turns: {CALC_MAX_TURNS}, timeout_s: {timeout}}}"]  # fmt: skip
    return [f"runtime.task={{type: calculator, path: {json.dumps(str(path))}, {latency}, "
            f"max_turns: {CALC_MAX_TURNS}, timeout_s: {timeout}}}"]  # fmt: skip


def turn_stats(ledger: list[dict]) -> dict:
    """What a multi-turn environment did in one run's finished trajectories: the share that
    took more than one turn (called the tool), the mean turns and the mean seconds a call
    waited; empty for a single-turn task (no trajectory counts turns)."""
    trajs = [row["traj"] for row in ledger]
    if not any(t.turns > 0 for t in trajs):
        return {}
    turns = [max(1, t.turns) for t in trajs]
    calls = [t.tool_latency_s for t, n in zip(trajs, turns, strict=True) if n > 1]
    return {
        "turns_gt1_share": sum(n > 1 for n in turns) / len(turns),
        "turns_mean": statistics.fmean(turns),
        "tool_latency_mean_s": statistics.fmean(calls) if calls else 0.0,
    }


def run_job(cfg: LaminarConfig, dirs, stack: ExitStack, engines, job: str,
            out: Path | None = None) -> tuple[dict, dict]:  # fmt: skip
    """One training run on the shared engines; returns its summary figures and the engines.
    ``out``: write its run directory there (speed probe included), as ``laminar train``."""
    t0 = time.time()
    probe = None
    if out is not None:
        from laminar.runtime.profiling.speedprobe import SpeedProbe

        probe = SpeedProbe(cfg.runtime.speed_probe_s, dirs.tmp,
                           cores=cfg.runtime.device == "cpu").start()
    a = driver.launch(cfg, dirs, t0, stack, rollouts=engines, job=job)
    setup_s = time.time() - t0
    loop = loops.run_laminar if cfg.runtime.mode == "laminar" else loops.run_sync
    t = time.perf_counter()
    steps = loop(a, cfg, lambda m: None)
    wall_s = time.perf_counter() - t
    speed = probe.stop(t0) if probe is not None else None
    result = loops.collect(a)
    nan = {"reward": float("nan"), "version": -1}
    result.update(steps=steps, wall_s=wall_s, setup_s=setup_s, info=a.info, run_id=job)
    result.update(eval_first=nan, eval_last=nan)
    if out is not None:
        from laminar.rundir import staged_dir
        from laminar.runtime.run.outputs import write_run_dir

        result.update(speed_probe=speed)
        with staged_dir(out) as stage:
            summary = write_run_dir(cfg, result, stage)
    else:
        summary = summarize(cfg, result)
    driver.end_job(a)
    res = {k: summary[k] for k in KEYS}
    res["steps_per_s"] = summary["steps"] / summary["wall_s"]
    res.update(turn_stats(result["ledger"]))
    return res, a.rollouts


def ratio(a: list[dict], b: list[dict], key: str) -> list[float]:
    return [x[key] / y[key] for x, y in zip(a, b, strict=True)]


def simulated_rows(out: Path, names: list[str], cost: Path | None = None) -> list[dict]:
    """Calibrate on every run directory under ``out`` (``laminar calibrate``: ``out/cost.json``)
    (or take ``cost``) and simulate each run's config with it (``laminar simulate``, lengths
    replayed from the
    run's trace); one row per run: measured and simulated train tokens/s over the steps after
    the first (``benchmarks/fidelity.py``: ``measured``, ``predicted``)."""
    sys.path.insert(0, str(HERE))
    try:
        import fidelity
    finally:
        sys.path.remove(str(HERE))
    from laminar.calibrate import calibrate, cost_file_json

    runs = {n: sorted((out / n).glob("rep*")) for n in names}
    if cost is None:
        content, _ = calibrate([d for dirs in runs.values() for d in dirs])
        cost = (out / "cost.json").resolve()
        cost.write_text(cost_file_json(content))
    rows = []
    for name, dirs in runs.items():
        for d in dirs:
            m = fidelity.measured(d)["train_tokens_per_s"]
            s = fidelity.predicted(d, cost, trace=True)["train_tokens_per_s"]
            rows.append({"mode": name, "repeat": d.name, "measured": m, "simulated": float(s)})
    return rows


def sim_table(rows: list[dict]) -> tuple[dict, str]:
    """(figures, text) of measured against simulated train tokens/s (``rows``: ``mode``,
    ``repeat``, ``measured``, ``simulated``): per mode the median over repeats and simulated /
    measured; the laminar/sync ratio, each side the median of the repeats' ratios."""
    by: dict[str, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(r["mode"], {})[r["repeat"]] = r
    figures: dict = {}
    lines = [f"{'train tokens/s':24s} {'measured':>10s} {'simulated':>10s} {'sim/meas':>9s}"]
    for mode in ("laminar", "sync"):
        runs = list(by.get(mode, {}).values())
        if not runs:
            continue
        m = statistics.median(r["measured"] for r in runs)
        s = statistics.median(r["simulated"] for r in runs)
        figures[mode] = {"measured": m, "simulated": s}
        lines.append(f"{mode:24s} {m:10.0f} {s:10.0f} {s / m:8.2f}x")
    both = sorted(set(by.get("laminar", {})) & set(by.get("sync", {})))
    if both:
        out = {}
        for side in ("measured", "simulated"):
            per = [by["laminar"][k][side] / by["sync"][k][side] for k in both]
            out[side] = statistics.median(per)
            out[f"{side}_per_repeat"] = per
        figures["laminar_over_sync"] = out
        m, s = out["measured"], out["simulated"]
        lines.append(f"{'laminar / sync':24s} {m:9.2f}x {s:9.2f}x {s / m:8.2f}x")
    return figures, "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny-cpu")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--skip-repack", action="store_true")
    p.add_argument("--json", help="also write every run to this file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--task",
        choices=TASKS,
        default="preset",
        help="every run's runtime.task (module doc); default: the preset's",
    )
    p.add_argument(
        "--env-latency-s",
        type=float,
        default=1.0,
        help="--task calculator: median seconds per calculator call (default 1.0)",
    )
    p.add_argument(
        "--env-latency-sigma",
        type=float,
        default=1.0,
        help="--task calculator: log-normal sigma of the latency (default 1.0)",
    )
    p.add_argument(
        "--problems",
        type=int,
        default=1024,
        help="--task jsonl/calculator: problems written (default 1024)",
    )
    p.add_argument(
        "--out",
        help="write the laminar and sync runs' directories here, then "
        "calibrate the simulator on them and simulate each (module doc)",
    )
    p.add_argument(
        "--cost",
        help="with --out: simulate the runs with this cost file (laminar calibrate on other "
        "runs of this machine) instead of calibrating on them",
    )
    args = p.parse_args(argv)
    if not args.env_latency_s >= 0 or not args.env_latency_sigma >= 0:
        p.error("--env-latency-s and --env-latency-sigma must be >= 0")
    if args.problems < 1:
        p.error("--problems must be >= 1")
    if args.cost and not args.out:
        p.error("--cost: simulates the runs of --out; give --out too")
    if args.cost and not Path(args.cost).is_file():
        p.error(f"--cost {args.cost}: no such file")
    if args.out and Path(args.out).exists() and any(Path(args.out).iterdir()):
        p.error(f"--out {args.out}: exists and is not empty")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs: dict[str, list[dict]] = {"laminar": [], "sync": [], "repack_on": [], "repack_off": []}
    plans = {
        "laminar": ["runtime.mode=laminar"],
        "sync": ["runtime.mode=sync"],
        "repack_on": ["runtime.mode=laminar", "runtime.prefetch_steps=1000", "repack.enabled=true"],
        "repack_off": [
            "runtime.mode=laminar",
            "runtime.prefetch_steps=1000",
            "repack.enabled=false",
        ],
    }
    names = ["laminar", "sync"] + ([] if args.skip_repack else ["repack_on", "repack_off"])
    common = [f"workload.steps={args.steps}", "runtime.eval_prompts=0", *args.overrides]
    if args.task != "preset":
        model = load_config(preset=args.preset, overrides=common).runtime.model.type
        path = problems_file(args.problems) if args.task in ("jsonl", "calculator") else None
        try:
            common += task_overrides(
                args.task,
                model_type=model,
                path=path,
                latency_s=args.env_latency_s,
                sigma=args.env_latency_sigma,
            )
        except ValueError as e:
            print(f"bench_runtime: error: {e}", file=sys.stderr)
            return 2
    cfgs = {n: load_config(preset=args.preset, overrides=[*common, *plans[n]]) for n in names}
    out = Path(args.out) if args.out else None
    engines: dict[tuple, dict] = {}  # one set per way engines start (ray_run.engine_start_key)
    with ray_run.ray_session(cfgs["laminar"]) as dirs, ExitStack() as stack:
        for rep in range(args.repeats):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                where = out / name / f"rep{rep}" if out and name in ("laminar", "sync") else None
                key = ray_run.engine_start_key(cfgs[name])
                res, engines[key] = run_job(cfgs[name], dirs, stack, engines.get(key),
                                            f"{name}-{rep}", where)  # fmt: skip
                runs[name].append(res)
                print(json.dumps({"repeat": rep, "run": name, **res}), flush=True)
    report = {
        "laminar_over_sync_train_tokens": ratio(
            runs["laminar"], runs["sync"], "train_tokens_per_s"
        ),
        "laminar_over_sync_steps": ratio(runs["laminar"], runs["sync"], "steps_per_s"),
    }
    if not args.skip_repack:
        report["repack_on_over_off_gen_tokens"] = ratio(
            runs["repack_on"], runs["repack_off"], "gen_tokens_per_s"
        )
    print("\nratio                                  per repeat              median")
    for key, values in report.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{key:38s} {shown:22s}  {statistics.median(values):.2f}x")
    simulated: dict = {}
    if out is not None:
        cost = Path(args.cost).resolve() if args.cost else None
        rows = simulated_rows(out, ["laminar", "sync"], cost)
        simulated, text = sim_table(rows)
        simulated["runs"] = rows
        simulated["cost_file"] = str(cost or out / "cost.json")
        where = f"cost file {cost}" if cost else f"calibrated on these runs: {out / 'cost.json'}"
        print(f"\nmeasured vs simulated ({where}; steps after the first)")
        print(text)
        (out / "simulated.json").write_text(json.dumps(simulated, indent=2) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            doc = {"runs": runs, "ratios": report, "args": vars(args)}
            if simulated:
                doc["simulated"] = simulated
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
