"""Driver sessions of a run directory (``laminar.runtime.cluster.sessions``): recorded, ended,
refused beside a live one, and what a killed one left (its marked processes, its directories)
removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from laminar.errors import LaminarError
from laminar.runtime.cluster import sessions
from laminar.runtime.cluster.nodes import SCRATCH_ROOT_ENV, SHM_ROOT_ENV


def test_a_session_is_stale_until_it_ends_and_a_live_one_is_refused(tmp_path):
    sessions.begin(tmp_path, "aaaaaaaaaa")
    assert [r["run_id"] for r in sessions.stale(tmp_path)] == ["aaaaaaaaaa"]
    with pytest.raises(LaminarError, match=f"pid {os.getpid()}"):
        sessions.check_not_running(tmp_path)  # this very process is its driver
    sessions.end(tmp_path, "aaaaaaaaaa")
    assert sessions.stale(tmp_path) == []
    sessions.check_not_running(tmp_path)
    # a killed driver: its pid is gone (or reused by another process: other start time)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sessions.begin(tmp_path, "bbbbbbbbbb")
    rows = sessions.read_sessions(tmp_path)
    rows[-1].update(pid=dead.pid)
    (tmp_path / sessions.SESSIONS).write_text(json.dumps(rows))
    sessions.check_not_running(tmp_path)
    assert [r["run_id"] for r in sessions.stale(tmp_path)] == ["bbbbbbbbbb"]


def test_what_a_killed_session_left_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv(SHM_ROOT_ENV, str(tmp_path / "shm"))
    monkeypatch.setenv(SCRATCH_ROOT_ENV, str(tmp_path / "tmp"))
    dirs = [tmp_path / root / "laminar-ccc" for root in ("shm", "tmp")]
    for d in dirs:
        (d / "job").mkdir(parents=True)
    other = tmp_path / "shm" / "laminar-ddd"  # another run's: kept
    other.mkdir()
    env = {**os.environ, "TMPDIR": str(dirs[1])}  # how a run marks its processes
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=env)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        time.sleep(0.2)
        (tally,) = sessions.reap_local([{"run_id": "ccc"}])
        assert tally == {"run_id": "ccc", "killed": 1, "removed": [str(d) for d in dirs]}
        assert orphan.wait(10) == -9
        assert bystander.poll() is None and other.exists()
        assert not any(d.exists() for d in dirs)
    finally:
        orphan.kill()
        bystander.kill()
