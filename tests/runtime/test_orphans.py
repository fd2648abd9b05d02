"""A driver that dies, however it dies, leaves no process of its run behind (issue 32).

The mechanisms (``laminar/runtime/cluster/lifeline.py``) are checked one by one on plain
processes (fast); end to end, a ``laminar train`` driver SIGKILLed while it trains is
``tests/runtime/test_faults_e2e.py`` (its resumed session, before the second resume). A
process belongs to a run when its environment or command line names ``laminar-<run id>``
(what ``laminar.runtime.cluster.procfs.sweep_run_processes`` matches).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

# Measured on the 2-core development VM (laminar/runtime/README.md, "Driver death"): every
# process of a tiny-cpu run gone ~1-3 s after the driver's SIGKILL. The bound leaves room for
# a loaded machine; without the guardian, Ray's agents alone stayed ~62 s.
DRIVER_DEATH_BOUND_S = 45.0

DRIVER = """
import os, subprocess, sys, time
from laminar.runtime.cluster.lifeline import Guardian, child_env
run_id = sys.argv[1]
guardian = Guardian(run_id).start()
mark = {**os.environ, "TMPDIR": f"/tmp/laminar-{run_id}/tmp"}
other = {**os.environ, "TMPDIR": "/tmp/laminar-someone-else/tmp"}
# own sessions: no signal of the kernel's or the shell's reaches them through the driver
marked = subprocess.Popen(["sleep", "300"], env=mark, start_new_session=True)
unmarked = subprocess.Popen(["sleep", "300"], env=other, start_new_session=True)
tied = subprocess.Popen([sys.executable, "-c",
    "from laminar.runtime.cluster.lifeline import parent_from_env, tie_to_parent\\n"
    "tie_to_parent(parent_from_env()); import time; time.sleep(300)"], env=child_env())
from laminar.runtime.cluster.nodes import record_engine_shm
queue = f"/dev/shm/psm_test_{run_id}"  # as a SIGKILLed engine's message queue
open(queue, "wb").close()
record_engine_shm(run_id, "rollout-0", [queue])
print(marked.pid, unmarked.pid, tied.pid, guardian.proc.pid, flush=True)
time.sleep(300)
"""

SPAWNER = """
import multiprocessing as mp, sys, time
from laminar.runtime.cluster.lifeline import tie_to_multiprocessing_parent

def child():
    tie_to_multiprocessing_parent()
    time.sleep(300)

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    print(p.pid, flush=True)
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextlib.contextmanager
def _child(argv: list[str], env: dict | None = None):
    """``python argv``: its first line of output (pids), and kill whatever is left."""
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    try:
        pids = [int(x) for x in proc.stdout.readline().split()]
        yield proc, pids
    finally:
        for pid in [proc.pid, *pids]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_guardian_sweeps_its_run_when_the_driver_is_sigkilled():
    run_id = f"test{uuid.uuid4().hex[:8]}"
    queue = Path(f"/dev/shm/psm_test_{run_id}")
    try:
        with _child(["-c", DRIVER, run_id]) as (driver, (marked, unmarked, tied, guardian)):
            time.sleep(0.5)  # the guardian is waiting on its pipe
            assert all(_alive(p) for p in (marked, unmarked, tied, guardian))
            assert queue.exists()
            os.kill(driver.pid, signal.SIGKILL)
            t = time.monotonic()
            assert _gone_within([marked, tied, guardian], 15.0), "left after the driver's death"
            print(f"swept {time.monotonic() - t:.2f} s after the SIGKILL")
            assert _alive(unmarked), "the guardian killed a process of another run"
            assert not queue.exists(), "the noted engine shared memory outlived the guardian"
    finally:
        queue.unlink(missing_ok=True)
        shutil.rmtree(Path(tempfile.gettempdir()) / f"laminar-{run_id}", ignore_errors=True)


def test_a_multiprocessing_child_dies_with_its_parent_only_when_asked(tmp_path):
    """As vLLM's engine core and workers: tied through laminar's vLLM plugin when the rollout
    actor asks (``LAMINAR_TIE_TO_PARENT=1``), else left alone."""
    script = tmp_path / "spawner.py"  # spawn pickles the target by module: a real file
    script.write_text(SPAWNER)
    for asked in (True, False):
        env = {**os.environ, "LAMINAR_TIE_TO_PARENT": "1" if asked else "0"}
        with _child([str(script)], env=env) as (parent, (child,)):
            time.sleep(1.0)  # the child has tied itself (or not)
            assert _alive(child)
            os.kill(parent.pid, signal.SIGKILL)
            assert _gone_within([child], 5.0) is asked


def test_a_tied_child_whose_parent_is_already_gone_exits_at_once():
    from laminar.runtime.cluster.lifeline import tie_to_parent

    code = "import sys; from laminar.runtime.cluster.lifeline import tie_to_parent\n"
    code += "tie_to_parent(1); print('not reached')"  # pid 1 is never our parent
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "not reached" not in done.stdout
    tie_to_parent(None)  # nothing to tie to: a no-op, this process goes on


def run_processes(run_id: str) -> list[str]:
    """Live processes of this user whose environment or command line names the run."""
    mark, found = f"laminar-{run_id}".encode(), []
    for proc in psutil.process_iter(["pid", "status", "name"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
            continue
        try:
            env = Path(f"/proc/{proc.pid}/environ").read_bytes()
            cmd = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if mark in env or mark in cmd:
            found.append(f"{proc.pid} {proc.info['name']}")
    return found
