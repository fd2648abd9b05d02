"""One ``laminar train`` run: launch the actors (Ray local or ``runtime.address``), run the
loop of the chosen mode (``laminar.runtime.run.loops``), evaluate, collect, and tear everything down
whatever happens (engines stopped, a dead rollout's leftovers reaped, Ray shut down).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime.cluster import nodes, replicas, sessions
from laminar.runtime.data.manager import RolloutManager, step_cost_from_file
from laminar.runtime.data.pools import ExperienceBuffer, PartialResponsePool, PromptPool
from laminar.runtime.faults.machines import machines_for
from laminar.runtime.faults.relays import relay_handles
from laminar.runtime.faults.supervisor import Supervisor
from laminar.runtime.profiling.speedprobe import SpeedProbe
from laminar.runtime.relay.tier import weight_path_for
from laminar.runtime.rollout.engine import EngineSpec
from laminar.runtime.rollout.node import NodeSetup
from laminar.runtime.run import loops, ray_run
from laminar.runtime.run.inputs import check_inputs
from laminar.runtime.run.resume import ResumeState, RunLog, orphans_to_resume
from laminar.runtime.run.storage import Storage
from laminar.runtime.train.group import in_bundle, placement_group_for
from laminar.runtime.train.trainer import Trainer

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
    pools: dict = field(default_factory=dict)
    rollout_cpus: list = field(default_factory=list)
    relays: Any = None
    """The relay workers when the relay tier is on (``laminar.runtime.faults.relays``)."""
    machines: Any = None
    """The emulated machines (Ray nodes) when the run has several."""
    placement: Any = None
    """Where the rollouts run (``laminar.runtime.cluster.replicas.ReplicaPlacement``)."""
    storage: Storage | None = None
    """Where checkpoints and the final model go (``laminar.runtime.run.storage``)."""

    def live(self) -> dict[str, Any]:
        """Rollouts not known to be dead."""
        return {rid: h for rid, h in self.rollouts.items() if rid not in self.dead}

    def join(self, rid: str, handle: Any, index: int, footprint: dict) -> None:
        """A started replacement rollout joins the job (weight path, pools, clock, cores)."""
        import ray

        cpus = self.rollout_cpus[index] if index < len(self.rollout_cpus) else ()
        ray.get(handle.attach.remote(self.weights, self.pools, self.info["t0_s"], cpus))
        self.rollouts[rid] = handle
        self.procs[rid] = footprint
        self.info.setdefault("rollout_node", {})[rid] = nodes.node_of(handle)
        self.info.setdefault("engine_shm_files", []).extend(footprint.get("shm", []))


def launch(
    cfg: LaminarConfig,
    dirs: ray_run.RunDirs,
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
    step_cost = step_cost_from_file(cfg.sim.cost_file)  # §8.4 step bound; read before any start
    job_dir = dirs.node_path(job)  # on each machine its own (laminar.runtime.cluster.nodes)
    here = ray_run.control_plane_options()  # the data tier stays on the driver's machine
    buffer = ray_run.actor(ExperienceBuffer, **here).remote(wl.samples_per_prompt, t0_s)
    partial = ray_run.actor(PartialResponsePool, **here).remote()

    # the trainer ranks' devices (one bundle each), kept for a restarted trainer
    pg = placement_group_for(cfg)
    stack.callback(_remove_placement_group, pg)

    def new_trainer() -> Any:
        return ray_run.actor(Trainer, **in_bundle(pg, 0)).remote(
            cfg.model_dump(mode="json"), job_dir, buffer, pg
        )

    trainer = new_trainer()
    info = ray.get(trainer.setup.remote())
    home = nodes.node_of(trainer)
    # The weight path (§4): relay workers when relay.enabled, else one /dev/shm store on the
    # trainer's machine (the rollouts are then placed there too).
    store_dir = "" if cfg.relay.enabled else nodes.resolve_on(home, job_dir / "weights")
    store, close_weights = weight_path_for(cfg, job_dir, info["config_json"], store_dir=store_dir)
    stack.callback(close_weights)
    info["t0_s"] = t0_s
    prompts = ray_run.actor(PromptPool, **here).remote(
        rt.task,
        seed=cfg.seed,
        max_answer_len=wl.max_response_len - 1,
        samples_per_prompt=wl.samples_per_prompt,
        prompts_per_step=wl.prompts_per_step,
        prefetch_steps=rt.prefetch_steps if rt.mode == "laminar" else None,
        model_type=rt.model.type,
        model_dir=info["model_dir"],
        max_prompt_len=wl.max_prompt_len,
    )
    pools = {"prompts": prompts, "partial": partial, "buffer": buffer}
    started, where = [], None
    if rollouts is None:
        where = replicas.place_rollouts(cfg, home)
        stack.callback(where.release)
        info["rollout_nodes"] = list(where.node_ids)
        rollouts = {f"r{i}": _rollout(cfg, dirs, info, i, where) for i in range(rt.rollouts)}
        stack.callback(shutdown_engines, rollouts)  # a dead one is skipped after its timeout
        started = [r.start.remote() for r in rollouts.values()]
    placement = rt.placement()
    ray.get(
        [
            r.attach.remote(store, pools, t0_s, placement.rollout_cpus[i], rt.task, cfg.seed)
            for i, r in enumerate(rollouts.values())
        ]
    )
    info.update(ray.get(trainer.warmup.remote(store)))  # overlaps the engines' start-up
    footprints = ray.get(started)
    info["engine_start_s"] = [f["start_s"] for f in footprints]
    info["engine_shm_files"] = sorted({path for f in footprints for path in f["shm"]})
    if not cfg.relay.enabled:
        _check_one_machine(home, rollouts)
    manager = ray_run.actor(RolloutManager, **here).remote(
        rollouts,
        partial,
        interval_s=cfg.repack.interval_s,
        repack_enabled=cfg.repack.enabled and rt.mode == "laminar",
        t0_s=t0_s,
        buffer=buffer,
        prompts=prompts,
        health_timeout_s=rt.faults.health_timeout_s,
        step_cost=step_cost,
        max_step_slowdown=cfg.repack.max_step_slowdown,
    )
    a = Actors(trainer, prompts, partial, buffer, rollouts, manager, info)
    a.procs = dict(zip(rollouts, footprints, strict=False))
    a.weights, a.new_trainer, a.pools = store, new_trainer, pools
    a.rollout_cpus = list(placement.rollout_cpus)
    a.info["rollout_node"] = {rid: nodes.node_of(h) for rid, h in rollouts.items()}
    a.relays = relay_handles(store)
    a.machines = machines_for(rt.address)
    a.placement = where
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


def _rollout(
    cfg: LaminarConfig,
    dirs: ray_run.RunDirs,
    info: dict,
    index: int,
    where: replicas.ReplicaPlacement,
    replica_id: str = "",
) -> Any:
    """Rollout actor in slot ``index`` (its cores, its place ``where``); a replacement has an
    id of its own."""
    rt, wl = cfg.runtime, cfg.workload
    options = ray_run.rollout_options(cfg, index, dirs, where.options[index])
    spec = _engine_spec(cfg, info, index, where.tensor_parallel_size)
    node = NodeSetup(
        run_id=dirs.run_id,
        model_type=rt.model.type,
        model_path=info["model_dir"] if rt.model.type != "tiny" else "",
        config_json=info["config_json"],
        seed=cfg.seed,
    )
    return ray_run.actor(ray_run.RolloutActor, **options).remote(
        replica_id or f"r{index}",
        spec,
        cpus=rt.placement().rollout_cpus[index],
        nice=rt.rollout_nice if rt.device == "cpu" else 0,
        node=node,
        task=rt.task,
        seed=cfg.seed,
        max_response_len=wl.max_response_len,
        max_batch=rt.max_batch,
        samples_per_prompt=wl.samples_per_prompt,
        model_type=rt.model.type,
        model_dir=info["model_dir"],
        flush_interval_s=rt.flush_interval_s,
        engine_stall_s=rt.faults.engine_stall_s,
        max_prompt_len=wl.max_prompt_len,
    )


def shutdown_engines(rollouts: dict[str, Any], timeout_s: float = 120.0) -> None:
    """Stop every engine that still answers (vLLM then removes its processes and /dev/shm)."""
    import ray

    refs = [r.shutdown.remote() for r in rollouts.values()]
    ray.wait(refs, num_returns=len(refs), timeout=timeout_s)


def _engine_spec(cfg: LaminarConfig, info: dict, index: int, tp: int = 1) -> EngineSpec:
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
        tensor_parallel_size=tp,
        quantization=cfg.model.rollout_quant if cfg.model.rollout_quant != "none" else None,
        expert_parallel=cfg.model.rollout_ep,
        eager=cfg.model.rollout_eager,
    )


def _check_one_machine(home: str, rollouts: dict[str, Any]) -> None:
    """The default weight store is one machine's /dev/shm; other nodes need the relay tier."""
    from laminar.errors import LaminarError

    away = [rid for rid, h in rollouts.items() if nodes.node_of(h) != home]
    if away:
        raise LaminarError(
            f"rollouts {', '.join(away)} run on another Ray node than the trainer; the default "
            "weight store (/dev/shm) is single-machine — multi-node runs need the relay tier"
        )


def train(
    cfg: LaminarConfig,
    *,
    on_step: StepCallback,
    verbose: bool = False,
    model_out: str | None = None,
    log: RunLog | None = None,
    resume: ResumeState | None = None,
) -> dict:
    """Run ``cfg`` end to end; return the raw results (``laminar.runtime.run.outputs`` writes them).

    ``model_out``: a directory to save the final policy into (Hugging Face format). ``log``: the
    live run directory (steps, faults and checkpoints as they happen); ``resume``: go on from
    its newest checkpoint (``laminar.runtime.run.resume``).
    """
    check_inputs(cfg)
    prior = resume.meta if resume is not None else {}
    t0 = time.time() - float(prior.get("elapsed_s", 0.0))  # a resumed run continues the clock
    # killed sessions of this run directory: their leftovers on this host go before this
    # session's scratch variables are set, those on the other machines once Ray is up
    stale = sessions.stale(log.out) if log is not None else []
    reaped = sessions.reap_local(stale)
    run_dir = log.out if log is not None else None
    with ray_run.ray_session(cfg, verbose=verbose, run_dir=run_dir) as dirs, ExitStack() as stack:
        if run_dir is not None:
            sessions.reap_nodes(run_dir, stale, reaped)
        # runtime.storage: a shared path is checked on every machine before anything starts
        storage = Storage.for_run(cfg, dirs.node_path("storage", root="scratch"), run_dir)
        if log is not None:
            log.storage = storage
        probe = SpeedProbe(cfg.runtime.speed_probe_s, dirs.tmp,
                           cores=cfg.runtime.device == "cpu").start()
        stack.callback(probe.stop, t0)  # a failed run still ends its probe
        actors = launch(cfg, dirs, t0, stack)
        actors.storage = storage
        actors.info["faults"] = list(prior.get("faults", []))
        actors.info["prior_wall_s"] = float(prior.get("wall_s", 0.0))
        actors.info["prior_events"] = list(prior.get("events", []))
        start = 0
        if resume is not None:
            start = restore(actors, cfg, resume)
            actors.info["resumed"]["stale_sessions"] = reaped
        first = loops.evaluate(actors, cfg)
        if resume is not None:
            adopt_resumed(actors, cfg, resume)
        setup_s = time.time() - t0 - float(prior.get("elapsed_s", 0.0))
        loop_t = time.perf_counter()
        stack.callback(loops.reap_dead, actors)
        sup = _supervisor(actors, cfg, dirs, log, prior)
        rows = list(resume.steps) if resume is not None else []

        def step_done(m: dict) -> None:
            rows.append(m)
            if log is not None:
                log.write_steps(rows)
                log.write_faults(actors.info["faults"])
            on_step(m)

        run = loops.run_laminar if cfg.runtime.mode == "laminar" else loops.run_sync
        run(actors, cfg, step_done, sup, log, start)
        wall_s = time.perf_counter() - loop_t + actors.info["prior_wall_s"]
        speed = probe.stop(t0)
        last = loops.evaluate(actors, cfg)
        result = loops.collect(actors)
        result["manager"]["events"] = actors.info.pop("prior_events") + result["manager"]["events"]
        if model_out is not None:  # on this machine, whatever machines the trainer is on
            storage.save_model(actors.trainer, model_out)
    result.update(steps=rows, wall_s=wall_s, setup_s=setup_s, info=actors.info, run_id=dirs.run_id)
    result.update(speed_probe=speed, core_cpu=probe.cores)
    result.update(eval_first=first, eval_last=last)
    return result


def _supervisor(
    a: Actors, cfg: LaminarConfig, dirs: ray_run.RunDirs, log: RunLog | None, prior: dict
) -> Supervisor:
    def spawn(index: int, replica_id: str, lost: frozenset[str] = frozenset()) -> Any:
        # the placement decides: the slot's machine while Ray has it alive and the run has not
        # lost it, else another
        a.placement.replace(index, lost)
        return _rollout(cfg, dirs, a.info, index, a.placement, replica_id)

    def on_change() -> None:
        if log is not None:
            log.write_faults(a.info["faults"])

    return Supervisor(
        a,
        cfg,
        spawn=spawn,
        checkpoint=log.latest_trainer_checkpoint if log is not None else lambda: None,
        on_change=on_change,
        done={f["spec"] for f in prior.get("faults", []) if "spec" in f},
    )


def restore(a: Actors, cfg: LaminarConfig, state: ResumeState) -> int:
    """Trainer and pools from a checkpoint; returns the first step to run."""
    import ray

    storage = a.storage if a.storage is not None else Storage("local")
    with storage.staged(a.trainer, state.trainer_checkpoint) as path:
        version = ray.get(a.trainer.resume.remote(a.weights, path))
    ray.get(a.trainer.publish.remote())  # the rollouts load the checkpoint's weights
    pools = state.pools
    finished = {r["traj"].traj_id for r in pools["buffer"]["rows"]}
    ray.get(a.prompts.restore.remote(pools["prompts"]))
    ray.get(a.buffer.restore.remote(pools["buffer"]))
    ray.get(a.partial.restore.remote([t for t in pools["partial"] if t.traj_id not in finished]))
    a.prompts.advance.remote(state.step + 1)
    a.info["resumed"] = {"from_step": state.step, "version": version}
    return state.step + 1


def adopt_resumed(a: Actors, cfg: LaminarConfig, state: ResumeState) -> None:
    """In-progress trajectories of the checkpoint go to the rollouts (now on its version)."""
    import ray

    def group_of(pid: int) -> Any:
        return ray.get(a.prompts.group.remote(pid))

    wl = cfg.workload
    trajs = orphans_to_resume(state, group_of, wl.samples_per_prompt, wl.max_response_len)
    ray.get(a.manager.adopt_orphans.remote(trajs))
    a.info["resumed"]["trajectories_adopted"] = len(trajs)
