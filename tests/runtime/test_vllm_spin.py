"""``runtime.engine_spin_s``: the rollout's vLLM processes get the bound, and the plugin makes
vLLM's shared-memory reader sleep on its socket once the bound has passed."""

from __future__ import annotations

import time

import pytest

from laminar.config import load_config
from laminar.runtime.rollout import vllm_spin
from laminar.runtime.run import ray_run


class _Dirs:
    def job_env(self) -> dict:
        return {}


def test_the_bound_reaches_the_rollouts_environment_only_when_set():
    unset = load_config(preset="tiny-cpu", overrides=["runtime.engine_spin_s=null"])
    env = ray_run.rollout_options(unset, 0, _Dirs())["runtime_env"]["env_vars"]
    assert vllm_spin.ENV not in env
    assert unset.runtime.engine_spin_effective_s == 1.0  # vLLM's own
    cfg = load_config(preset="tiny-cpu", overrides=["runtime.engine_spin_s=0.05"])
    env = ray_run.rollout_options(cfg, 0, _Dirs())["runtime_env"]["env_vars"]
    assert float(env[vllm_spin.ENV]) == 0.05
    assert cfg.runtime.engine_spin_effective_s == 0.05


def test_a_sync_job_on_cpu_bounds_the_spin_unless_its_config_says_otherwise(tmp_path):
    """Sync mode trains on its engines' cores right after generation: not given, the bound is
    ``SYNC_CPU_ENGINE_SPIN_S`` there, and reaches the rollouts; laminar mode, GPUs and an
    explicit null keep vLLM's own; a run's written config loads back with the bound it ran."""
    from laminar.config.loader import write_resolved
    from laminar.config.runtime import SYNC_CPU_ENGINE_SPIN_S, VLLM_ENGINE_SPIN_S

    sync = load_config(preset="tiny-cpu", overrides=["runtime.mode=sync"])
    assert sync.runtime.engine_spin_s == SYNC_CPU_ENGINE_SPIN_S < VLLM_ENGINE_SPIN_S
    env = ray_run.rollout_options(sync, 0, _Dirs())["runtime_env"]["env_vars"]
    assert float(env[vllm_spin.ENV]) == SYNC_CPU_ENGINE_SPIN_S
    for overrides in (["runtime.mode=laminar"], ["runtime.mode=sync", "runtime.device=cuda"],
                      ["runtime.mode=sync", "runtime.engine_spin_s=null"]):
        cfg = load_config(preset="tiny-cpu", overrides=overrides)
        assert cfg.runtime.engine_spin_s is None, overrides
        assert cfg.runtime.engine_spin_effective_s == VLLM_ENGINE_SPIN_S
    assert load_config(preset="tiny-cpu", overrides=[
        "runtime.mode=sync", "runtime.engine_spin_s=0.5"]).runtime.engine_spin_s == 0.5
    switched = load_config(preset="tiny-cpu")
    switched.runtime.mode = "sync"  # set after loading, as a command line's --mode is
    assert switched.runtime.engine_spin_s == SYNC_CPU_ENGINE_SPIN_S
    for cfg, ran in ((sync, SYNC_CPU_ENGINE_SPIN_S), (load_config(preset="tiny-cpu", overrides=[
            "runtime.mode=sync", "runtime.engine_spin_s=null"]), None)):
        (tmp_path / str(ran)).mkdir()
        path = write_resolved(cfg, tmp_path / str(ran))
        assert load_config(path).runtime.engine_spin_s == ran


def test_a_negative_bound_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv(vllm_spin.ENV, "-1")
    with pytest.raises(ValueError, match=vllm_spin.ENV):
        vllm_spin.apply()


@pytest.fixture
def spin_condition():
    """vLLM's SpinCondition class, restored as it was after the test."""
    shm = pytest.importorskip("vllm.distributed.device_communicators.shm_broadcast")
    cond = shm.SpinCondition
    saved = {k: cond.__dict__[k] for k in ("wait", "laminar_spin_s", "laminar_patched")
             if k in cond.__dict__}  # fmt: skip
    yield cond
    for k in ("wait", "laminar_spin_s", "laminar_patched"):
        if k in saved:
            setattr(cond, k, saved[k])
        elif k in cond.__dict__:
            delattr(cond, k)


def _waited_s(cond, spin_after_read_s: float, where) -> float:
    """How long one ``wait(timeout_ms=200)`` of a fresh reader takes ``spin_after_read_s`` after
    its last read, with nobody ever writing: a spinning reader yields and returns at once, a
    sleeping one waits on its socket for the timeout."""
    import zmq

    ctx = zmq.Context()
    address = f"ipc://{where / 'notify.ipc'}"  # zmq aborts on an inproc one with no writer
    try:
        cond(is_reader=False, context=ctx, notify_address=address)
        reader = cond(is_reader=True, context=ctx, notify_address=address)
        reader.last_read = time.monotonic() - spin_after_read_s
        t = time.monotonic()
        reader.wait(timeout_ms=200)
        return time.monotonic() - t
    finally:
        ctx.destroy(linger=0)


def test_the_plugin_stops_the_spin_after_the_bound(monkeypatch, spin_condition, tmp_path):
    # 0.5 s after the last read: vLLM's own reader is still inside its 1 s spin
    assert _waited_s(spin_condition, 0.5, tmp_path) < 0.1
    monkeypatch.setenv(vllm_spin.ENV, "0.05")
    vllm_spin.apply()
    vllm_spin.apply()  # idempotent: one wrapper, not two
    assert spin_condition.laminar_spin_s == 0.05
    # past the bound: it sleeps on the socket
    assert _waited_s(spin_condition, 0.5, tmp_path) >= 0.15
    assert _waited_s(spin_condition, 0.0, tmp_path) < 0.1  # within the bound: still spins


def test_without_the_variable_the_plugin_changes_nothing(monkeypatch, spin_condition):
    monkeypatch.delenv(vllm_spin.ENV, raising=False)
    before = spin_condition.__dict__["wait"]
    vllm_spin.apply()
    assert spin_condition.__dict__["wait"] is before


def test_the_plugin_is_registered_with_vllm():
    # installed with the package (pyproject's entry point): vLLM's processes will call apply()
    assert vllm_spin.registered()


def test_jobs_share_running_engines_only_where_the_engines_start_alike():
    """The benchmarks run many jobs on one set of engines; an engine's spin bound is its
    processes' environment, so a sync job on CPU cannot reuse a laminar job's engines."""
    key = lambda *o: ray_run.engine_start_key(load_config(preset="tiny-cpu", overrides=list(o)))  # noqa: E731
    assert key() == key("runtime.task.median_len=9", "workload.max_response_len=256",
                        "runtime.rollouts=1")  # what attach and the job settings change
    assert key() != key("runtime.mode=sync")
    assert key("runtime.mode=sync") == key("runtime.mode=sync", "runtime.rollouts=1")
    assert key() == key("runtime.mode=sync", "runtime.engine_spin_s=null")
    for other in ("runtime.kv_cache_gib=2", "runtime.rollout_nice=5", "runtime.rollout_threads=2",
                  "runtime.model.layers=3"):
        assert key() != key(other), other
