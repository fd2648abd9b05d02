"""§4.3: a relay killed mid-broadcast is dropped and the chain rebuilt; a dead master is
replaced and the trainer told. Relays are processes; SIGKILL stands for a machine failure."""

from __future__ import annotations

import time

import pytest

from laminar.runtime.relay.control import ControlClient
from laminar.runtime.relay.manager import RelayManager
from laminar.runtime.relay.proc import RelayProcesses
from tests.relay.conftest import blob_for
from tests.relay.test_broadcast import assert_holds, tier

# 40 chunks, each forward delayed 20 ms: a broadcast lasts ~1 s, long enough to kill inside it.
CHUNKS, DELAY_S, NBYTES = 40, 0.02, 2 << 20


def _chunks_in_hand(relays: RelayProcesses, relay_id: str, version: int) -> int:
    info = next(i for i in relays.infos if i.id == relay_id)
    reply = ControlClient(info.host, info.ctrl_port).request({"op": "ping"})
    return reply["receiving"].get(str(version), 0)


def _wait_for(cond, timeout_s: float) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise TimeoutError("condition not met")
        time.sleep(0.01)
    return time.monotonic()


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_relay_killed_mid_broadcast_is_dropped_and_the_rest_complete(shm_base, transport):
    with RelayProcesses(5, shm_base, transport=transport, chunk_delay_s=DELAY_S) as relays:
        pub = tier(relays, transport, chunks=CHUNKS)
        try:
            pub.publish(0, blob_for(0, NBYTES))  # warm-up: links open, spare files ready
            pub.wait(0, timeout_s=60)
            blob = blob_for(1, NBYTES)
            pub.publish(1, blob)
            # kill relay-2 once the broadcast has reached past it (relay-3 holds chunks)
            _wait_for(lambda: _chunks_in_hand(relays, "relay-3", 1) >= 2, 30.0)
            t_kill = time.monotonic()
            relays.kill("relay-2")
            result = pub.wait(1, timeout_s=60)
            survivors = ["relay-0", "relay-1", "relay-3", "relay-4"]
            assert sorted(result["committed"]) == survivors
            assert result["dropped"] == ["relay-2"] and result["failed"] == {}
            (repair,) = result["rebuilds"]
            assert repair["by"] == "relay-1"
            assert 0 < repair["resumed_at_chunk"] < CHUNKS  # relay-3 kept what it had
            assert repair["t_resumed"] - t_kill < 1.0  # goal: rebuilt in < 1 s
            for info in relays.infos:
                if info.id != "relay-2":
                    assert_holds(info.root, 1, blob)
            # the heartbeats reach the same verdict, through the same policy function
            _wait_for(lambda: "relay-2" in pub.manager.dead, 2.0)
            assert pub.manager.chain.nodes == tuple(survivors)
            blob2 = blob_for(2, NBYTES)
            pub.publish(2, blob2)
            result2 = pub.wait(2, timeout_s=60)
            assert sorted(result2["committed"]) == survivors and result2["dropped"] == []
        finally:
            pub.close()


@pytest.mark.slow
def test_master_killed_mid_broadcast_is_replaced_and_the_trainer_told(shm_base):
    with RelayProcesses(4, shm_base, transport="tcp", chunk_delay_s=DELAY_S) as relays:
        pub = tier(relays, "tcp", chunks=CHUNKS)
        try:
            pub.publish(0, blob_for(0, NBYTES))
            pub.wait(0, timeout_s=60)
            blob = blob_for(1, NBYTES)
            pub.publish(1, blob)
            _wait_for(lambda: _chunks_in_hand(relays, "relay-1", 1) >= 2, 30.0)
            t_kill = time.monotonic()
            relays.kill("relay-0")
            t_told = _wait_for(lambda: pub.master_changes, 2.0)
            assert t_told - t_kill < 1.0
            assert pub.master_changes[0]["master"] == "relay-1" == pub.manager.master().id
            result = pub.wait(1, timeout_s=60)
            survivors = ["relay-1", "relay-2", "relay-3"]
            assert sorted(result["committed"]) == survivors
            for info in relays.infos[1:]:
                assert_holds(info.root, 1, blob)
            # later versions go to the new master; it is on another machine, so the trainer
            # streams them itself
            blob2 = blob_for(2, NBYTES)
            pub.publish(2, blob2)
            assert sorted(pub.wait(2, timeout_s=60)["committed"]) == survivors
            for info in relays.infos[1:]:
                assert_holds(info.root, 2, blob2)
        finally:
            pub.close()


@pytest.mark.slow
def test_a_silent_relay_is_dropped_after_its_beats_and_taken_back_when_it_answers(shm_base):
    with RelayProcesses(4, shm_base, transport="tcp") as relays:
        manager = RelayManager(relays.infos, trainer_machine="relay-0", heartbeat_s=0.1, misses=3)
        manager.start()
        try:
            relays.pause("relay-2")  # hung, not gone: its port still accepts, nothing answers
            _wait_for(lambda: "relay-2" in manager.dead, 10.0)
            assert manager.chain.nodes == ("relay-0", "relay-1", "relay-3")
            relays.resume("relay-2")
            _wait_for(lambda: "relay-2" not in manager.dead, 10.0)
            assert manager.chain.nodes == ("relay-0", "relay-1", "relay-2", "relay-3")
            assert [sorted(e) for e in manager.events] == [
                ["chain", "dead", "master", "reason", "t"],
                ["chain", "rejoined", "t"],
            ]
        finally:
            manager.stop()
