"""Where the job's cores went beside a run: each core's busy seconds, the job's CPU on it.

An engine pinned to a core shares it with whatever else the scheduler puts there: its own
rollout's front end (pinned with it), and the job's unpinned processes (the driver, the data
pools, the rollout manager, Ray's own processes, the trainer's coordinator), which run on
whichever core has room, so an engine loses part of its core to them only when the other cores
are busy too (``docs/fidelity.md``, *Issue 31*). ``laminar calibrate`` reads what this records
(``laminar/calibrate/background.py``).

:class:`CoreCpu` is sampled by the speed-probe child (``speedprobe.py``) every ``TICK_S``, on
CPU placements only (``runtime.device: cpu``). Rows per core the job has pinned a process to
so far (a core of the driver's affinity; a job that pins nothing has none):

- ``busy``: the core's busy seconds (``/proc/stat``: user, nice, system, irq, softirq, steal);
- ``pinned``: the CPU seconds of the job's processes pinned to it (affinity a strict subset of
  the job's cores; a process over several cores counted evenly on each). The trainer's ranks
  count as pinned to their cores whatever they are: their time is the trainer's;
- ``engine``: the part of ``pinned`` that vLLM's own processes used (titled ``VLLM::``: the
  engine core and its workers), the rest being their rollouts' front ends and the trainer.

And on core ``-1``, ``unpinned``: the CPU seconds of the job's other processes. The job's
processes are the driver and its descendants (a local Ray session's every process). Linux only;
elsewhere, nothing is recorded.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

COLUMNS = ["at_unix_s", "core", "what", "cpu_s"]
TICK_S = 0.25  # between samples: a sync job's generation phase here lasts ~0.5-1.5 s
# (a sample reads every process's /proc/PID/stat: about 1% of a core at this rate here)
UNPINNED_CORE = -1  # the row of the job's unpinned processes (they run on any core)
TRAINER_TITLES = ("ray::TrainerRank",)  # Ray's process title of the trainer's rank actors
ENGINE_NAMES = ("VLLM::",)  # vLLM's titles of its engine core and worker processes
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal, in /proc/stat order


def core_busy() -> dict[int, int]:
    """Each core's busy clock ticks since boot (``/proc/stat``); empty where it is absent."""
    out: dict[int, int] = {}
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        if line.startswith("cpu") and len(line) > 3 and line[3].isdigit():
            parts = line.split()
            ticks = [int(x) for x in parts[1:]]
            out[int(parts[0][3:])] = sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks))
    return out


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU clock ticks used: user + system) of every process readable."""
    out: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            rest = text[text.rfind(")") + 2 :].split()  # after "pid (comm) "
            with contextlib.suppress(ValueError, IndexError):
                out[int(name)] = (int(rest[1]), int(rest[11]) + int(rest[12]))
    return out


def descendants(root: int, table: dict[int, tuple[int, int]]) -> list[int]:
    """``root`` and every process below it in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _title(pid: int) -> str:
    """The start of a process's command line: the title Ray and vLLM give their processes."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(64).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class CoreCpu:
    """Samples the job under ``root`` (module docstring); ``sample()`` returns the rows since
    the previous call (none on the first: it sets the baseline)."""

    root: int
    cores: tuple[int, ...] = ()
    tick_s: float = field(default_factory=lambda: float(os.sysconf("SC_CLK_TCK")))
    _busy: dict[int, int] = field(default_factory=dict)
    _cpu: dict[int, int] = field(default_factory=dict)
    _seen: set[int] = field(default_factory=set)  # cores the job has pinned a process to

    def __post_init__(self) -> None:
        if not self.cores:
            with contextlib.suppress(OSError):
                self.cores = tuple(sorted(os.sched_getaffinity(self.root)))

    def sample(self) -> list[tuple[int, str, float]]:
        """(core, "busy" | "pinned" | "engine" | "unpinned", CPU seconds) since the last
        sample."""
        busy, table = core_busy(), process_table()
        job = set(self.cores)
        pinned = dict.fromkeys(self.cores, 0.0)
        engine = dict.fromkeys(self.cores, 0.0)
        unpinned = 0.0
        cpu: dict[int, int] = {}
        for pid in descendants(self.root, table):
            used = table[pid][1]
            cpu[pid] = used
            delta = (used - self._cpu[pid]) / self.tick_s if pid in self._cpu else 0.0
            if delta <= 0:
                continue
            try:
                where = set(os.sched_getaffinity(pid)) & job
            except OSError:
                continue
            title = _title(pid)
            if where and (where < job or title.startswith(TRAINER_TITLES)):
                self._seen |= where
                vllm = title.startswith(ENGINE_NAMES)
                for c in where:
                    pinned[c] += delta / len(where)
                    if vllm:
                        engine[c] += delta / len(where)
            else:
                unpinned += delta
        first = not self._busy
        rows: list[tuple[int, str, float]] = []
        if not first:
            for c in sorted(self._seen):
                if c in busy and c in self._busy:
                    rows.append((c, "busy", (busy[c] - self._busy[c]) / self.tick_s))
                rows.append((c, "pinned", pinned[c]))
                rows.append((c, "engine", engine[c]))
            rows.append((UNPINNED_CORE, "unpinned", unpinned))
        self._busy, self._cpu = busy, cpu
        return rows
