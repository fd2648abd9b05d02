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


def _rollout(root: str, stop, out) -> None:
    """Loop like a rollout: a little 'decoding', then check for a newer version and load it."""
    import numpy as np

    src, seen, torn, steps, max_gap_s = RelaySource(root, verify=False), [], 0, 0, 0.0
    work = np.ones((256, 256), np.float32)
    last = time.monotonic()
    while not stop.is_set():
        work = work @ work * 1e-3 + 1.0  # a decode step's worth of compute
        got = src.latest()
        if got is not None and (not seen or got[0] != seen[-1]):
            data = Path(got[1], WEIGHTS_NAME).read_bytes()
            manifest = json.loads(Path(got[1], MANIFEST_NAME).read_text())
            torn += hashlib.sha256(data).hexdigest() != manifest["sha256"]
            seen.append(got[0])
        steps += 1
        now = time.monotonic()
        max_gap_s, last = max(max_gap_s, now - last), now
    out.put({"seen": seen, "torn": torn, "steps": steps, "max_gap_s": max_gap_s})


@pytest.mark.slow
def test_a_reader_is_not_interrupted_by_broadcasts(shm_base):
    ctx = mp.get_context("spawn")
    with RelayProcesses(3, shm_base, transport="tcp", keep=3) as relays:
        pub = tier(relays, "tcp", chunks=16)
        stop, out = ctx.Event(), ctx.Queue()
        reader = ctx.Process(target=_rollout, args=(relays.infos[2].root, stop, out))
        reader.start()
        try:
            time.sleep(1.0)  # the reader is up and stepping before the first version
            for version in range(6):
                pub.publish(version, blob_for(version, 8 << 20))
                pub.wait(version, timeout_s=60)
            time.sleep(0.3)
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
    assert report["max_gap_s"] < 1.0  # never blocked behind a broadcast
