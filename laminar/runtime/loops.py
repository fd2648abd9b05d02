"""The two training loops over launched actors, the held-out evaluation, and collection.

- **laminar** (paper §3.2): rollouts run on their own — admit prompt groups, stream tokens,
  drain and pull the newest weights when one is published; the rollout manager repacks long
  tails (§5) and recovers failed rollouts (§3.3); the trainer consumes whole groups as they
  finish and publishes a version per step.
- **sync** (verl-like): every step, all rollouts load the newest weights, generate one global
  batch to the last token, then the trainer trains on it.

``runtime.kill_rollout_at_step`` and ``runtime.kill_trainer_at_step`` inject failures (the
last rollout, or the trainer, is killed right after that trainer step) to exercise recovery
(§3.3) on a real run.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from laminar.config import LaminarConfig

StepCallback = Callable[[dict], None]


def _inject_fault(a: Any, cfg: LaminarConfig, step: int) -> None:
    """Kill the last rollout after ``kill_rollout_at_step`` (like its machine failing)."""
    import ray

    if step != cfg.runtime.kill_rollout_at_step or len(a.live()) < 2:
        return
    victim = list(a.live())[-1]
    ray.kill(a.rollouts[victim], no_restart=True)
    a.dead.add(victim)
    a.info.setdefault("faults", []).append(
        {"step": step, "killed": victim, "at_unix_s": time.time()}
    )


def _after_step(a: Any, cfg: LaminarConfig, step: int) -> None:
    """Checkpoint the trainer when due; inject the configured failures."""
    import ray

    rt = cfg.runtime
    if rt.checkpoint_every and (step + 1) % rt.checkpoint_every == 0:
        ray.get(a.trainer.save_checkpoint.remote(a.checkpoint_path))
    _inject_fault(a, cfg, step)
    if step == rt.kill_trainer_at_step:
        restart_trainer(a, step)


def restart_trainer(a: Any, step: int) -> int:
    """Kill the trainer and start a new one from the last checkpoint (§3.3); the rollouts keep
    generating meanwhile. Updates after that checkpoint are lost; the run goes on."""
    import ray

    t = time.perf_counter()
    ray.kill(a.trainer, no_restart=True)
    a.trainer = a.new_trainer()
    ray.get(a.trainer.setup.remote())
    version = ray.get(a.trainer.resume.remote(a.weights, a.checkpoint_path))
    a.info.setdefault("faults", []).append(
        {
            "step": step,
            "killed": "trainer",
            "resumed_version": version,
            "recovery_s": time.perf_counter() - t,
        }
    )
    return version


def _step(a: Any, cfg: LaminarConfig, step: int) -> dict:
    import ray

    try:
        return ray.get(a.trainer.step.remote(step), timeout=cfg.runtime.step_timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise RuntimeError(
            f"trainer step {step} took over runtime.step_timeout_s={cfg.runtime.step_timeout_s}s "
            "(no complete groups arrived: are the rollouts alive?)"
        ) from None


def run_laminar(a: Any, cfg: LaminarConfig, on_step: StepCallback) -> list[dict]:
    """Trajectory-level asynchrony: rollouts and manager run free; the trainer paces the run."""

    loops = {rid: r.run_laminar.remote() for rid, r in a.rollouts.items()}
    manager_loop = a.manager.run.remote()
    rows = []
    try:
        for step in range(cfg.workload.steps):
            m = _step(a, cfg, step)
            a.prompts.advance.remote(step + 1)
            on_step(m)
            rows.append(m)
            _after_step(a, cfg, step)
    finally:
        _stop(a, manager_loop)
        _wait_live(a, loops)
    return rows


def run_sync(a: Any, cfg: LaminarConfig, on_step: StepCallback) -> list[dict]:
    """verl-like: load weights everywhere, generate the whole batch, then train."""
    import ray

    manager_loop = a.manager.run.remote()  # repack off: it records KV use, recovers failures
    rows = []
    try:
        for step in range(cfg.workload.steps):
            t = time.perf_counter()
            workers = list(a.live().values())
            ray.get([w.load_latest.remote() for w in workers])
            groups = ray.get(a.prompts.take.remote(cfg.workload.prompts_per_step))
            refs = [w.run_groups.remote(groups[i :: len(workers)]) for i, w in enumerate(workers)]
            ray.wait(refs, num_returns=len(refs))  # a failed rollout's share is recovered
            m = _step(a, cfg, step)  # waits for every group of the batch
            m["gen_s"] = time.perf_counter() - t - m["train_s"] - m["publish_s"]
            on_step(m)
            rows.append(m)
            _after_step(a, cfg, step)
    finally:
        _stop(a, manager_loop)
    return rows


def _stop(a: Any, manager_loop: Any) -> None:
    import ray

    ray.get(a.manager.stop.remote())
    ray.get(manager_loop)
    a.dead.update(ray.get(a.manager.report.remote())["dead"])
    _wait_live(a, {rid: r.stop.remote() for rid, r in a.live().items()})


def _wait_live(a: Any, refs: dict[str, Any]) -> None:
    """Wait for each live rollout's call; one that dies meanwhile is marked dead."""
    import ray

    for rid, ref in refs.items():
        if rid in a.dead:
            continue
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError:
            a.dead.add(rid)


def evaluate(a: Any, cfg: LaminarConfig) -> dict:
    """Mean reward on the held-out prompts with the newest weights (every rollout loads them)."""
    import ray

    rt = cfg.runtime
    workers = list(a.live().values())
    versions = ray.get([w.load_latest.remote() for w in workers])
    if rt.eval_prompts == 0:
        return {"reward": math.nan, "version": min(versions), "samples": 0}
    ids = list(range(rt.eval_prompts))
    parts = [
        w.evaluate.remote(ids[i :: len(workers)], rt.eval_samples) for i, w in enumerate(workers)
    ]
    rewards = [r for part in ray.get(parts) for r in part]
    return {"reward": statistics.fmean(rewards), "version": min(versions), "samples": len(rewards)}


def collect(a: Any) -> dict:
    """Everything the run directory needs, read from the actors after the loop stopped."""
    import ray

    from laminar.runtime import cluster

    live = a.live()
    out = {
        "ledger": ray.get(a.buffer.ledger.remote()),
        "pending": ray.get(a.partial.pending.remote()),
        "issued_groups": ray.get(a.prompts.issued_groups.remote()),
        "rollout_stats": ray.get([r.stats.remote() for r in live.values()]),
        "manager": ray.get(a.manager.report.remote()),
        "dead_rollouts": sorted(a.dead),
    }
    handles = {"trainer": a.trainer, **live}
    out["peak_rss_bytes"] = {name: cluster.peak_rss_bytes(h) for name, h in handles.items()}
    return out


def reap_dead(a: Any) -> None:
    """Remove what a dead rollout's engine left on this machine: its processes (ours: the
    engine it started) and the shared-memory files they mapped, which no one unlinks now."""
    import psutil

    for rid in sorted(a.dead):
        footprint = a.procs.get(rid, {})
        for pid, created in footprint.get("pids", []):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created:  # the very process the engine started
                    proc.kill()
        for path in footprint.get("shm", []):
            with contextlib.suppress(OSError):
                os.unlink(path)
