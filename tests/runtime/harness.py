"""A whole laminar-mode runtime in one event loop: real pools, rollouts and manager, fake engines.

Everything but vLLM and Ray is the production code, so the ledger, repack and migration logic
is tested in a second instead of minutes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from laminar.config.runtime import RepeatTask
from laminar.runtime.data.manager import RolloutManager
from laminar.runtime.data.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.rollout.worker import RolloutWorker
from laminar.runtime.weights import ShmWeightStore
from tests.runtime.fakes import FakeEngine, LocalHandle

MAX_RESPONSE_LEN = 64


@dataclass
class System:
    store: ShmWeightStore
    prompts: PromptPool
    partial: PartialResponsePool
    buffer: ExperienceBuffer
    workers: dict[str, RolloutWorker]
    manager: RolloutManager
    prompts_per_step: int
    pools: dict
    t0_s: float
    consumed: list = field(default_factory=list)


def build(
    tmp_path,
    *,
    workers=2,
    max_batch=16,
    n=4,
    prompts_per_step=4,
    step_s=0.001,
    repack=True,
    interval_s=0.01,
) -> System:
    task = RepeatTask(median_len=6, tail_ratio=10)
    t0 = time.time()
    store = ShmWeightStore(tmp_path / "weights", "{}")
    prompts = PromptPool(
        task,
        seed=0,
        max_answer_len=MAX_RESPONSE_LEN - 1,
        samples_per_prompt=n,
        prompts_per_step=prompts_per_step,
        prefetch_steps=1.0,
        model_type="tiny",
        model_dir="",
    )
    partial, buffer = PartialResponsePool(), ExperienceBuffer(n, t0)
    pools = {
        "prompts": LocalHandle(prompts),
        "partial": LocalHandle(partial),
        "buffer": LocalHandle(buffer),
    }
    ws = {
        f"r{i}": RolloutWorker(
            f"r{i}",
            FakeEngine(step_s),
            task=task,
            seed=0,
            max_response_len=MAX_RESPONSE_LEN,
            max_batch=max_batch,
            samples_per_prompt=n,
            model_type="tiny",
            model_dir="",
            flush_interval_s=0.01,
        )
        for i in range(workers)
    }
    manager = RolloutManager(
        {k: LocalHandle(w) for k, w in ws.items()},
        LocalHandle(partial),
        interval_s=interval_s,
        repack_enabled=repack,
        t0_s=t0,
        buffer=pools["buffer"],
        prompts=pools["prompts"],
    )
    return System(store, prompts, partial, buffer, ws, manager, prompts_per_step, pools, t0)


async def boot(s: System, *, load: bool = True) -> None:
    """Publish version 0, start every engine, attach the workers to the job (and load v0)."""
    s.store.publish(0, b"weights 0")
    for w in s.workers.values():
        await w.start()
        await w.attach(s.store, s.pools, s.t0_s)
        if load:
            await w.load_latest()


async def trainer(s: System, steps: int) -> None:
    """Consume whole groups step by step and publish a version per step, like the Trainer."""
    for step in range(steps):
        groups = await s.buffer.take(s.prompts_per_step, step, step)
        s.consumed.extend(t for g in groups for t in g)
        s.store.publish(step + 1, f"weights {step + 1}".encode())
        s.prompts.advance(step + 1)


async def run_laminar(s: System, steps: int) -> None:
    """Start every worker, run ``steps`` trainer steps in laminar mode, then stop everything."""
    await boot(s, load=False)
    loops = [asyncio.create_task(w.run_laminar(poll_s=0.002)) for w in s.workers.values()]
    mgr = asyncio.create_task(s.manager.run())
    await asyncio.wait_for(trainer(s, steps), timeout=60)
    await s.manager.stop()
    await mgr
    for w in s.workers.values():
        await w.stop()
    await asyncio.gather(*loops)
