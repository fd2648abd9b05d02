"""Real runs for the fidelity study (``benchmarks/fidelity.py``): run directories, side by side.

Every setting of ``SETTINGS`` runs ``--repeats`` times in one Ray session on shared engines
(started once for the settings whose engines start alike, ``ray_run.engine_start_key``: a sync
job's on CPU spin less; a 1-rollout job uses the first one), in an order that alternates between
repeats (ABC..CBA..) so drifting load from other work on a shared machine hits every setting
alike. Each run writes a full ``laminar train`` run directory (``profile/`` included) to
``OUT/<setting>/rep<k>``. Run it under the machine's heavy-work lock::

    for k in 0 1 2; do  # one repeat per lock hold: a few minutes each
        flock /tmp/laminar-heavy.lock python benchmarks/fidelity_runs.py --out runs/fidelity \
            --repeats 1 --first-repeat $k
    done
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from laminar.config import load_config
from laminar.rundir import staged_dir
from laminar.runtime.profiling.speedprobe import SpeedProbe
from laminar.runtime.run import driver, loops, ray_run
from laminar.runtime.run.outputs import write_run_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import SETTINGS


def _job_settings(cfg):
    """What a rollout fixes at construction that a job may change: the task (its prompts and
    rewards), the response budget, the group size and B (within the engine's own bounds)."""
    rt, w = cfg.runtime, cfg.workload

    def apply(worker) -> None:
        from laminar.runtime.tasks.make import make_task

        worker.gen = make_task(rt.task, seed=cfg.seed, max_answer_len=w.max_response_len - 1)
        worker.max_response_len = w.max_response_len
        worker.samples_per_prompt = w.samples_per_prompt
        worker.max_batch = rt.max_batch

    return apply


def run_one(cfg, dirs, stack: ExitStack, engines: dict | None, job: str, out: Path) -> dict:
    """One job on the shared engines (started on first use); writes its run directory."""
    t0 = time.time()
    probe = SpeedProbe(cfg.runtime.speed_probe_s, dirs.tmp,  # start-up overlaps launch
                       cores=cfg.runtime.device == "cpu").start()
    picked = None if engines is None else dict(list(engines.items())[: cfg.runtime.rollouts])
    a = driver.launch(cfg, dirs, t0, stack, rollouts=picked, job=job)
    if picked is not None:  # shared engines were built for another job: give them this one's
        import ray

        ray.get([r.__ray_call__.remote(_job_settings(cfg)) for r in a.rollouts.values()])
    setup_s = time.time() - t0
    loop = loops.run_laminar if cfg.runtime.mode == "laminar" else loops.run_sync
    t = time.perf_counter()
    steps = loop(a, cfg, lambda m: None)
    wall_s = time.perf_counter() - t
    speed = probe.stop(t0)
    result = loops.collect(a)
    result.update(speed_probe=speed, core_cpu=probe.cores)
    nan = {"reward": float("nan"), "version": -1}
    result.update(steps=steps, wall_s=wall_s, setup_s=setup_s, info=a.info, run_id=job)
    result.update(eval_first=nan, eval_last=nan)
    with staged_dir(out) as stage:
        summary = write_run_dir(cfg, result, stage)
        # How the harness ran the job (the niceness its processes inherited: --nice).
        (stage / "harness.json").write_text(json.dumps({"niceness": os.nice(0)}) + "\n")
    driver.end_job(a)
    return {"engines": a.rollouts, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the run directories")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--first-repeat", type=int, default=0,
                   help="number of the first repeat (to run repeats in separate sessions)")
    p.add_argument("--only", nargs="*", help="settings to run (default: all)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="config override applied to every setting (repeatable)")
    p.add_argument("--nice", type=int, default=0,
                   help="niceness increment for the run (and every process it starts); a "
                        "negative one (root only) measures the job with other users' work on "
                        "the machine yielding to it")
    args = p.parse_args(argv)
    if args.nice:
        try:
            os.nice(args.nice)
        except PermissionError:
            p.error(f"--nice {args.nice}: not permitted (a negative niceness needs root)")
    names = args.only or list(SETTINGS)
    common = [f"workload.steps={args.steps}", "runtime.eval_prompts=0", *args.sets]
    cfgs = {n: load_config(preset="tiny-cpu", overrides=[*common, *SETTINGS[n]]) for n in names}
    most = max(cfgs.values(), key=lambda c: c.runtime.rollouts)
    out = Path(args.out)
    key = {n: ray_run.engine_start_key(c) for n, c in cfgs.items()}
    engines: dict[tuple, dict] = {}
    with ray_run.ray_session(most) as dirs, ExitStack() as stack:
        for i, k in enumerate(dict.fromkeys(key.values())):
            # start each set of engines once, with the widest of its settings
            alike = [c for n, c in cfgs.items() if key[n] == k]
            widest = max(alike, key=lambda c: c.runtime.rollouts)
            # ... and room for the longest prompt + response of any setting (max_model_len)
            longest = {f: max(getattr(c.workload, f) for c in alike)
                       for f in ("max_prompt_len", "max_response_len")}  # fmt: skip
            two = widest.workload.model_copy(update={"steps": 2, **longest})
            short = widest.model_copy(update={"workload": two})
            where = out / ("_start" if i == 0 else f"_start{i}")
            engines[k] = run_one(short, dirs, stack, None, f"start{i}", where)["engines"]
        for rep in range(args.first_repeat, args.first_repeat + args.repeats):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                res = run_one(cfgs[name], dirs, stack, engines[key[name]], f"{name}-{rep}",
                              out / name / f"rep{rep}")  # fmt: skip
                s = res["summary"]
                row = {"setting": name, "repeat": rep, "wall_s": s["wall_s"]}
                row.update(train_tokens_per_s=s["train_tokens_per_s"], steps=s["steps"])
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
