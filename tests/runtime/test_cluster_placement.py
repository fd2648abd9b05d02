"""Rollout replicas on emulated machines (2 machines x 4 fake GPUs, ``model.rollout_tp=2``):
4 replicas, each holding 2 GPUs of one machine in that machine's STRICT_PACK placement group,
loading weights from that machine's relay; every path a replica uses was derived on its machine.

Fake GPUs cannot run vLLM, so the replicas are the production ``RolloutActor`` with a fake
engine (``SpecFakeEngine``); placement, node-local paths, relays and the weight path are real.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from laminar.config import load_config
from laminar.errors import LaminarError
from laminar.runtime.cluster import nodes, replicas
from laminar.runtime.data.pools import ExperienceBuffer, PartialResponsePool
from laminar.runtime.relay.tier import weight_path_for
from laminar.runtime.rollout.node import NodeSetup
from laminar.runtime.run import ray_run
from laminar.runtime.run.driver import _engine_spec
from laminar.runtime.weights import WEIGHTS_NAME
from tests.runtime.fakes import SpecFakeEngine

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

OVERRIDES = [
    "runtime.device=cuda",
    "runtime.rollouts=4",
    "model.rollout_tp=2",
    "cluster.gpus=8",
    "cluster.gpus_per_machine=4",
    "relay.enabled=true",
    "relay.transport=tcp",
]


def _tiny_config_json(cfg) -> str:
    from transformers import LlamaConfig

    from laminar.runtime.models import tinymodel

    w = cfg.workload
    kw = tinymodel.llama_config(
        layers=1, hidden=64, max_positions=w.max_prompt_len + w.max_response_len
    )
    return LlamaConfig(**kw).to_json_string()


def _replica(cfg, dirs, where, index: int, config_json: str):
    rt, wl = cfg.runtime, cfg.workload
    info = {"model_dir": "", "eos_id": 2}
    setup = NodeSetup(dirs.run_id, "tiny", config_json=config_json, seed=cfg.seed)
    options = ray_run.rollout_options(cfg, index, dirs, where.options[index])
    return ray_run.actor(ray_run.RolloutActor, **options).remote(
        f"r{index}",
        _engine_spec(cfg, info, index, where.tensor_parallel_size),
        node=setup,
        engine_cls=SpecFakeEngine,
        task=rt.task,
        seed=cfg.seed,
        max_response_len=wl.max_response_len,
        max_batch=rt.max_batch,
        samples_per_prompt=wl.samples_per_prompt,
        model_type="tiny",
        model_dir="",
        flush_interval_s=rt.flush_interval_s,
    )


def test_tp2_replicas_fill_each_machine_next_to_its_relay(connected_machines):
    emu = connected_machines
    cfg = load_config(overrides=OVERRIDES)
    dirs = ray_run.RunDirs(f"t{uuid.uuid4().hex[:8]}", Path("/nonexistent"), Path("/nonexistent"))
    head = emu.nodes["m0"].node_id  # the trainer's machine: the master relay is there
    where = replicas.place_rollouts(cfg, head)
    weights, close = weight_path_for(cfg, dirs.node_path("job"), '{"model_type": "llama"}')
    try:
        # 2 machines x (4 GPUs // tp 2): every machine full, the trainer's last
        assert where.tensor_parallel_size == 2 and len(where.node_ids) == 4
        assert Counter(where.node_ids) == {m.node_id: 2 for m in emu.nodes.values()}
        assert where.node_ids[0] != head
        for pg in where.groups:
            from ray.util.placement_group import placement_group_table

            table = placement_group_table(pg)
            assert (
                table["strategy"] == "STRICT_PACK"
                and len(set(table["bundles_to_node_id"].values())) == 1
            )
        config_json = _tiny_config_json(cfg)
        actors = [_replica(cfg, dirs, where, i, config_json) for i in range(4)]
        footprints = ray.get([a.start.remote() for a in actors], timeout=300)
        assert [f["node_id"] for f in footprints] == where.node_ids

        blob = b"version zero " * 1000
        weights.publish(0, blob)  # the driver stands in for the trainer
        weights.publisher.wait(0, timeout_s=60)
        pools = {
            "partial": ray_run.actor(PartialResponsePool).remote(),
            "buffer": ray_run.actor(ExperienceBuffer).remote(4, time.time()),
            "prompts": None,
        }
        ray.get([a.attach.remote(weights, pools, time.time()) for a in actors])
        assert ray.get([a.load_latest.remote() for a in actors]) == [0, 0, 0, 0]
        relay_root = {r["machine"]: r["root"] for r in weights.relays}
        seen_gpus: dict[str, set[str]] = {}
        for i, w in enumerate(ray.get([a.whereabouts.remote() for a in actors])):
            machine = emu.machine_of(w["node_id"])
            assert w["node_id"] == where.node_ids[i]
            assert w["tensor_parallel_size"] == 2 and len(w["gpu_ids"]) == 2
            assert not seen_gpus.setdefault(machine.name, set()) & set(w["gpu_ids"])
            seen_gpus[machine.name] |= set(w["gpu_ids"])
            # no path crosses machines: model dir, scratch, and the weights it loaded (the
            # compile caches are the host's: content-keyed, shared by design)
            scratch = {k: v for k, v in w["scratch"].items() if k not in nodes.COMPILE_CACHE_VARS}
            paths = [w["model_dir"], *scratch.values(), *w["loaded"]]
            assert all(emu.owner_of(p) is machine for p in paths), (machine.name, paths)
            (loaded,) = w["loaded"]
            assert Path(loaded).is_relative_to(relay_root[w["node_id"]])  # its machine's relay
            assert (Path(loaded) / WEIGHTS_NAME).read_bytes() == blob
        assert all(len(g) == 4 for g in seen_gpus.values())  # each machine's 4 GPUs, once each
        # the driver never made the run's directories on its own filesystem
        assert not nodes.run_dir(dirs.run_id, "shm").exists()
        assert not nodes.run_dir(dirs.run_id, "scratch").exists()
    finally:
        close()
        where.release()
        nodes.remove_run_everywhere(dirs.run_id)


def test_replicas_that_do_not_fit_or_need_one_machine(connected_machines):
    emu = connected_machines
    head = emu.nodes["m0"].node_id
    too_many = load_config(overrides=[*OVERRIDES, "runtime.rollouts=5"])
    with pytest.raises(LaminarError, match=r"runtime\.rollouts=5"):
        replicas.place_rollouts(too_many, head)
    # without the relay tier, every replica goes to the trainer's machine (its /dev/shm store)
    alone = load_config(overrides=[*OVERRIDES, "runtime.rollouts=2", "relay.enabled=false"])
    where = replicas.place_rollouts(alone, head)
    try:
        assert where.node_ids == [head, head] and len(where.groups) == 1
    finally:
        where.release()
    cpu = load_config(overrides=["runtime.rollouts=3", "relay.enabled=true"])
    where = replicas.place_rollouts(cpu, head)
    assert where.groups == [] and where.node_ids[-1] != head
    assert Counter(where.node_ids) == {emu.nodes["m1"].node_id: 2, head: 1}


def test_a_dead_replica_gets_its_bundle_back_or_a_machine_with_room(connected_machines):
    """Runs last: it kills machine m1 of the module's cluster."""
    emu = connected_machines
    head, far = emu.nodes["m0"].node_id, emu.nodes["m1"].node_id
    cfg = load_config(overrides=[*OVERRIDES, "runtime.rollouts=3"])
    where = replicas.place_rollouts(cfg, head)
    try:
        assert where.node_ids == [far, far, head]  # the trainer's machine last, 2 GPUs left
        same = where.options[2]
        assert where.replace(2) is same  # its machine is alive: the same bundle
        emu.kill("m1")
        deadline = time.monotonic() + 60
        while far in nodes.alive_nodes() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert far not in nodes.alive_nodes()
        opts = where.replace(0)  # m1 is gone: a new group on the machine with room
        assert where.node_ids[0] == head and opts["num_gpus"] == 2
        probe = ray_run.actor(_Where, **opts).remote()
        assert ray.get(probe.node.remote(), timeout=60) == head
        with pytest.raises(LaminarError, match="do not fit"):
            where.replace(1)  # the trainer's machine is full now
    finally:
        where.release()


class _Where:
    def node(self) -> str:
        return nodes.current_node()
