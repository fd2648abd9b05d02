"""Machine speed probe: a fixed single-core workload timed at top priority beside a run.

A shared machine's speed moves while a run goes on (other tenants, the host's clocks): on the
2-core development VM the same job's engine steps took 0.6-1.4 times their fitted cost from one
run to the next (``docs/fidelity.md``). To tell that apart from what a setting costs, a run
records the machine's speed next to itself: a child process times the same small piece of work
every ``interval_s`` — ``matmul_s``, single-threaded float32 matrix products (the core's
arithmetic), and ``python_s``, a pure-Python loop (the interpreter) — at the highest priority
it may take, so that the run's own processes wait for it rather than it for them (it takes ~1.3%
of one core; it still shares the machine's caches and memory with the run).
``laminar calibrate`` records the speed of its runs in the cost file, and its
``--at-speed-of RUN_DIR`` moves the cost file to the speed measured beside another run
(``laminar/calibrate/speed.py``).

Rows go to ``profile/speed_probe.csv`` (``at_s`` on the run's clock). Every tick the child also
records where the job's cores went, every ``corecpu.TICK_S`` (``corecpu.py``: each core's busy
seconds, the job's pinned and unpinned processes' CPU), rows that go to
``profile/core_cpu.csv``. Run as a module, it is
the child: ``python -m laminar.runtime.profiling.speedprobe OUT.csv INTERVAL_S`` (the core
rows to ``OUT.csv.cores``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from laminar.runtime.profiling import corecpu
from laminar.runtime.profiling.corecpu import CoreCpu

COLUMNS = ["at_unix_s", "matmul_s", "python_s", "niceness"]
CORES_SUFFIX = ".cores"  # the child's core rows, beside its speed rows
TOP_PRIORITY = -20  # what the child asks for; without the right to it, it keeps its own


def _python_work() -> int:
    acc = 0
    for i in range(60_000):
        acc = (acc + i * i) % 1_000_003
    return acc


def _child(out: str, interval_s: float, cores_too: bool = True) -> None:
    from laminar.runtime.cluster.lifeline import parent_from_env, tie_to_parent

    tie_to_parent(parent_from_env())  # dies with the driver, even a SIGKILLed one
    with contextlib.suppress(OSError):  # not permitted: the inherited niceness (in each row)
        os.setpriority(os.PRIO_PROCESS, 0, TOP_PRIORITY)
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(192, 192), torch.randn(192, 192)

    def matmul() -> None:
        for _ in range(40):
            torch.mm(a, b)

    for _ in range(5):  # warm the allocator and the caches
        matmul()
        _python_work()
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    parent = os.getppid()
    cores = CoreCpu(parent) if cores_too else None
    if cores is not None:
        cores.sample()  # the baseline
    with open(out, "a", buffering=1) as f, open(out + CORES_SUFFIX, "a", buffering=1) as g:
        due = 0.0
        while os.getppid() == parent:  # an orphan (its run died without stopping it) ends
            if time.monotonic() >= due:
                due = time.monotonic() + interval_s
                t = time.perf_counter()
                matmul()
                mm = time.perf_counter() - t
                t = time.perf_counter()
                _python_work()
                py = time.perf_counter() - t
                f.write(f"{time.time():.3f},{mm:.6f},{py:.6f},{nice}\n")
            if cores is None:
                time.sleep(max(0.0, due - time.monotonic()))
                continue
            rows = cores.sample()
            now = time.time()
            g.write("".join(f"{now:.3f},{c},{what},{s:.4f}\n" for c, what, s in rows))
            time.sleep(min(corecpu.TICK_S, interval_s))


class SpeedProbe:
    """The probe child for one run: ``start()`` it, ``stop()`` it for its rows (module
    docstring). ``interval_s`` 0: no probe, no rows. Its file lives in ``scratch`` (the run's
    scratch directory, which a killed run's ``--resume`` removes), else the system's temp."""

    def __init__(self, interval_s: float, scratch: Path | None = None, cores: bool = True):
        self.interval_s = float(interval_s)
        self.cores_too = cores  # also where the job's cores go (CPU placements: corecpu.py)
        self.scratch = scratch  # where its file lives until stop() (the run's scratch dir)
        self.proc: subprocess.Popen | None = None
        self.path: Path | None = None
        self.cores = empty_cores()  # the core rows of the last stop()

    def start(self) -> SpeedProbe:
        if self.interval_s <= 0:
            return self
        if self.scratch is not None:
            self.scratch.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="speed-probe-", suffix=".csv", dir=self.scratch)
        os.close(fd)
        self.path = Path(name)
        from laminar.runtime.cluster.lifeline import child_env

        module = "laminar.runtime.profiling.speedprobe"
        cmd = [sys.executable, "-m", module, name, str(self.interval_s), str(int(self.cores_too))]
        # quiet: a probe that cannot run leaves an empty file, which calibration reads as
        # "not recorded" (the run itself does not depend on it)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=child_env())  # fmt: skip
        return self

    def stop(self, t0_unix_s: float) -> pd.DataFrame:
        """Ends the child; its rows, ``at_s`` counted from ``t0_unix_s``. Its core rows are
        then in ``self.cores`` (``at_s``, ``core``, ``what``, ``cpu_s``; empty without any)."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self.path is None:
            return empty()
        cores_path = Path(str(self.path) + CORES_SUFFIX)
        df = _read(self.path, COLUMNS)
        cores = _read(cores_path, corecpu.COLUMNS, text=("what",))
        self.path.unlink(missing_ok=True)
        cores_path.unlink(missing_ok=True)
        self.path = None
        cores.insert(0, "at_s", cores.pop("at_unix_s") - t0_unix_s)
        self.cores = cores.reset_index(drop=True)
        df.insert(0, "at_s", df.pop("at_unix_s") - t0_unix_s)
        return df.reset_index(drop=True)

    def __enter__(self) -> SpeedProbe:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop(0.0)


def _read(path: Path, columns: list[str], text: tuple[str, ...] = ()) -> pd.DataFrame:
    """The child's rows in ``path``, numbers checked (a line cut by the stop is dropped)."""
    try:
        df = pd.read_csv(path, names=columns, dtype=str)
    except (pd.errors.EmptyDataError, OSError):
        df = pd.DataFrame(columns=columns)
    for c in columns:
        if c not in text:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df.dropna()


def empty() -> pd.DataFrame:
    return pd.DataFrame(columns=["at_s", *COLUMNS[1:]])


def empty_cores() -> pd.DataFrame:
    return pd.DataFrame(columns=["at_s", *corecpu.COLUMNS[1:]])


if __name__ == "__main__":
    _child(sys.argv[1], float(sys.argv[2]), len(sys.argv) < 4 or sys.argv[3] != "0")
