"""Every process a run starts dies with its driver, however the driver dies (issue 32).

A SIGKILLed driver runs no teardown, so nothing it would do at the end can be relied on. What
ends each process instead, by who started it:

- **a child started with** :func:`tie_to_parent` **first thing** (the speed probe, standalone
  relays, every vLLM engine process of a rollout): the kernel sends it SIGKILL when its parent
  dies (``prctl(PR_SET_PDEATHSIG)``), so an engine dies with its rollout actor (and a vLLM
  worker with its engine core) whatever killed that;
- **the job's Ray workers** (actors, tasks, on any machine): Ray ends a job's non-detached
  actors when its driver disconnects; a local Ray's own processes (GCS, raylet) carry the same
  kernel signal towards the driver (Ray's "fate sharing"), and its workers exit once their
  raylet is gone. Measured (Ray 2.60, ``laminar/runtime/README.md``, "Driver death"): actors
  and their children within ~2 s, with a local Ray and with ``--address``; but a local Ray's
  dashboard and runtime-env agents lived ~62 s more (they report the raylet's death to a GCS
  that is gone and wait out its reconnect timeout);
- **whatever is left on the driver's machine**: a :class:`Guardian`, a small process the driver
  starts in a session of its own, holding the read end of a pipe whose write end only the
  driver holds. The pipe's EOF means the driver is gone (or done); the guardian then kills
  every process of this user whose environment names the run (``laminar-<run id>``, which the
  run's scratch variables put into every process it starts on this machine) and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PARENT_ENV = "LAMINAR_PARENT_PID"  # the pid a child started by a laminar process must outlive
TIE_ENV = "LAMINAR_TIE_TO_PARENT"  # "1": a multiprocessing child dies with its parent
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SWEEP_PASSES = 5  # a process may start another while the sweep runs; sweep until none is left
SWEEP_PAUSE_S = 0.5


def tie_to_parent(parent_pid: int | None) -> None:
    """Let the kernel SIGKILL this process when its parent dies; exit now if ``parent_pid``
    (the parent it was started by) is already gone. Call it first thing in the child. The
    signal follows the *thread* that started the child: every caller here is started by a
    thread that lives as long as its process (a main thread, a Ray actor's event loop). Not
    on Linux: nothing (the :class:`Guardian` and Ray still apply)."""
    if not sys.platform.startswith("linux") or parent_pid is None:
        return
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not permitted here: the guardian and Ray's own checks remain
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


def tie_to_multiprocessing_parent() -> None:
    """:func:`tie_to_parent` in a process that ``multiprocessing`` started (vLLM's engine core
    and its workers; vLLM calls this through its plugin, ``laminar.runtime.rollout.vllm_spin``)
    when the run asked for it (:data:`TIE_ENV`, set for rollout actors and so inherited by
    their engines): other uses of vLLM in the same environment are left alone."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None and os.environ.get(TIE_ENV) == "1":
        tie_to_parent(parent.pid)


def parent_from_env() -> int | None:
    """The parent pid a laminar process put in :data:`PARENT_ENV` (None when unset)."""
    text = os.environ.get(PARENT_ENV, "")
    return int(text) if text.isdigit() else None


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) plus :data:`PARENT_ENV` naming this process."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


class Guardian:
    """The run's last line on the driver's machine (module docstring): started before Ray,
    closed after the run's own teardown; a driver that dies in between closes it by dying."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.proc: subprocess.Popen | None = None

    def start(self) -> Guardian:
        # A session of its own: a Ctrl-C or a kill of the driver's process group must not take
        # it first. The pipe's write end is not inheritable (PEP 446), so no process the
        # driver starts holds the pipe open after the driver is gone.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__, self.run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def close(self, timeout_s: float = 30.0) -> None:
        """The run ended in a way Python sees: the guardian sweeps once (nothing should be
        left) and exits."""
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def guard(run_id: str) -> int:
    """The guardian's body: wait for EOF on stdin, then sweep the run's processes."""
    from laminar.runtime.cluster.nodes import unlink_engine_shm
    from laminar.runtime.cluster.procfs import sweep_run_processes

    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(4096):
            pass  # nothing is ever written; only EOF matters
    for _ in range(SWEEP_PASSES):
        if not sweep_run_processes(run_id):
            break
        time.sleep(SWEEP_PAUSE_S)
    # Engines that died with their rollout (SIGKILL) left their message queues in /dev/shm.
    unlink_engine_shm(run_id)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # only EOF ends the wait
    sys.exit(guard(sys.argv[1]))
