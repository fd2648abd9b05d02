"""A process's resident memory on Linux, its peak (``VmHWM``) and a reset of that peak: what the
trainer's memory tests and ``benchmarks/bench_trainer_memory.py`` measure."""

from __future__ import annotations

import os

# glibc keeps freed blocks below its (growing) mmap threshold for reuse: resident memory then
# says little about what is live. At a fixed 64 KiB threshold every tensor is its own mapping,
# returned to the system when freed. Set it in the environment of a process before it starts.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def rss() -> int:
    """Resident bytes now."""
    return _status()["VmRSS"]


def peak() -> int:
    """Peak resident bytes since the process started or the last :func:`reset_peak`."""
    return _status()["VmHWM"]


def reset_peak() -> None:
    """Start the peak over from the resident memory now (Linux >= 4.0: ``clear_refs`` 5)."""
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")
