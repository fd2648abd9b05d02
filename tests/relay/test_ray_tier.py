"""The relay tier on Ray: one RelayWorker per node of a ``ray.cluster_utils.Cluster``, the
trainer publishing through a RelayWeightPath, a rollout stand-in reading its own node's relay,
and a node failure handled by the heartbeats."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from laminar.config import load_config
from laminar.runtime.relay.tier import RelayWeightPath, weight_path_for
from laminar.runtime.weights import WEIGHTS_NAME
from tests.relay.conftest import CONFIG_JSON, blob_for

ray = pytest.importorskip("ray")


class Reader:
    """A rollout stand-in: reads the newest version from the relay on its own node."""

    def __init__(self, path: RelayWeightPath):
        self.path = path

    def read(self) -> tuple[int, bytes, str] | None:
        from laminar.runtime.relay.tier import current_machine

        got = self.path.latest()
        if got is None:
            return None
        return got[0], Path(got[1], WEIGHTS_NAME).read_bytes(), current_machine()


@pytest.fixture
def cluster(shm_base):
    from ray.cluster_utils import Cluster

    os.environ.update(RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes = [c.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    try:
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.mark.slow
def test_relay_workers_on_ray_nodes_carry_weights_and_survive_a_node(cluster, shm_base):
    c, nodes = cluster
    cfg = load_config(
        overrides=[
            "relay.enabled=true",
            "relay.transport=tcp",
            "relay.chunks=4",
            "relay.dead_after_beats=10",
        ]
    )
    path, close = weight_path_for(cfg, shm_base, CONFIG_JSON)
    try:
        assert isinstance(path, RelayWeightPath) and len(path.relays) == 3
        assert len({r["machine"] for r in path.relays}) == 3  # one relay per node
        for version in range(2):
            blob = blob_for(version, 1 << 20)
            path.publish(version, blob)  # the driver stands in for the trainer (head node)
            result = path.publisher.wait(version, timeout_s=60)
            assert set(result["committed"]) == {r["id"] for r in path.relays}
        assert path.publisher.manager.master().machine == ray.get_runtime_context().get_node_id()
        far = nodes[1].node_id
        reader = (
            ray.remote(Reader)
            .options(
                num_cpus=0,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    far, soft=False
                ),
            )
            .remote(path)
        )
        version, data, machine = ray.get(reader.read.remote())
        assert (version, data, machine) == (1, blob, far)  # read from its own node's relay

        # a machine failure: its relay goes with it; the heartbeats drop it from the chain
        c.remove_node(nodes[0], allow_graceful=False)
        dead = next(r["id"] for r in path.relays if r["machine"] == nodes[0].node_id)
        t0 = time.monotonic()
        while dead not in path.publisher.manager.dead and time.monotonic() - t0 < 5:
            time.sleep(0.05)
        assert dead in path.publisher.manager.dead
        blob = blob_for(2, 1 << 20)
        path.publish(2, blob)
        result = path.publisher.wait(2, timeout_s=60)
        assert set(result["committed"]) == {r["id"] for r in path.relays} - {dead}
        assert ray.get(reader.read.remote())[:2] == (2, blob)  # the far node kept reading
    finally:
        close()
    for relay in path.relays:  # the survivors freed their shared memory
        assert (relay["id"] == dead) == Path(relay["root"]).exists()
