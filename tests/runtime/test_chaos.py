"""Chaos: a seeded run on emulated machines with one random kill of every kind.

Three emulated machines (``laminar.runtime.emulate``: Ray nodes on this host; ``m0`` holds
Ray's head), the relay tier on (one relay per node),
two rollouts. ``chaos_plan(seed)`` puts a ``kill-rollout``, ``kill-engine``, ``kill-machine``,
``kill-relay`` and ``kill-trainer`` at random steps. The run must finish its steps with nothing
lost and nothing consumed twice, each fault detected and recovered, and leave no process or
shared-memory file of its own behind.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import psutil
import pytest

from laminar.cli import main
from laminar.config.runtime_faults import KINDS, chaos_plan
from laminar.runtime.faults.machines import register, unregister
from tests.runtime.test_train_e2e import _leftovers, _small

pytestmark = pytest.mark.slow

SEED, STEPS = 3, 6


@pytest.fixture
def machines():
    from laminar.runtime.emulate import EmulatedCluster

    with EmulatedCluster(machines=3, gpus_per_machine=0, cpus_per_machine=2) as emu:
        register(emu)
        try:
            yield emu
        finally:
            unregister(emu)


@pytest.mark.xfail(
    reason="issue 13 open:"
    " the chaos run has not passed yet (a kill landing on a machine being lost)",
    strict=False,
)
def test_seeded_chaos_every_kind_nothing_lost(tmp_path, machines):
    plan = chaos_plan(SEED, STEPS)
    assert sorted(p.split("@")[0] for p in plan) == sorted(KINDS)
    tmp_before, pids_before = set(os.listdir(tempfile.gettempdir())), set(psutil.pids())
    args = _small(tmp_path, "laminar", STEPS, "runtime.eval_prompts=8", "relay.enabled=true")
    args += ["--address", machines.address]
    for spec in plan:
        args += ["--fault", spec]
    assert main(args) == 0
    summary = json.loads((tmp_path / "run-laminar" / "summary.json").read_text())
    assert summary["steps"] == STEPS
    assert summary["trajectories_lost"] == 0 and summary["trajectories_duplicated"] == 0
    assert summary["trajectories_consumed"] == STEPS * 4 * 4
    by_kind = {f["kind"]: f for f in summary["faults"] if f["kind"] in KINDS}
    assert set(by_kind) == set(KINDS), summary["faults"]
    for f in by_kind.values():
        assert "skipped" not in f, f
        assert 0 <= f["detection_s"] < 60, f
        assert f.get("recovery_s", 0) >= 0, f
    assert by_kind["kill-machine"]["rollouts"]  # a machine with a rollout on it went
    time.sleep(2)
    shm, tmp, procs = _leftovers(summary, tmp_before, pids_before)
    assert not shm and not tmp and not procs, (shm, tmp, procs)
