"""Driver sessions of a run directory: recorded while they run, cleaned up after if killed.

Each ``laminar train`` driver that writes a run directory (the first run, then every
``--resume``) is a session with a Ray run id of its own, which names its scratch directories on
every machine (``laminar.runtime.cluster.nodes``) and marks every process it started. A session that
ends in any way Python sees (the end, an error, SIGTERM, Ctrl-C) removes them itself and is
recorded as ended in ``sessions.json``. One that is SIGKILLed, or whose machine is lost, does
not: its shared memory (base model, weight versions), temp files and any orphaned engine stay.
``--resume`` refuses to run beside a session that is still alive on this host
(:func:`check_not_running`) and removes what the dead ones left, on every machine
(:func:`reap_stale`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from pathlib import Path

from laminar.errors import LaminarError

SESSIONS = "sessions.json"


# A session's run id (``ray_run``: ``uuid4().hex[:10]``). It names directories to remove and
# marks processes to kill, so a run directory from elsewhere must not choose it: an empty id
# would mark every process with "laminar-" in its environment, "x/../.." a path outside.
RUN_ID = re.compile(r"[0-9a-f]{10}")


def read_sessions(run_dir: str | Path) -> list[dict]:
    """The sessions recorded in ``run_dir`` (none without ``sessions.json``), read with bounds;
    a row this code did not write is an error naming the file (exit 2), never acted on."""
    from laminar.inputfile import InputFileError, load_json

    path = Path(run_dir) / SESSIONS
    if not path.exists():
        return []
    rows = load_json(path, kind="driver sessions (sessions.json)", max_bytes=16 << 20)
    if not isinstance(rows, list):
        raise InputFileError(path, "expected a list of sessions")
    for i, row in enumerate(rows):
        ok = isinstance(row, dict) and isinstance(row.get("run_id"), str)
        if not ok or not RUN_ID.fullmatch(row["run_id"]):
            shown = str(row.get("run_id") if isinstance(row, dict) else row)[:40]
            raise InputFileError(path, f"session {i + 1}: {shown!r} is not a session's run id")
    return rows


def _write(run_dir: Path, rows: list[dict]) -> None:
    tmp = run_dir / f".{SESSIONS}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rows, indent=1) + "\n")
    os.replace(tmp, run_dir / SESSIONS)


def begin(run_dir: Path, run_id: str) -> None:
    """Record this driver as a session of ``run_dir`` (run id, host, pid and its start time)."""
    import psutil

    row = {
        "run_id": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": psutil.Process().create_time(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ended": False,
    }
    _write(run_dir, [*read_sessions(run_dir), row])


def end(run_dir: Path, run_id: str) -> None:
    """This session cleaned up after itself."""
    rows = read_sessions(run_dir)
    for row in rows:
        if row.get("run_id") == run_id:
            row["ended"] = True
    _write(run_dir, rows)


def stale(run_dir: str | Path) -> list[dict]:
    """Sessions that did not end (killed, or their machine lost)."""
    return [r for r in read_sessions(run_dir) if not r.get("ended")]


def _alive_here(row: dict) -> bool:
    """The session's driver still runs on this host (same pid, same start time)."""
    import psutil

    if row.get("host") != socket.gethostname():
        return False
    try:
        return psutil.Process(int(row["pid"])).create_time() == row.get("pid_started")
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def check_not_running(run_dir: str | Path) -> None:
    """A clear error when a session of ``run_dir`` still runs on this host (two drivers would
    write one directory)."""
    for row in stale(run_dir):
        if _alive_here(row):
            raise LaminarError(
                f"{run_dir}: still being written by laminar train (pid {row['pid']}, started "
                f"{row.get('started_utc', '?')}); stop it before --resume"
            )


def reap_here(run_id: str) -> dict:
    """Kill what is left on this machine of session ``run_id`` (processes whose environment
    carries its mark) and remove its directories; returns both."""
    from laminar.runtime.cluster.nodes import remove_run_here
    from laminar.runtime.cluster.procfs import sweep_run_processes

    return {"killed": sweep_run_processes(run_id), "removed": remove_run_here(run_id)}


def reap_local(rows: list[dict]) -> list[dict]:
    """:func:`reap_here` for each stale session on the driver's host, before this session
    points the scratch variables elsewhere; returns a tally per session."""
    return [_merge({"run_id": r["run_id"], "killed": 0, "removed": []}, reap_here(r["run_id"]))
            for r in rows]  # fmt: skip


def reap_nodes(
    run_dir: Path, rows: list[dict], tallies: list[dict], timeout_s: float = 60.0
) -> None:
    """:func:`reap_here` for each stale session on every alive Ray node (this process must be
    connected to Ray), added to ``tallies`` (from :func:`reap_local`); the sessions are then
    ended in ``run_dir``."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from laminar.runtime.cluster.nodes import alive_nodes

    task = ray.remote(reap_here)
    for row, found in zip(rows, tallies, strict=True):
        for node in alive_nodes():
            where = NodeAffinitySchedulingStrategy(node, soft=False)
            ref = task.options(num_cpus=0, scheduling_strategy=where).remote(row["run_id"])
            with contextlib.suppress(Exception):  # a machine going meanwhile: nothing there
                _merge(found, ray.get(ref, timeout=timeout_s))
        end(run_dir, row["run_id"])


def _merge(found: dict, part: dict) -> dict:
    found["killed"] += len(part["killed"])
    found["removed"] += [p for p in part["removed"] if p not in found["removed"]]
    return found
