"""Emulated machines: distinct resources, labels and filesystem roots per machine; node-local
paths resolve on the machine that resolves them; a killed machine takes its actors with it."""

from __future__ import annotations

import os

import pytest

from laminar.runtime.cluster import nodes
from laminar.runtime.cluster.emulate import MACHINE_LABEL, machine_resource

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


class Probe:
    """Reports where it runs and how a node path resolves there."""

    def where(self, path: nodes.NodePath) -> dict:
        return {
            "node": nodes.current_node(),
            "resolved": str(path.resolve()),
            "tmpdir": os.environ.get("TMPDIR", ""),
            "gpus": ray.get_gpu_ids(),
        }

    def enter(self, run_id: str) -> dict:
        return nodes.enter_run(run_id)


def _probe_on(node_id: str, **options):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return ray.remote(Probe).options(num_cpus=0, scheduling_strategy=strategy, **options).remote()


def test_machines_have_their_own_resources_labels_and_roots(connected_machines):
    emu = connected_machines
    by_id = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    assert {m.node_id for m in emu.nodes.values()} == set(by_id)
    for name, m in emu.nodes.items():
        node = by_id[m.node_id]
        assert node["Resources"]["GPU"] == 4 and node["Resources"]["CPU"] == 2
        assert node["Resources"][machine_resource(name)] == 1
        assert node["Labels"][MACHINE_LABEL] == name
    roots = [m.root for m in emu.nodes.values()]
    assert len(set(roots)) == len(roots)


def test_node_paths_resolve_on_the_machine_that_resolves_them(connected_machines):
    emu = connected_machines
    path = nodes.NodePath("r1", "shm") / "job" / "base"
    seen = {}
    for name, m in emu.nodes.items():
        probe = _probe_on(m.node_id, num_gpus=2)
        got = ray.get(probe.where.remote(path))
        assert got["node"] == m.node_id and len(got["gpus"]) == 2
        assert emu.owner_of(got["resolved"]) is m, (name, got)
        assert got["resolved"].endswith("laminar-r1/job/base")
        assert emu.owner_of(got["tmpdir"]) is m
        env = ray.get(probe.enter.remote("r1"))
        own = {k: v for k, v in env.items() if k not in nodes.COMPILE_CACHE_VARS}  # the host's
        assert own and all(emu.owner_of(v) is m for v in own.values())
        seen[name] = got["resolved"]
        ray.kill(probe)
    assert len(set(seen.values())) == len(emu.nodes)
    # the driver's own resolution is on no machine: it must never be handed to an actor
    assert emu.owner_of(path.resolve()) is None
    with pytest.raises(TypeError):
        os.fspath(path)  # type: ignore[arg-type]
    removed = nodes.remove_run_everywhere("r1")
    assert {n for n, r in removed.items() if r} == {m.node_id for m in emu.nodes.values()}
    assert not any((m.shm_root / "laminar-r1").exists() for m in emu.nodes.values())


def test_a_killed_machine_takes_its_actors_and_a_new_one_joins(connected_machines):
    emu = connected_machines
    victim = emu.nodes["m1"]
    probe = _probe_on(victim.node_id)
    ray.get(probe.where.remote(nodes.NodePath("r2", "shm")))
    emu.kill("m1")
    with pytest.raises((ray.exceptions.ActorUnavailableError, ray.exceptions.ActorDiedError)):
        ray.get(probe.where.remote(nodes.NodePath("r2", "shm")), timeout=60)
    with pytest.raises(ValueError, match="head"):
        emu.kill("m0")
    fresh = emu.add_machine()
    assert fresh.name not in ("m0",) and fresh.node_id != victim.node_id
    got = ray.get(_probe_on(fresh.node_id).where.remote(nodes.NodePath("r2", "shm")))
    assert emu.owner_of(got["resolved"]) is fresh
