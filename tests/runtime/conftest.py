"""Fixtures of the runtime tests: emulated machines (``laminar.runtime.cluster.emulate``).

``machines``: one cluster of two emulated machines (``m0`` the head, ``m1``), 4 fake GPUs and
2 CPUs each, shared by the tests of a module (starting it costs ~3 s); the test process is *not*
connected to it, so a test either runs ``laminar train`` with ``runtime.address=machines.address``
or connects with ``connected_machines``. Start a differently shaped one with
``EmulatedCluster(...)`` in a fixture of your own.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def machines():
    from laminar.runtime.cluster.emulate import EmulatedCluster

    with EmulatedCluster(machines=2, gpus_per_machine=4, cpus_per_machine=2) as emu:
        yield emu


@pytest.fixture
def connected_machines(machines):
    """``machines`` with this process connected as a driver (disconnected after the test)."""
    import ray

    machines.connect()
    _wait_devices_free()
    try:
        yield machines
    finally:
        ray.shutdown()


def _wait_devices_free(timeout_s: float = 60.0) -> None:
    """Wait until every alive machine reports all its GPUs free: the actors and placement
    groups of the previous test (its driver disconnected) are released asynchronously."""
    import time

    import ray

    from laminar.runtime.cluster.replicas import free_gpus

    deadline = time.monotonic() + timeout_s
    while True:
        total = {x["NodeID"]: x["Resources"].get("GPU", 0.0) for x in ray.nodes() if x["Alive"]}
        free = free_gpus(list(total))
        if all(free[n] >= total[n] for n in total):
            return
        assert time.monotonic() < deadline, f"GPUs still held after {timeout_s:.0f} s: {free}"
        time.sleep(0.2)
