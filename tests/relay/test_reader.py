"""A rollout stand-in keeps working while versions are broadcast: it never sees torn weights,
never goes back a version, and is never blocked (readers only list and open files; a version
appears by one rename)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import time
from pathlib import Path

import pytest

from laminar.runtime.relay.proc import RelayProcesses
from laminar.runtime.relay.publisher import RelaySource
from laminar.runtime.weights import MANIFEST_NAME, WEIGHTS_NAME
from tests.relay.conftest import blob_for
from tests.relay.test_broadcast import tier


def _rollout(root: str, stop, out, newest) -> None:
    """Loop like a rollout: a little 'decoding', then check for a newer version and load it."""
    import numpy as np

    src, seen, torn, steps, max_latest_s = RelaySource(root, verify=False), [], 0, 0, 0.0
    work = np.ones((256, 256), np.float32) / 256
    while not stop.is_set():
        work = np.tanh(work @ work)  # a decode step's worth of compute
        t0 = time.monotonic()
        got = src.latest()
        max_latest_s = max(max_latest_s, time.monotonic() - t0)
        if got is not None and (not seen or got[0] != seen[-1]):
            data = Path(got[1], WEIGHTS_NAME).read_bytes()
            manifest = json.loads(Path(got[1], MANIFEST_NAME).read_text())
            torn += hashlib.sha256(data).hexdigest() != manifest["sha256"]
            seen.append(got[0])
            newest.value = got[0]
        steps += 1
    out.put({"seen": seen, "torn": torn, "steps": steps, "max_latest_s": max_latest_s})


@pytest.mark.slow
@pytest.mark.parametrize("kill_a_relay", [False, True])
def test_a_reader_is_not_interrupted_by_broadcasts(shm_base, kill_a_relay):
    """The reader sits on the last relay; with ``kill_a_relay``, a relay upstream of it dies
    in the middle of version 3's broadcast (a failed machine elsewhere, §3.3)."""
    ctx = mp.get_context("spawn")
    with RelayProcesses(4, shm_base, transport="tcp", keep=3) as relays:
        pub = tier(relays, "tcp", chunks=16)
        stop, out, newest = ctx.Event(), ctx.Queue(), ctx.Value("i", -1)
        reader = ctx.Process(target=_rollout, args=(relays.infos[3].root, stop, out, newest))
        reader.start()
        try:
            time.sleep(1.0)  # the reader is up and stepping before the first version
            for version in range(6):
                pub.publish(version, blob_for(version, 8 << 20))
                if kill_a_relay and version == 3:
                    relays.kill("relay-1")
                result = pub.wait(version, timeout_s=60)
                assert "relay-3" in result["committed"]
            deadline = time.monotonic() + 30
            while newest.value != 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            report = out.get(timeout=30)
        finally:
            stop.set()
            reader.join(10)
            if reader.is_alive():
                reader.kill()
            pub.close()
    assert report["torn"] == 0
    assert report["seen"] == sorted(set(report["seen"])) and report["seen"][-1] == 5
    assert report["steps"] > 50
    # asking for the newest version lists a directory and reads a manifest: no lock, no wait
    # for a broadcast (the bound is loose: this machine is shared and often overloaded)
    assert report["max_latest_s"] < 2.0
