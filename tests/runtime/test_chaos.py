"""Chaos: a seeded run on emulated machines with one random kill of every kind.

Three emulated machines (``laminar.runtime.cluster.emulate``: Ray nodes on this host; ``m0`` holds
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

import psutil
import pytest

from laminar.cli import main
from laminar.config.runtime_faults import KINDS, chaos_plan
from laminar.runtime.faults.machines import register, unregister
from tests.runtime.test_train_e2e import _leftovers, _small

pytestmark = pytest.mark.slow

# LAMINAR_CHAOS_SEED runs another seed by hand (CI runs the default one)
SEED, STEPS = int(os.environ.get("LAMINAR_CHAOS_SEED", "3")), 6


@pytest.fixture
def machines():
    from laminar.runtime.cluster.emulate import EmulatedCluster

    with EmulatedCluster(machines=3, gpus_per_machine=0, cpus_per_machine=2) as emu:
        register(emu)
        try:
            yield emu
        finally:
            unregister(emu)


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
    faults = json.dumps(summary["faults"], indent=1)  # the whole story when an assert fails
    assert summary["steps"] == STEPS
    assert summary["trajectories_lost"] == 0 and summary["trajectories_duplicated"] == 0
    assert summary["trajectories_consumed"] == STEPS * 4 * 4
    by_kind = {f["kind"]: f for f in summary["faults"] if f["kind"] in KINDS}
    assert set(by_kind) == set(KINDS), faults
    for spec in plan:  # each fired at its step and was seen
        f = by_kind[spec.split("@")[0]]
        assert "skipped" not in f and f["spec"] == spec, faults
        assert f["step"] == int(spec.split("@")[1]), faults
        assert 0 <= f["detection_s"] < 60 and f.get("recovery_s", 0) >= 0, faults
    machine = by_kind["kill-machine"]
    assert machine["rollouts"] and machine["target"] != "m0", faults  # a rollout machine went
    assert by_kind["kill-engine"]["via"] == "actor", faults  # killed on its own machine
    shm, tmp, procs = _leftovers(summary, tmp_before, pids_before)
    assert not shm and not tmp and not procs, (shm, tmp, procs)
