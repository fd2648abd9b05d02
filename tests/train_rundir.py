"""``laminar train`` run directories for tests, without Ray or vLLM, in about a second.

The runtime's real pools, rollouts and manager run on fake engines (``tests/runtime/harness``),
in laminar or sync mode, optionally with a rollout crashing mid-run (the manager recovers its
trajectories); a stand-in trainer takes each batch from the experience buffer and publishes a
version, like ``Trainer.step``, and reports a row with exactly ``Trainer.step``'s keys (read
from its source). The real writer, ``laminar.runtime.run.outputs.write_run_dir``, writes the
directory.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import math
import statistics
import time
from pathlib import Path

from laminar.config import load_config
from laminar.rundir import staged_dir
from laminar.runtime.run.outputs import write_run_dir
from tests.runtime import harness


def trainer_step_keys() -> list[str]:
    """The keys of the row ``Trainer.step`` returns (the columns of steps.csv it writes, besides
    the loss metrics), read from its source: ``metrics[...] =`` and ``metrics.update(...)``."""
    source = Path(importlib.util.find_spec("laminar.runtime.train.trainer").origin).read_text()
    cls = next(n for n in ast.parse(source).body if getattr(n, "name", "") == "Trainer")
    step = next(n for n in cls.body if getattr(n, "name", "") == "step")
    keys = []
    for node in ast.walk(step):
        target = node.value if isinstance(node, ast.Subscript) else None
        if target is not None and isinstance(node.ctx, ast.Store) and _is_metrics(target):
            keys.append(node.slice.value)
        call = node.func if isinstance(node, ast.Call) else None
        if call is not None and getattr(call, "attr", "") == "update" and _is_metrics(call.value):
            keys.extend(k.arg for k in node.keywords)
    return keys


def _is_metrics(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "metrics"


async def _train_step(s: harness.System, step: int) -> dict:
    t0 = time.perf_counter()
    groups = await s.buffer.take(s.prompts_per_step, step, step)
    t1 = time.perf_counter()
    s.store.publish(step + 1, f"weights {step + 1}".encode())
    s.prompts.advance(step + 1)
    t2 = time.perf_counter()
    trajs = [t for g in groups for t in g]
    stale = [step - t.version for t in trajs]
    values = {
        "step": step,
        "version": step + 1,
        "wait_s": t1 - t0,
        "train_s": 0.0,  # no model here
        "publish_s": t2 - t1,
        "trajectories": len(trajs),
        "reward_mean": statistics.fmean(t.reward for t in trajs),
        "response_len_mean": statistics.fmean(len(t.tokens) for t in trajs),
        "tokens": sum(len(t.prompt_ids) + len(t.tokens) for t in trajs),
        "response_tokens": sum(len(t.tokens) for t in trajs),
        "staleness_mean": statistics.fmean(stale),
        "staleness_max": max(stale),
    }
    return {k: values.get(k, 0.0) for k in trainer_step_keys()}


class _Dead:
    """A rollout handle whose actor died: every call fails (what Ray answers)."""

    def __getattr__(self, name):
        class _Method:
            @staticmethod
            def remote(*args, **kwargs):
                async def fail():
                    raise ConnectionError("actor died")

                return fail()

        return _Method


def _crash(s: harness.System, rid: str, loop: asyncio.Task) -> None:
    """A machine failure: the replica's loops and generations stop without a word."""
    w = s.workers.pop(rid)
    loop.cancel()
    if w.streamer.loop_task:
        w.streamer.loop_task.cancel()
    for task in list(w.tasks.values()):
        task.cancel()
    s.manager.rollouts[rid] = _Dead()


async def _laminar(s: harness.System, steps: int, crash_at_step: int):
    loops = {rid: asyncio.create_task(w.run_laminar(poll_s=0.002)) for rid, w in s.workers.items()}
    rows = []
    for step in range(steps):
        rows.append(await asyncio.wait_for(_train_step(s, step), timeout=60))
        if step == crash_at_step:
            _crash(s, "r1", loops.pop("r1"))
    return rows, list(loops.values())


async def _sync(s: harness.System, steps: int) -> list[dict]:
    rows = []
    for step in range(steps):
        workers = list(s.workers.values())
        for w in workers:
            await w.load_latest()
        groups = s.prompts.take(s.prompts_per_step)
        shares = [groups[i :: len(workers)] for i in range(len(workers))]
        await asyncio.gather(*(w.run_groups(g) for w, g in zip(workers, shares, strict=True)))
        rows.append(await asyncio.wait_for(_train_step(s, step), timeout=60))
    return rows


async def run(s: harness.System, mode: str, steps: int, crash_at_step: int) -> dict:
    """Run ``steps`` trainer steps; return the raw results ``laminar.runtime.run.driver.train``
    would (what ``write_run_dir`` reads)."""
    await harness.boot(s, load=mode == "sync")
    setup_s = time.time() - s.t0_s
    manager = asyncio.create_task(s.manager.run())
    loop_t = time.perf_counter()
    loops = []
    if mode == "laminar":
        rows, loops = await _laminar(s, steps, crash_at_step)
    else:
        rows = await _sync(s, steps)
    wall_s = time.perf_counter() - loop_t
    await s.manager.stop()
    await manager
    for w in s.workers.values():
        await w.stop()
    await asyncio.gather(*loops)
    return {
        "steps": rows,
        "wall_s": wall_s,
        "setup_s": setup_s,
        "ledger": await s.buffer.ledger(),
        "pending": s.partial.pending(),
        "issued_groups": s.prompts.issued_groups(),
        "rollout_stats": [await w.stats() for w in s.workers.values()],
        "manager": await s.manager.report(),
        "dead_rollouts": sorted(s.manager.dead),
        "peak_rss_bytes": {},
        "info": {},
        "run_id": f"test-{mode}",
        "eval_first": {"reward": math.nan, "version": 0},
        "eval_last": {"reward": math.nan, "version": steps},
    }


def write_train_run(
    tmp_path: Path, name: str, *, mode: str = "laminar", steps: int = 5, crash_at_step: int = -1
) -> Path:
    """A ``laminar train`` run directory ``tmp_path/name`` of a ``mode`` run of ``steps`` steps;
    rollout r1 dies after step ``crash_at_step`` (laminar mode; -1: never)."""
    n, prompts_per_step = 4, 3
    s = harness.build(
        tmp_path / f".{name}-system", n=n, prompts_per_step=prompts_per_step, max_batch=12,
        repack=mode == "laminar",
    )  # fmt: skip
    result = asyncio.run(run(s, mode, steps, crash_at_step))
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.mode={mode}",
            f"workload.steps={steps}",
            f"workload.samples_per_prompt={n}",
            f"workload.prompts_per_step={prompts_per_step}",
        ],
    )
    out = tmp_path / name
    with staged_dir(out) as stage:
        write_run_dir(cfg, result, stage)
    return out
