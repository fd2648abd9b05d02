"""What a live process maps from /dev/shm, and sweeping a run's leftover processes off this host."""

from __future__ import annotations

import contextlib
import os


def shm_files_of(pid: int) -> set[str]:
    """The /dev/shm files process ``pid`` maps and that still have a name (its exit handlers,
    which would unlink them, never run under SIGKILL); empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
    except OSError:
        return set()
    # A maps line: address perms offset dev inode [path]; a path may hold spaces.
    paths = {line.split(maxsplit=5)[-1] for line in maps if " /dev/shm/" in line}
    return {p for p in paths if p.startswith("/dev/shm/") and not p.endswith("(deleted)")}


def sweep_run_processes(run_id: str) -> list[int]:
    """Kill what is left of a run on this host after Ray stopped: processes whose environment
    names the run's directories (``laminar-<run id>``: Ray gave them to every actor, whose
    engines inherit them), e.g. the engine of a replacement killed while it was starting."""
    import psutil

    mark = f"laminar-{run_id}".encode()
    me = os.getpid()
    mine = {me, *(p.pid for p in psutil.Process(me).parents())}
    killed, shm = [], set()
    for proc in psutil.process_iter(["pid", "uids"]):
        if proc.pid in mine or proc.info["uids"] is None or proc.info["uids"].real != os.getuid():
            continue
        try:
            env = open(f"/proc/{proc.pid}/environ", "rb").read()  # noqa: SIM115 - one read
        except OSError:
            continue
        if mark in env:
            shm |= shm_files_of(proc.pid)
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed.append(proc.pid)
    for path in shm:  # e.g. a SIGKILLed vLLM engine's message queues, hundreds of MB each
        with contextlib.suppress(OSError):
            os.unlink(path)
    return killed
