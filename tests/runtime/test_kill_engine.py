"""``kill-engine`` on emulated machines: the rollout actor kills its own engine processes on
its machine (a driver elsewhere cannot see their pids); the driver's pid path is the fallback.

The replica is the production ``RolloutActor`` with a fake engine that owns a real child
process (``ProcessFakeEngine``); the driver is given no pids for it, as on another host.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from laminar.config import load_config
from laminar.runtime.faults import inject
from laminar.runtime.run import ray_run
from laminar.runtime.run.driver import _engine_spec
from tests.runtime.fakes import ProcessFakeEngine

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def _job(handle, footprint: dict) -> SimpleNamespace:
    """The bits of a running job ``inject.kill_engine`` reads: one live rollout ``r0``."""
    return SimpleNamespace(
        rollouts={"r0": handle},
        procs={"r0": footprint},
        info={"faults": [], "replace_dead": True},
        live=lambda: {"r0": handle},
    )


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_the_rollout_actor_kills_its_engine_on_its_machine(connected_machines):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    emu = connected_machines
    cfg = load_config(overrides=["runtime.device=cpu"])
    rt, wl = cfg.runtime, cfg.workload
    dirs = ray_run.RunDirs(f"t{uuid.uuid4().hex[:8]}", Path("/nonexistent"), Path("/nonexistent"))
    where = NodeAffinitySchedulingStrategy(emu.nodes["m1"].node_id, soft=False)
    options = {**ray_run.rollout_options(cfg, 0, dirs), "scheduling_strategy": where}
    handle = ray_run.actor(ray_run.RolloutActor, **options).remote(
        "r0",
        _engine_spec(cfg, {"model_dir": "", "eos_id": 2}, 0),
        engine_cls=ProcessFakeEngine,
        task=rt.task,
        seed=cfg.seed,
        max_response_len=wl.max_response_len,
        max_batch=rt.max_batch,
        samples_per_prompt=wl.samples_per_prompt,
        model_type="tiny",
        model_dir="",
        flush_interval_s=rt.flush_interval_s,
    )
    try:
        footprint = ray.get(handle.start.remote(), timeout=120)
        assert footprint["node_id"] == emu.nodes["m1"].node_id
        (engine_pid,) = [pid for pid, _ in footprint["pids"]]
        alive = ray.get(handle.__ray_call__.remote(lambda self: self.engine.alive()))
        assert alive and psutil.pid_exists(engine_pid)
        # the driver knows no pid of it (another host): only the actor can do it
        rec = inject.kill_engine(_job(handle, {}), "r0")
        assert rec == {"target": "r0", "pids": [engine_pid], "via": "actor"}
        assert _gone(engine_pid)
        assert not ray.get(handle.__ray_call__.remote(lambda self: self.engine.alive()))
        # the actor lives on (only its engine died); a second kill finds nothing to kill
        assert ray.get(handle.__ray_call__.remote(lambda self: self.replica_id)) == "r0"
        with pytest.raises(inject.FaultNotApplicable, match="no engine process"):
            inject.kill_engine(_job(handle, {}), "r0")
    finally:
        ray.kill(handle)


def test_a_rollout_that_cannot_be_asked_falls_back_to_the_driver_pids():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        footprint = {"pids": [(child.pid, psutil.Process(child.pid).create_time())]}
        rec = inject.kill_engine(_job(object(), footprint), "r0")  # no kill_engine method
        assert rec == {"target": "r0", "pids": [child.pid], "via": "driver"}
        assert child.wait(10) == -9
    finally:
        child.kill()
