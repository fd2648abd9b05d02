"""One ``laminar train`` run: launch the actors (Ray local or ``runtime.address``), run the
loop of the chosen mode (``laminar.runtime.loops``), evaluate, collect, and tear everything down
whatever happens (engines stopped, a dead rollout's leftovers reaped, Ray shut down).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime import cluster, loops
from laminar.runtime.engine import EngineSpec
from laminar.runtime.manager import RolloutManager
from laminar.runtime.placement import place
from laminar.runtime.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.relay.tier import weight_path_for
from laminar.runtime.train.group import in_bundle, placement_group_for
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
    procs: dict[str, dict] = field(default_factory=dict)
    """Per rollout: the engine processes and /dev/shm files it created (cleanup if it dies)."""
    dead: set[str] = field(default_factory=set)
    weights: Any = None
    """The weight path (publisher and source), for a restarted trainer."""
    new_trainer: Callable[[], Any] | None = None
    checkpoint_path: str = ""

    def live(self) -> dict[str, Any]:
        """Rollouts not known to be dead."""
        return {rid: h for rid, h in self.rollouts.items() if rid not in self.dead}


def launch(
    cfg: LaminarConfig,
    dirs: cluster.RunDirs,
    t0_s: float,
    stack: ExitStack,
    rollouts: dict[str, Any] | None = None,
    job: str = "job",
) -> Actors:
    """Create a job's actors (trainer, pools, manager), warm the model up and attach rollouts.

    ``rollouts=None`` creates and starts the engines too, concurrently with the warm-up; a
    benchmark passes the engines of a previous job instead (``job`` names its scratch
    directory). Teardown steps go on ``stack`` as soon as there is something to tear down, so a
    run that fails half-way still stops its engines (their processes and shared memory).
    """
    import ray

    rt, wl = cfg.runtime, cfg.workload
    job_dir = dirs.shm / job
    buffer = cluster.actor(ExperienceBuffer).remote(wl.samples_per_prompt, t0_s)
    partial = cluster.actor(PartialResponsePool).remote()

    # the trainer ranks' devices (one bundle each), kept for a restarted trainer
    pg = placement_group_for(cfg)
    stack.callback(_remove_placement_group, pg)

    def new_trainer() -> Any:
        return cluster.actor(Trainer, **in_bundle(pg, 0)).remote(
            cfg.model_dump(mode="json"), str(job_dir), buffer, pg
        )

    trainer = new_trainer()
    info = ray.get(trainer.setup.remote())
    # The weight path (§4): relay workers when relay.enabled, else one /dev/shm store.
    store, close_weights = weight_path_for(cfg, job_dir, info["config_json"])
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
    started = []
    if rollouts is None:
        rollouts = {f"r{i}": _rollout(cfg, dirs, info, i) for i in range(rt.rollouts)}
        stack.callback(shutdown_engines, rollouts)  # a dead one is skipped after its timeout
        started = [r.start.remote() for r in rollouts.values()]
    placement = place(rt)
    ray.get(
        [
            r.attach.remote(store, pools, t0_s, placement.rollout_cpus[i])
            for i, r in enumerate(rollouts.values())
        ]
    )
    info.update(ray.get(trainer.warmup.remote(store)))  # overlaps the engines' start-up
    footprints = ray.get(started)
    info["engine_start_s"] = [f["start_s"] for f in footprints]
    info["engine_shm_files"] = sorted({path for f in footprints for path in f["shm"]})
    if not cfg.relay.enabled:
        _check_one_machine(trainer, rollouts)
    manager = cluster.actor(RolloutManager).remote(
        rollouts,
        partial,
        interval_s=cfg.repack.interval_s,
        repack_enabled=cfg.repack.enabled and rt.mode == "laminar",
        t0_s=t0_s,
    )
    a = Actors(trainer, prompts, partial, buffer, rollouts, manager, info)
    a.procs = dict(zip(rollouts, footprints, strict=False))
    a.weights, a.new_trainer = store, new_trainer
    a.checkpoint_path = str(dirs.tmp / f"{job}-checkpoints")  # a root: one dir per version
    return a


def _remove_placement_group(pg: Any) -> None:
    import contextlib

    import ray

    with contextlib.suppress(Exception):
        ray.util.remove_placement_group(pg)


def end_job(a: Actors) -> None:
    """Free a finished job's own actors; its rollouts (engines) stay for the next job."""
    import ray

    for handle in (a.trainer, a.prompts, a.partial, a.buffer, a.manager):
        ray.kill(handle)


def _rollout(cfg: LaminarConfig, dirs: cluster.RunDirs, info: dict, index: int) -> Any:
    rt, wl = cfg.runtime, cfg.workload
    options = cluster.rollout_options(cfg, index, dirs)
    return cluster.actor(cluster.RolloutActor, **options).remote(
        f"r{index}",
        _engine_spec(cfg, info, index),
        cpus=place(rt).rollout_cpus[index],
        nice=rt.rollout_nice if rt.device == "cpu" else 0,
        task=rt.task,
        seed=cfg.seed,
        max_response_len=wl.max_response_len,
        max_batch=rt.max_batch,
        samples_per_prompt=wl.samples_per_prompt,
        model_type=rt.model.type,
        model_dir=info["model_dir"],
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
        stop_token_ids=tuple(info.get("stop_ids", ())),
        temperature=rt.grpo.temperature,
        seed=cfg.seed + index,
        dtype=info.get("dtype", "float32"),  # what the trainer exports each version in
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


def check_inputs(cfg: LaminarConfig) -> None:
    """A bad model directory or task file fails here, before Ray starts, naming the file (and
    line): ``ModelDirError`` / ``TaskFileError``, exit code 2."""
    rt = cfg.runtime
    if rt.model.type == "pretrained":
        from laminar.runtime.pretrained import check_model_dir

        check_model_dir(rt.model.path)
    if rt.task.type == "jsonl":
        from laminar.runtime.jsonl_task import load_rows

        load_rows(rt.task.path)


def train(
    cfg: LaminarConfig,
    *,
    on_step: StepCallback,
    verbose: bool = False,
    model_out: str | None = None,
) -> dict:
    """Run ``cfg`` end to end; return the raw results (``laminar.runtime.outputs`` writes them).

    ``model_out``: a directory to save the final policy into (Hugging Face format).
    """
    import ray

    check_inputs(cfg)
    t0 = time.time()
    with cluster.ray_session(cfg, verbose=verbose) as dirs, ExitStack() as stack:
        actors = launch(cfg, dirs, t0, stack)
        first = loops.evaluate(actors, cfg)
        setup_s = time.time() - t0
        loop_t = time.perf_counter()
        stack.callback(loops.reap_dead, actors)
        if cfg.runtime.mode == "laminar":
            steps = loops.run_laminar(actors, cfg, on_step)
        else:
            steps = loops.run_sync(actors, cfg, on_step)
        wall_s = time.perf_counter() - loop_t
        last = loops.evaluate(actors, cfg)
        result = loops.collect(actors)
        if model_out is not None:
            ray.get(actors.trainer.save_model.remote(model_out))
    result.update(steps=steps, wall_s=wall_s, setup_s=setup_s, info=actors.info, run_id=dirs.run_id)
    result.update(eval_first=first, eval_last=last)
    return result
