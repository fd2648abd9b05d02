"""Which CPU cores the trainer and each rollout replica use (device ``cpu`` only); the runtime
places its processes so, and the simulator (``sim.setting: runtime``) shares cores the same way.

The two modes place work the way the systems they stand for place it on GPUs:

- **laminar** is disaggregated (paper §3): the trainer keeps its own cores
  (``runtime.trainer_cpus``) and the rollouts theirs (``runtime.cpu_binds``), so training and
  generation run at the same time without taking cores from each other;
- **sync** is colocated, like verl: generation and training take turns on *every* core, so the
  rollouts spread over all listed cores and the trainer, when its turn comes, uses all of them.

Both modes therefore get the same cores; only how they share them differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_CORE = 65535  # a sanity bound on a core number: no machine has more, and ranges stay small


def parse_cpus(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]`` (empty text: no cores)."""
    cores: set[int] = set()
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    for part in parts:
        lo, dash, hi = part.partition("-")
        try:
            if not part or (dash and not hi):  # "1,,2", "1-": a typo, not a core list
                raise ValueError
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"bad CPU list {text!r}: expected e.g. '0-3,5'") from None
        if a < 0 or b < a:
            raise ValueError(f"bad CPU range {part!r} in {text!r}")
        if b > MAX_CORE:
            raise ValueError(f"CPU {b} in {text!r} is above {MAX_CORE}")
        cores.update(range(a, b + 1))
    return sorted(cores)


def cpu_text(cores: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0,1,2,5"`` (the form VLLM_CPU_OMP_THREADS_BIND accepts)."""
    return ",".join(str(c) for c in cores)


@dataclass(frozen=True)
class Placement:
    """Cores of each rollout replica and of the trainer; empty lists mean "not pinned"."""

    rollout_cpus: tuple[tuple[int, ...], ...]
    trainer_cpus: tuple[int, ...]

    def trainer_threads(self, default: int) -> int:
        """Torch threads of the trainer: one per core when pinned, else ``default``."""
        return len(self.trainer_cpus) or default


def place(
    *, mode: str, device: str, rollouts: int, cpu_binds: Sequence[str], trainer_cpus: str
) -> Placement:
    """The placement of ``mode`` (``laminar`` or ``sync``; module docstring) for ``rollouts``
    replicas over ``cpu_binds`` (one core list per replica, cycled) and ``trainer_cpus``;
    nothing is pinned off ``device == "cpu"``."""
    if device != "cpu":
        return Placement(tuple(() for _ in range(rollouts)), ())
    binds = [parse_cpus(b) for b in cpu_binds]
    trainer = parse_cpus(trainer_cpus)
    if mode == "laminar" or not binds:
        per_replica = [binds[i % len(binds)] if binds else [] for i in range(rollouts)]
        return Placement(tuple(tuple(c) for c in per_replica), tuple(trainer))
    every = sorted({c for b in binds for c in b} | set(trainer))
    per_replica = [[every[i % len(every)]] for i in range(rollouts)]
    return Placement(tuple(tuple(c) for c in per_replica), tuple(every))
