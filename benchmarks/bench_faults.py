"""Detection and recovery time per fault kind on the real runtime, and a throughput timeline
around a killed machine (the paper's Fig. 15).

Usage::

    PYTHONPATH=. python benchmarks/bench_faults.py --out runs/bench-faults [--steps 10]
        [--machines 3 [--machine-at STEP]] [--skip-one-host] [--set KEY=VALUE ...]

1. One host: a ``laminar train`` run (tiny-cpu, small batches) with ``kill-engine``,
   ``kill-trainer`` and ``kill-rollout`` injected at different steps.
2. ``--machines N`` (N >= 3): an emulated cluster of N Ray nodes on this host
   (``laminar.runtime.cluster.emulate``), relay tier on, one rollout per machine but the
   trainer's, with
   ``kill-relay@2`` and then ``kill-machine`` (at ``--machine-at``, default half the steps)
   injected; ``laminar plot`` draws ``faults.png``, the throughput timeline around them.

Prints one JSON line per fault and a markdown table of detection, recovery and replacement
seconds per kind (record them in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from laminar.cli import main as laminar

SMALL = [
    "workload.prompts_per_step=4",
    "workload.samples_per_prompt=4",
    "runtime.max_batch=16",
    "runtime.checkpoint_every=1",
    "runtime.eval_prompts=8",
]


def _train(out: Path, steps: int, faults: list[str], sets: list[str]) -> dict:
    args = ["train", "--steps", str(steps), "--out", str(out), "--no-progress"]
    for f in faults:
        args += ["--fault", f]
    for kv in [*SMALL, *sets]:
        args += ["--set", kv]
    rc = laminar(args)
    if rc != 0:
        raise SystemExit(f"laminar train failed ({rc}): {' '.join(args)}")
    return json.loads((out / "summary.json").read_text())


def one_host(out: Path, steps: int, sets: list[str]) -> list[dict]:
    faults = ["kill-engine@1", "kill-trainer@3", f"kill-rollout@{min(5, steps - 2)}"]
    summary = _train(out / "one-host", steps, faults, sets)
    _check(summary)
    return summary["faults"]


def machines(out: Path, steps: int, n: int, sets: list[str], at: int = 0) -> list[dict]:
    from laminar.runtime.cluster.emulate import EmulatedCluster
    from laminar.runtime.faults.machines import register, unregister

    emu = EmulatedCluster(machines=n, gpus_per_machine=0, cpus_per_machine=2).start()
    register(emu)
    try:
        run = out / "machines"
        extra = [f"runtime.address={emu.address}", "relay.enabled=true"]
        extra += [f"runtime.rollouts={n - 1}"]
        faults = ["kill-relay@2", f"kill-machine@{at or steps // 2}"]
        summary = _train(run, steps, faults, [*extra, *sets])
    finally:
        unregister(emu)
        emu.shutdown()
    _check(summary)
    laminar(["plot", str(run)])
    return summary["faults"]


def _check(summary: dict) -> None:
    bad = {k: summary[k] for k in ("trajectories_lost", "trajectories_duplicated") if summary[k]}
    if bad:
        raise SystemExit(f"the ledger does not balance: {bad}")


def table(faults: list[dict]) -> str:
    lines = [
        "| fault | target | detection (s) | recovery (s) | replacement serving (s) |",
        "|---|---|---|---|---|",
    ]
    for f in faults:
        if "skipped" in f:
            lines.append(f"| {f['kind']} | skipped: {f['skipped']} | | | |")
            continue
        cells = [_num(f.get(k)) for k in ("detection_s", "recovery_s", "replaced_s")]
        lines.append(f"| {f['kind']} | {f.get('target', '')} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _num(x) -> str:
    return "" if x is None else f"{float(x):.2f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench-faults")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--machines", type=int, default=0, help="emulated machines (>= 3), 0: skip")
    p.add_argument("--machine-at", type=int, default=0, help="kill-machine's step (0: half)")
    p.add_argument("--skip-one-host", action="store_true")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    out = Path(args.out)
    faults = [] if args.skip_one_host else one_host(out, args.steps, args.sets)
    if args.machines:
        faults += machines(out, args.steps, args.machines, args.sets, args.machine_at)
    for f in faults:
        print(json.dumps(f, default=str))
    print(table(faults))
    return 0


if __name__ == "__main__":
    sys.exit(main())
