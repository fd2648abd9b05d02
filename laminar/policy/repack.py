"""Dynamic repack of long-tail trajectories (paper §5).

Late in a batch most rollout replicas are memory-bound with a handful of long trajectories left:
a small decode batch costs about as much per step as a large one (§2.4). Repack consolidates
those trajectories onto a few destination replicas of the same weight version, so the sources
are released to pull the newest weights and start fresh prompts.

Contract (property tests in ``tests/policy/test_repack.py`` assert each line):

- a replica is a *candidate* when its KV use is below capacity and falling since the previous
  check, and it holds fewer than ``max_batch`` unfinished trajectories (§5.2, Fig. 9);
- candidates are grouped by ``weight_version`` and never mixed across groups;
- sources are taken smallest KV footprint first (ties: replica id) and move *whole* to the
  candidate of the same group that is fullest after the merge while staying within
  ``kv_capacity_tokens`` and ``max_batch`` (best fit; ties: replica id);
- §8.4, repack must not lengthen generation: when a destination's snapshot carries its decode
  step cost (``step_cost``), its step after the merge stays within ``max_step_slowdown`` times
  its fastest step (one sequence, empty cache). A decode step reads every cached token, so a
  destination packed to its KV capacity steps several times slower than one decoding a few
  stragglers, and every trajectory on it finishes that much later;
- a source that fits nowhere is left alone; a replica that received trajectories is not a source
  afterwards; a replica that was emptied receives nothing; a destination may receive several
  sources;
- replicas holding no unfinished trajectory are idle already: neither source nor destination.

The paper's Best-Fit is O(|S|^2). Here destinations are kept sorted by load, so a source takes
the first feasible one from the front; a destination too full for one source is too full for
every later (larger) source and is dropped for good, which keeps the scan short in practice
(the worst case stays O(|S|^2); ``benchmarks/bench_policy.py`` times both). That search is
``laminar.policy.bestfit``, typed for mypyc (``laminar.native`` compiles it with the simulator's
hot modules).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from laminar.policy.bestfit import kv_falling, plan_group


class TrajectoryState(NamedTuple):
    """One unfinished trajectory on a replica; ``kv_tokens`` is what it occupies (prompt+output).

    A named tuple (immutable, like the frozen records here) because an engine builds one per
    trajectory of every candidate at every check: the simulator's 1024-GPU headline makes
    ~150 K of them, and a tuple is built about three times faster than a frozen dataclass."""

    traj_id: str
    kv_tokens: int


@dataclass(frozen=True, slots=True)
class StepCost:
    """A replica's decode step cost, t(b, kv) = base_s + b·per_seq_s + kv·per_kv_token_s.

    The engine's own model of it (the simulator's cost model, a calibrated cost file): repack
    asks it how much slower a destination steps once it holds more sequences and KV.
    """

    base_s: float
    per_seq_s: float
    per_kv_token_s: float

    def __post_init__(self) -> None:
        terms = (self.base_s, self.per_seq_s, self.per_kv_token_s)
        if not all(math.isfinite(x) and x >= 0 for x in terms) or self.step_s(1, 0) <= 0:
            raise ValueError(f"step cost terms must be finite, >= 0, and a step > 0: {terms}")

    def step_s(self, batch: int, kv_tokens: int) -> float:
        """Seconds of one decode step of ``batch`` sequences holding ``kv_tokens``."""
        return self.base_s + batch * self.per_seq_s + kv_tokens * self.per_kv_token_s


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """A snapshot of one rollout replica, as the rollout manager sees it at a repack check.

    ``trajectories`` are its unfinished ones (running and waiting); ``kv_used_prev_tokens`` is its
    KV use at the previous check, so a falling KV use can be told from a full, busy replica.
    ``step_cost`` (None: unknown) and ``max_step_slowdown`` bound what it may receive (§8.4):
    its decode step after a merge stays within ``max_step_slowdown`` × ``step_cost.step_s(1, 0)``.
    """

    replica_id: str
    weight_version: int
    kv_capacity_tokens: int
    kv_used_tokens: int
    kv_used_prev_tokens: int
    max_batch: int
    trajectories: tuple[TrajectoryState, ...] = ()
    step_cost: StepCost | None = None
    max_step_slowdown: float = math.inf

    def __post_init__(self) -> None:
        if not self.max_step_slowdown >= 1:
            raise ValueError(f"max_step_slowdown must be >= 1 (got {self.max_step_slowdown})")

    @property
    def max_step_s(self) -> float:
        """The slowest decode step it may reach by receiving trajectories (inf: unbounded)."""
        if self.step_cost is None or math.isinf(self.max_step_slowdown):
            return math.inf
        return self.max_step_slowdown * self.step_cost.step_s(1, 0)

    def fits(self, load_tokens: int, count: int) -> bool:
        """Whether it may hold ``count`` trajectories in ``load_tokens`` of KV after a merge."""
        if load_tokens > self.kv_capacity_tokens or count > self.max_batch:
            return False
        cost = self.step_cost
        return cost is None or cost.step_s(count, load_tokens) <= self.max_step_s

    @property
    def footprint_tokens(self) -> int:
        """KV tokens its trajectories take up once re-prefilled elsewhere."""
        return sum(t.kv_tokens for t in self.trajectories)


@dataclass(frozen=True, slots=True)
class Move:
    """Move every listed trajectory from replica ``src`` to replica ``dst`` (re-prefill there)."""

    src: str
    dst: str
    traj_ids: tuple[str, ...]


def is_candidate(r: ReplicaState) -> bool:
    """§5.2: KV use below capacity and falling (no waiting queue left), < B trajectories."""
    falling = kv_falling(r.kv_used_tokens, r.kv_used_prev_tokens, r.kv_capacity_tokens)
    return falling and len(r.trajectories) < r.max_batch


def plan_repack(replicas: Sequence[ReplicaState]) -> list[Move]:
    """Return the moves that consolidate long-tail trajectories (best fit, per version group).

    Moves are ordered by group (ascending version), then in the order sources were considered.
    """
    groups: dict[int, list[ReplicaState]] = {}
    for r in replicas:
        if r.trajectories and is_candidate(r):
            groups.setdefault(r.weight_version, []).append(r)
    moves: list[Move] = []
    for version in sorted(groups):
        for src, dst in plan_group(groups[version]):
            moves.append(
                Move(src.replica_id, dst.replica_id, tuple(t.traj_id for t in src.trajectories))
            )
    return moves
