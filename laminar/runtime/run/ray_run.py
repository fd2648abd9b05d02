"""Ray for one run: start it (or join ``--address``), create the actors, clean everything up.

A run owns two directories, removed when it ends however it ends: ``/tmp/laminar-<id>`` (Ray's
session files when Ray is local, vLLM's ZMQ sockets and caches) and ``/dev/shm/laminar-<id>``
(the base model and the weight versions). Environment variables keep every process offline and
quiet (``RUNTIME-NOTES.md``: a stray hub lookup hangs ~50 s).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.config import LaminarConfig
from laminar.policy.placement import cpu_text
from laminar.runtime.cluster import lifeline, nodes
from laminar.runtime.rollout import vllm_spin
from laminar.runtime.rollout.node import LoadRecorder, NodeSetup
from laminar.runtime.rollout.worker import RolloutWorker

log = logging.getLogger(__name__)

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "TOKENIZERS_PARALLELISM": "false",
    # Ray starts its workers at niceness 15 by default: any ordinary process on the machine
    # (CFS weight 1024 against 36) then takes a shared core almost whole, and the trainer's
    # and engines' times double or worse depending on what else runs (docs/fidelity.md).
    # Workers of a local Ray run at the niceness of the command that started it.
    "RAY_worker_niceness": "0",
}


@dataclass
class RunDirs:
    """Where one run keeps its scratch files."""

    run_id: str
    tmp: Path  # /tmp/laminar-<id>
    shm: Path  # /dev/shm/laminar-<id> (where there is no /dev/shm: the same directory as tmp)

    def env(self) -> dict[str, str]:
        """Variables of the driver and of a local Ray's processes (paths on this machine)."""
        return {
            **self.job_env(),
            # The roots, pinned: with TMPDIR moved into the run's directory, a local Ray's actors
            # would otherwise derive their run directory inside it, and the engine-shm notes
            # they write (nodes.record_engine_shm) were not where the guardian or a --resume
            # looks (a SIGKILLed driver left two engine queues in /dev/shm, CI of stop 34).
            nodes.SCRATCH_ROOT_ENV: str(self.tmp.parent),
            nodes.SHM_ROOT_ENV: str(self.shm.parent),
            "TMPDIR": str(self.tmp / "tmp"),  # vLLM's sockets, /tmp/vllm_dist_*
            "VLLM_RPC_BASE_PATH": str(self.tmp / "vllm-rpc"),
            **nodes.compile_cache_env(self.tmp),
        }

    def job_env(self) -> dict[str, str]:
        """Variables every actor of the run gets, on any machine: no paths (those are derived
        on each machine, ``laminar.runtime.cluster.nodes``)."""
        return {**OFFLINE_ENV, "VLLM_CONFIGURE_LOGGING": "1", "VLLM_LOGGING_LEVEL": "WARNING"}

    def node_path(self, rel: str = "", root: nodes.Root = "shm") -> nodes.NodePath:
        """``rel`` inside this run's directory on whichever machine resolves it."""
        return nodes.NodePath(self.run_id, root, rel)


def make_dirs() -> RunDirs:
    run_id = uuid.uuid4().hex[:10]
    # the same directories every process of the run derives (nodes.run_dir)
    dirs = RunDirs(run_id, nodes.run_dir(run_id, "scratch"), nodes.run_dir(run_id, "shm"))
    for d in (dirs.tmp, dirs.shm, *(dirs.tmp / n for n in ("tmp", "vllm-rpc"))):
        d.mkdir(parents=True, exist_ok=True)
    return dirs


@contextlib.contextmanager
def ray_session(
    cfg: LaminarConfig, *, verbose: bool = False, run_dir: Path | None = None
) -> Iterator[RunDirs]:
    """Start (or join) Ray for one run; on exit shut it down and remove the run's files.

    ``run_dir``: the run directory this session writes; the session is recorded there while it
    runs and marked ended once its files are gone (``laminar.runtime.cluster.sessions``), so a later
    ``--resume`` knows what a killed one left.

    A driver that dies without this teardown (SIGKILL, OOM) leaves no process behind
    (``laminar.runtime.cluster.lifeline``: its guardian sweeps this machine, Ray ends the job's
    actors, engines die with their actor). ``runtime.address`` is asked first, within bounds
    (``laminar.runtime.run.address``): a wrong one fails before anything is made."""
    import ray

    from laminar.runtime.cluster import sessions
    from laminar.runtime.cluster.lifeline import Guardian
    from laminar.runtime.run.address import check_address

    address = cfg.runtime.address or None
    check_address(cfg.runtime.address, OFFLINE_ENV)  # ray.init retries for minutes: ask first
    dirs = make_dirs()
    # started before the run's mark enters the environment: the sweeps spare it
    guardian = Guardian(dirs.run_id).start()
    if run_dir is not None:
        sessions.begin(run_dir, dirs.run_id)
    saved = dict(os.environ)
    os.environ.update(dirs.env())  # the driver and a local Ray's processes inherit these
    try:
        kwargs: dict[str, Any] = dict(
            include_dashboard=False,
            log_to_driver=verbose,
            logging_level="INFO" if verbose else "WARNING",
            runtime_env={"env_vars": dirs.job_env()},
        )
        if address is None:  # our own local Ray: its session files live in the run's tmp
            kwargs.update(num_cpus=max(2, os.cpu_count() or 2), _temp_dir=str(dirs.tmp / "ray"))
            kwargs["object_store_memory"] = 256 * 1024**2
        else:
            kwargs["runtime_env"]["py_modules"] = [str(Path(__file__).resolve().parents[1])]
        with _keep_sigterm_handler():
            ray.init(address=address, **kwargs)
        yield dirs
    finally:
        if address is not None:  # other machines hold this run's node-local directories too
            with contextlib.suppress(Exception):
                nodes.remove_run_everywhere(dirs.run_id)
        with contextlib.suppress(Exception):
            ray.shutdown()
        # Whatever on this host still carries the run's mark is ours (e.g. the engine of a
        # replacement rollout killed while starting): Ray does not know about it.
        from laminar.runtime.cluster.procfs import sweep_run_processes

        sweep_run_processes(dirs.run_id)
        shutil.rmtree(dirs.shm, ignore_errors=True)
        shutil.rmtree(dirs.tmp, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)
        if run_dir is not None:
            sessions.end(run_dir, dirs.run_id)
        guardian.close()  # last: a driver killed during this teardown still has it


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """``ray.init`` replaces the SIGTERM handler with ``sys.exit``; a handler of the caller's
    own (``laminar train`` stops cleanly and says how to resume) is put back."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if callable(before):
            signal.signal(signal.SIGTERM, before)


class RolloutActor(RolloutWorker):
    """A :class:`RolloutWorker` that builds its vLLM engine inside its own actor process.

    ``cpus``: cores for this process and the engine processes it starts, pinned once the
    engine has started (``start``: the start-up may use every core).
    ``node``: set up scratch and the base model on this actor's own machine
    (:mod:`laminar.runtime.rollout.node`); the engine then starts from that directory.
    ``engine_cls``: the engine class (default ``VllmEngine``; tests pass a fake).
    """

    def __init__(
        self,
        replica_id: str,
        spec: Any,
        cpus: tuple[int, ...] = (),
        nice: int = 0,
        node: NodeSetup | None = None,
        engine_cls: type | None = None,
        **kwargs: Any,
    ):
        # Pinned to ``cpus`` once the engine has started (``start``), not before: the start-up
        # is three processes importing vLLM and torch one after another, which on their own
        # core took ~40 s longer a start while the trainer's cores sat idle (2-core machine,
        # benchmarks/RESULTS.md); vLLM binds its OpenMP threads to the replica's cores itself
        # (VLLM_CPU_OMP_THREADS_BIND), and pin_tree then pins every process of the engine.
        self._cpus = tuple(cpus)
        if nice:
            os.nice(nice)  # the engine processes started from here inherit it
        self.scratch_env: dict[str, str] = {}
        self.run_id = node.run_id if node is not None else ""
        if node is not None:  # before vLLM is imported: its processes inherit the variables
            self.scratch_env, model_dir = node.enter()
            spec = dataclasses.replace(spec, model_dir=str(model_dir))
            kwargs["model_dir"] = str(model_dir)
        if engine_cls is None:
            from laminar.runtime.rollout.vllm_engine import VllmEngine

            engine_cls = VllmEngine
        self.spec = spec
        super().__init__(replica_id, LoadRecorder(engine_cls(spec)), **kwargs)

    async def start(self) -> dict:
        """Start the engine; the footprint also names this machine (for node-side cleanup)."""
        out = await super().start()
        if self._cpus:
            pin_tree(self._cpus)
        out["node_id"] = nodes.current_node()
        if self.run_id:  # for a reaper after this process is gone (nodes.record_engine_shm)
            nodes.record_engine_shm(self.run_id, self.replica_id, out["shm"])
            self._keep_shm_note(set(out["shm"]))
        return out

    def _keep_shm_note(self, known: set[str], every_s: float = 2.0) -> None:
        """Keep the note current: the engine maps queues after its start too (the guardian
        of a SIGKILLed driver found some the start-up note lacked). A daemon thread re-reads
        the engine processes' maps and rewrites the note when the set grows."""
        import threading

        from laminar.runtime.rollout.worker import engine_footprint

        def watch() -> None:
            seen = set(known)
            while True:
                time.sleep(every_s)
                with contextlib.suppress(Exception):  # a child exiting mid-read: next round
                    now = seen | set(engine_footprint()["shm"])
                    if now != seen:
                        seen = now
                        nodes.record_engine_shm(self.run_id, self.replica_id, sorted(seen))

        threading.Thread(target=watch, name="shm-note", daemon=True).start()

    async def attach(
        self, weights: Any, pools: dict, t0_s: float, cpus: tuple = (), task: Any = None,
        seed: int = 0,
    ) -> None:  # fmt: skip
        """Join a job (see ``RolloutWorker.attach``), on the job's cores when given."""
        if cpus:
            pin_tree(cpus)
        await super().attach(weights, pools, t0_s, task, seed)

    async def stats(self) -> dict:
        """The worker's figures, plus its machine and every weight directory it loaded."""
        out = await super().stats()
        out.update(node_id=nodes.current_node(), weights_from=list(self.engine.loaded))
        return out

    def whereabouts(self) -> dict:
        """Where this replica runs and every path it uses (all derived on its machine)."""
        import ray

        return {
            "node_id": nodes.current_node(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "tensor_parallel_size": self.spec.tensor_parallel_size,
            "model_dir": self.spec.model_dir,
            "scratch": dict(self.scratch_env),
            "loaded": list(self.engine.loaded),
        }


def pin_tree(cpus: tuple[int, ...]) -> None:
    """Pin every thread of this process and of its descendants (the engine) to ``cpus``."""
    import psutil

    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(OSError, psutil.Error):
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(tid), cpus)


def engine_start_key(cfg: LaminarConfig) -> tuple:
    """What a rollout and its engine processes fix when they start (their environment,
    ``rollout_options``, and the actor's niceness and engine): jobs may share running engines
    (the benchmarks do) only where this is equal. Cores are not in it: ``attach`` re-pins an
    engine to each job's; nor what ``attach`` and a job's settings give a running rollout."""
    rt = cfg.runtime
    return (rt.device, rt.engine_spin_s, rt.kv_cache_gib, rt.rollout_threads, rt.rollout_nice,
            rt.gpu_memory_fraction, rt.gpu_share, rt.model.model_dump_json())  # fmt: skip


def rollout_options(
    cfg: LaminarConfig, index: int, dirs: RunDirs, where: dict | None = None
) -> dict:
    """Ray options of rollout ``index``: its cores (CPU), its environment, and ``where`` it runs
    (devices and scheduling strategy from ``laminar.runtime.cluster.replicas``)."""
    rt = cfg.runtime
    env = dirs.job_env()
    env[lifeline.TIE_ENV] = "1"  # its vLLM processes die with it (laminar.runtime.cluster.lifeline)
    # inherited by vLLM's processes (laminar.runtime.rollout.vllm_spin)
    if rt.engine_spin_s is not None:
        env[vllm_spin.ENV] = repr(float(rt.engine_spin_s))
        if index == 0 and not vllm_spin.registered():
            log.warning("runtime.engine_spin_s has no effect: laminar's vLLM plugin is not "
                        "registered (install the package: pip install -e .)")  # fmt: skip
    if rt.device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(rt.kv_cache_gib)
        cpus = rt.placement().rollout_cpus[index]
        if rt.rollout_threads:  # threads float over the replica's cores
            env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
            env["OMP_NUM_THREADS"] = str(rt.rollout_threads)
        elif cpus:  # before vLLM is imported in the actor (RUNTIME-NOTES: binding)
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_text(list(cpus))
    opts: dict[str, Any] = {
        "num_cpus": 0,
        "num_gpus": rt.gpu_share if rt.device == "cuda" else 0,
        "runtime_env": {"env_vars": env},
        "name": None,
        "max_concurrency": 1000,
    }
    opts.update(where or {})
    return opts


def control_plane_options() -> dict:
    """Ray options that keep an actor on the driver's machine: the pools and the rollout
    manager are the run's ledger, kept where the driver is, off the machines whose loss the run
    survives. Hard affinity: with a soft one Ray places an actor that asks for no resources on
    a random node (seen on emulated machines: pools on rollout machines, so no machine could be
    lost), and the driver's own node can always take an actor of no resources."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node_id = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}


def actor(cls: type, **options: Any) -> Any:
    """``ray.remote(cls)`` with ``options`` (``num_cpus=0`` unless given)."""
    import ray

    options.setdefault("num_cpus", 0)
    return ray.remote(cls).options(**options)


def peak_rss_bytes(handle: Any) -> int:
    """Peak resident memory of an actor's process and its children (vLLM engine processes)."""
    import ray

    return ray.get(handle.__ray_call__.remote(lambda self: tree_peak_rss_bytes()))


def tree_peak_rss_bytes() -> int:
    """Sum of VmHWM (peak RSS) over this process and its descendants."""
    import psutil

    total = 0
    me = psutil.Process()
    for p in [me, *me.children(recursive=True)]:
        with contextlib.suppress(OSError, psutil.Error):
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
    return total
