"""One ``laminar train`` run: launch the actors, run laminar or sync mode, collect the ledger.

The two modes share everything but the loop (so the speedup is measured on the same model,
task and CPUs):

- **laminar** (paper §3.2): rollouts run on their own — admit prompt groups, stream tokens,
  drain and pull the newest weights when one is published; the rollout manager repacks long
  tails (§5); the trainer consumes whole groups as they finish and publishes a version per step.
- **sync** (verl-like): every step, all rollouts load the newest weights, generate one global
  batch to the last token, then the trainer trains on it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime import cluster
from laminar.runtime.engine import EngineSpec
from laminar.runtime.manager import RolloutManager
from laminar.runtime.placement import place
from laminar.runtime.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.relay.tier import weight_path_for
from laminar.runtime.trainer import Trainer

StepCallback = Callable[[dict], None]


@dataclass
class Actors:
    """Handles of one run's actors."""

    trainer: Any
    prompts: Any
    partial: Any
    buffer: Any
    rollouts: dict[str, Any]
    manager: Any
    info: dict = field(default_factory=dict)


def launch(cfg: LaminarConfig, dirs: cluster.RunDirs, t0_s: float, stack: ExitStack) -> Actors:
    """Create every actor, warm the model up and start the engines (concurrently).

    Teardown steps go on ``stack`` as soon as there is something to tear down, so a run that
    fails half-way still stops its engines (their processes and shared memory).
    """
    import ray

    rt, wl = cfg.runtime, cfg.workload
    buffer = cluster.actor(ExperienceBuffer).remote(wl.samples_per_prompt, t0_s)
    partial = cluster.actor(PartialResponsePool).remote()
    trainer = cluster.actor(Trainer, num_gpus=int(rt.device == "cuda")).remote(
        cfg.model_dump(mode="json"), str(dirs.shm), buffer
    )
    info = ray.get(trainer.setup.remote())
    # The weight path (§4): relay workers when relay.enabled, else one /dev/shm store.
    store, close_weights = weight_path_for(cfg, dirs.shm, info["config_json"])
    stack.callback(close_weights)
    prompts = cluster.actor(PromptPool).remote(
        rt.task,
        seed=cfg.seed,
        max_answer_len=wl.max_response_len - 1,
        samples_per_prompt=wl.samples_per_prompt,
        prompts_per_step=wl.prompts_per_step,
        prefetch_steps=rt.prefetch_steps if rt.mode == "laminar" else None,
        model_type=rt.model.type,
        model_dir=info["model_dir"],
    )
    pools = {"prompts": prompts, "partial": partial, "buffer": buffer}
    rollouts = {
        f"r{i}": _rollout(cfg, dirs, info, i, store, pools, t0_s) for i in range(rt.rollouts)
    }
    stack.callback(shutdown_engines, rollouts)
    started = [r.start.remote() for r in rollouts.values()]
    info.update(ray.get(trainer.warmup.remote(store)))  # overlaps the engines' start-up
    info["engine_start_s"] = ray.get(started)
    if not cfg.relay.enabled:
        _check_one_machine(trainer, rollouts)
    manager = cluster.actor(RolloutManager).remote(
        rollouts,
        partial,
        interval_s=cfg.repack.interval_s,
        repack_enabled=cfg.repack.enabled and rt.mode == "laminar",
        t0_s=t0_s,
    )
    return Actors(trainer, prompts, partial, buffer, rollouts, manager, info)


def _rollout(cfg, dirs, info, index, store, pools, t0_s) -> Any:
    rt, wl = cfg.runtime, cfg.workload
    options = cluster.rollout_options(cfg, index, dirs)
    return cluster.actor(cluster.RolloutActor, **options).remote(
        f"r{index}",
        _engine_spec(cfg, info, index),
        cpus=place(rt).rollout_cpus[index],
        weights=store,
        pools=pools,
        task=rt.task,
        seed=cfg.seed,
        max_response_len=wl.max_response_len,
        max_batch=rt.max_batch,
        samples_per_prompt=wl.samples_per_prompt,
        model_type=rt.model.type,
        model_dir=info["model_dir"],
        t0_s=t0_s,
        flush_interval_s=rt.flush_interval_s,
    )


def shutdown_engines(rollouts: dict[str, Any], timeout_s: float = 120.0) -> None:
    """Stop every engine that still answers (vLLM then removes its processes and /dev/shm)."""
    import ray

    refs = [r.shutdown.remote() for r in rollouts.values()]
    ray.wait(refs, num_returns=len(refs), timeout=timeout_s)


def _engine_spec(cfg: LaminarConfig, info: dict, index: int) -> EngineSpec:
    rt, wl = cfg.runtime, cfg.workload
    return EngineSpec(
        model_dir=info["model_dir"],
        device=rt.device,
        max_batch=rt.max_batch,
        max_model_len=wl.max_prompt_len + wl.max_response_len,
        eos_token_id=info["eos_id"],
        temperature=rt.grpo.temperature,
        seed=cfg.seed + index,
        dtype="float32" if rt.model.type == "tiny" else cfg.model.dtype,
        gpu_memory_fraction=rt.gpu_memory_fraction,
    )


def _check_one_machine(trainer: Any, rollouts: dict[str, Any]) -> None:
    """The default weight store is one machine's /dev/shm; other nodes need the relay tier."""
    from laminar.errors import LaminarError

    home = cluster.node_of(trainer)
    away = [rid for rid, h in rollouts.items() if cluster.node_of(h) != home]
    if away:
        raise LaminarError(
            f"rollouts {', '.join(away)} run on another Ray node than the trainer; the default "
            "weight store (/dev/shm) is single-machine — multi-node runs need the relay tier"
        )


def run_laminar(a: Actors, steps: int, on_step: StepCallback) -> list[dict]:
    """Trajectory-level asynchrony: rollouts and manager run free; the trainer paces the run."""
    import ray

    loops = [r.run_laminar.remote() for r in a.rollouts.values()]
    manager_loop = a.manager.run.remote()
    rows = []
    try:
        for step in range(steps):
            m = ray.get(a.trainer.step.remote(step))
            a.prompts.advance.remote(step + 1)
            on_step(m)
            rows.append(m)
    finally:
        ray.get(a.manager.stop.remote())
        ray.get(manager_loop)
        ray.get([r.stop.remote() for r in a.rollouts.values()])
        ray.get(loops)
    return rows


def run_sync(a: Actors, steps: int, prompts_per_step: int, on_step: StepCallback) -> list[dict]:
    """verl-like: load weights everywhere, generate the whole batch, then train."""
    import ray

    manager_loop = a.manager.run.remote()  # repack off: it only records KV use
    workers = list(a.rollouts.values())
    rows = []
    try:
        for step in range(steps):
            t = time.perf_counter()
            ray.get([w.load_latest.remote() for w in workers])
            groups = ray.get(a.prompts.take.remote(prompts_per_step))
            ray.get([w.run_groups.remote(groups[i :: len(workers)]) for i, w in enumerate(workers)])
            gen_s = time.perf_counter() - t
            m = ray.get(a.trainer.step.remote(step))
            m["gen_s"] = gen_s
            on_step(m)
            rows.append(m)
    finally:
        ray.get(a.manager.stop.remote())
        ray.get(manager_loop)
        ray.get([w.stop.remote() for w in workers])
    return rows


def evaluate(a: Actors, cfg: LaminarConfig) -> dict:
    """Mean reward on the held-out prompts with the newest weights (every rollout loads them)."""
    import ray

    rt = cfg.runtime
    workers = list(a.rollouts.values())
    versions = ray.get([w.load_latest.remote() for w in workers])
    if rt.eval_prompts == 0:
        return {"reward": math.nan, "version": min(versions), "samples": 0}
    ids = list(range(rt.eval_prompts))
    parts = [
        w.evaluate.remote(ids[i :: len(workers)], rt.eval_samples) for i, w in enumerate(workers)
    ]
    rewards = [r for part in ray.get(parts) for r in part]
    return {"reward": statistics.fmean(rewards), "version": min(versions), "samples": len(rewards)}


def collect(a: Actors) -> dict:
    """Everything the run directory needs, read from the actors after the loop stopped."""
    import ray

    out = {
        "ledger": ray.get(a.buffer.ledger.remote()),
        "pending": ray.get(a.partial.pending.remote()),
        "issued_groups": ray.get(a.prompts.issued_groups.remote()),
        "rollout_stats": ray.get([r.stats.remote() for r in a.rollouts.values()]),
        "manager": ray.get(a.manager.report.remote()),
    }
    handles = {"trainer": a.trainer, **a.rollouts}
    out["peak_rss_bytes"] = {name: cluster.peak_rss_bytes(h) for name, h in handles.items()}
    return out


def train(cfg: LaminarConfig, *, on_step: StepCallback, verbose: bool = False) -> dict:
    """Run ``cfg`` end to end; return the raw results (``laminar.runtime.outputs`` writes them)."""
    t0 = time.time()
    with cluster.ray_session(cfg, verbose=verbose) as dirs, ExitStack() as stack:
        actors = launch(cfg, dirs, t0, stack)
        first = evaluate(actors, cfg)
        setup_s = time.time() - t0
        loop_t = time.perf_counter()
        wl = cfg.workload
        if cfg.runtime.mode == "laminar":
            steps = run_laminar(actors, wl.steps, on_step)
        else:
            steps = run_sync(actors, wl.steps, wl.prompts_per_step, on_step)
        wall_s = time.perf_counter() - loop_t
        last = evaluate(actors, cfg)
        result = collect(actors)
    result.update(steps=steps, wall_s=wall_s, setup_s=setup_s, info=actors.info, run_id=dirs.run_id)
    result.update(eval_first=first, eval_last=last)
    return result
