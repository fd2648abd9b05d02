"""Relay processes outlive nobody: a parent killed outright leaves no relay behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time

ORPHANING_PARENT = """
import os, sys
from laminar.runtime.relay.proc import RelayProcesses
relays = RelayProcesses(2, sys.argv[1])
print(" ".join(str(p.pid) for p in relays.procs.values()), flush=True)
os._exit(0)  # no cleanup at all, like SIGKILL
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_relays_stop_themselves_when_their_parent_dies(shm_base):
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", ORPHANING_PARENT, str(shm_base)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "orphaned relays kept running"
    assert not any(shm_base.glob("relay-*/v*")), "orphaned relays left their stores"
