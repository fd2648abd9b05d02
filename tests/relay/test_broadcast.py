"""Chain broadcast across relay processes: every relay ends with the trainer's exact bytes."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from laminar.runtime.relay.bench import relay_cpu_s
from laminar.runtime.relay.manager import RelayManager
from laminar.runtime.relay.proc import RelayProcesses
from laminar.runtime.relay.publisher import RelayPublisher, RelaySource
from laminar.runtime.weights import MANIFEST_NAME, WEIGHTS_NAME, WeightPublisher, WeightSource
from tests.relay.conftest import CONFIG_JSON, blob_for


def tier(relays: RelayProcesses, transport: str, **kw) -> RelayPublisher:
    # a killed relay refuses its port at once; silence must last 2 s (this machine is shared
    # and heavily loaded at times) before a live relay is declared dead
    manager = RelayManager(
        relays.infos, trainer_machine="relay-0", heartbeat_s=0.2, misses=10
    ).start()
    return RelayPublisher(
        manager, config_json=CONFIG_JSON, machine="relay-0", transport=transport, **kw
    )


def assert_holds(root: str, version: int, blob: bytes) -> None:
    got = RelaySource(root).latest()
    assert got is not None and got[0] == version
    path = Path(got[1])
    assert (path / WEIGHTS_NAME).read_bytes() == blob
    assert (
        json.loads((path / MANIFEST_NAME).read_text())["sha256"] == hashlib.sha256(blob).hexdigest()
    )
    assert (path / "config.json").read_text() == CONFIG_JSON


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_every_relay_holds_the_trainers_bytes_version_after_version(shm_base, transport):
    with RelayProcesses(4, shm_base, transport=transport, keep=2) as relays:
        pub = tier(relays, transport, chunks=7)
        assert isinstance(pub, WeightPublisher) and isinstance(RelaySource("x"), WeightSource)
        try:
            for version in range(4):
                blob = blob_for(version, (3 << 20) + 1001)  # chunks of unequal length
                pub.publish(version, blob)
                result = pub.wait(version, timeout_s=60)
                assert set(result["committed"]) == {r.id for r in relays.infos}
                assert result["failed"] == {} and result["dropped"] == []
                for info in relays.infos:
                    assert_holds(info.root, version, blob)
            # keep=2: older versions are dropped from shared memory (just after each commit)
            names: list[str] = []
            for _ in range(200):
                names = [p.name for p in sorted(Path(relays.infos[3].root).glob("v*"))]
                if len(names) == 2:
                    break
                time.sleep(0.01)
            assert names == ["v0000000002", "v0000000003"]
        finally:
            pub.close()


def test_optimal_chunks_drive_the_split(shm_base):
    with RelayProcesses(3, shm_base, transport="tcp") as relays:
        # α large against β·M: the policy says one chunk; α small: many.
        slow_start = tier(relays, "tcp", alpha_s=1.0, link_bytes_per_s=1e9)
        fast_start = tier(relays, "tcp", alpha_s=1e-6, link_bytes_per_s=1e8)
        try:
            nbytes = 1 << 20
            assert slow_start.chunk_bytes(nbytes) == nbytes
            assert fast_start.chunk_bytes(nbytes) < nbytes // 8
            blob = blob_for(7, nbytes)
            fast_start.publish(7, blob)
            assert fast_start.wait(7, timeout_s=30)["k"] > 8
            for info in relays.infos:
                assert_holds(info.root, 7, blob)
        finally:
            slow_start.close()
            fast_start.close()


@pytest.mark.slow
def test_back_to_back_publishes_do_not_wait_on_each_other(shm_base):
    """The trainer publishes faster than the tier acknowledges: every publish returns and the
    newest version reaches every relay (a hand-over once waited on a refill queued behind it)."""
    import threading

    with RelayProcesses(3, shm_base, transport="tcp") as relays:
        pub = tier(relays, "tcp", chunks=4)
        done: list[int] = []

        def trainer() -> None:
            for version in range(30):
                pub.publish(version, blob_for(version, 256 << 10))
                done.append(version)

        try:
            t = threading.Thread(target=trainer, daemon=True)
            t.start()
            t.join(120)
            assert done == list(range(30)), f"publish stuck after version {done[-1:]}"
            result = pub.wait(29, timeout_s=60)
            assert result.get("skipped") or set(result["committed"]) == {r.id for r in relays.infos}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                got = [RelaySource(r.root).latest() for r in relays.infos]
                if all(g is not None and g[0] == 29 for g in got):
                    break
                time.sleep(0.05)
            for info in relays.infos:
                assert_holds(info.root, 29, blob_for(29, 256 << 10))
        finally:
            pub.close()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_relays_between_broadcasts_do_not_spin(shm_base, transport):
    """Relays live on rollout machines: with their links open and nothing to send they must
    sleep (ucxx awaits a pending receive by spinning the event loop unless its notifier
    thread is on: ~1 core per relay)."""
    with RelayProcesses(3, shm_base, transport=transport) as relays:
        pub = tier(relays, transport, chunks=4)
        try:
            pub.publish(0, blob_for(0, 1 << 20))
            assert len(pub.wait(0, timeout_s=60)["committed"]) == 3
            time.sleep(1.0)
            before = relay_cpu_s(relays)
            time.sleep(3.0)
            used = relay_cpu_s(relays) - before
            assert used < 0.6, f"3 idle relays used {used:.2f} CPU-s in 3 s"
        finally:
            pub.close()
