"""What a live process maps from /dev/shm: the files it leaves behind when SIGKILLed."""

from __future__ import annotations


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
