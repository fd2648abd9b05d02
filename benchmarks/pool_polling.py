"""CPU a laminar rollout's control loop costs while the prompt budget is spent, before and after
``laminar/runtime/rollout/asking.py``.

Usage::

    flock /tmp/laminar-heavy.lock python benchmarks/pool_polling.py [--seconds 5]

A real ``PromptPool`` actor whose budget is spent (the state between two trainer steps once
the rollouts are a step ahead) and a poller actor that runs the rollout loop's per-poll work
every 10 ms — a directory listing in a thread (the weight-store lookup) and, when it may ask,
the pool's ``take`` — either asking every poll (the loop before) or gated by ``AskAgain`` (the
loop now). Prints the CPU share of a core each process used, side by side in one Ray session.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

POLL_S = 0.01


class Poller:
    def __init__(self, pool):
        self.pool = pool

    def pid(self) -> int:
        return os.getpid()

    async def run(self, seconds: float, gated: bool) -> dict:
        from laminar.runtime.rollout.asking import AskAgain
        from laminar.runtime.rollout.worker import ASK_AGAIN_MAX_POLLS

        asking = AskAgain(POLL_S, ASK_AGAIN_MAX_POLLS * POLL_S)
        store = tempfile.mkdtemp()
        polls = takes = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.to_thread(os.listdir, store)
            if not gated or asking.may_ask(time.monotonic(), 0):
                got = await self.pool.take.remote(4, "r0", 128)
                asking.answered(time.monotonic(), len(got))
                takes += 1
            polls += 1
            await asyncio.sleep(POLL_S)
        return {"polls": polls, "takes": takes}


def _cpu_s(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args(argv)
    import ray

    from laminar.config import load_config
    from laminar.runtime.data.pools import PromptPool
    from laminar.runtime.run import ray_run

    rt = load_config(preset="tiny-cpu").runtime
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        pool = ray_run.actor(PromptPool).remote(
            rt.task, seed=0, max_answer_len=64, samples_per_prompt=8, prompts_per_step=1,
            prefetch_steps=0.0, model_type="tiny", model_dir="",
        )  # fmt: skip
        assert len(ray.get(pool.take.remote(1, "other", 128))) == 1  # the budget is now spent
        poller = ray_run.actor(Poller).remote(pool)
        pids = {"rollout loop": ray.get(poller.pid.remote()),
                "prompt pool": ray.get(pool.__ray_call__.remote(lambda self: os.getpid()))}
        print(f"| loop ({args.seconds:.0f} s, budget spent) | takes / polls "
              "| rollout loop, % of a core | prompt pool, % of a core |")  # fmt: skip
        print("|---|---|---|---|")
        for name, gated in (("ask every poll (before)", False), ("AskAgain (now)", True)):
            before = {k: _cpu_s(pid) for k, pid in pids.items()}
            t = time.monotonic()
            counts = ray.get(poller.run.remote(args.seconds, gated))
            wall = time.monotonic() - t
            use = {k: 100 * (_cpu_s(pid) - before[k]) / wall for k, pid in pids.items()}
            print(f"| {name} | {counts['takes']} / {counts['polls']} "
                  f"| {use['rollout loop']:.1f} | {use['prompt pool']:.1f} |")  # fmt: skip
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
