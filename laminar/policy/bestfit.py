"""Repack's best-fit search over one version group (§5.2), typed so mypyc can compile it.

:func:`laminar.policy.repack.plan_repack` states the contract and builds the records; this
module is its inner loop: every candidate becomes a :class:`Slot` holding its limits as plain
numbers (KV capacity, B, the §8.4 step bound as ``base + b·per_seq + kv·per_kv <= max_step_s``),
and :class:`Destinations` keeps the slots that may still receive in a list sorted fullest first.
The same arithmetic in the same order as ``ReplicaState.fits``, so the same plan bit for bit;
``laminar.native`` loads a compiled build of it when there is one (the simulator's 1024-GPU
headline plans ~27 K candidates in ~100 checks).
"""

from __future__ import annotations

import math
from typing import Any


class Slot:
    """One candidate while a plan is built: its limits cached, its load and count growing."""

    __slots__ = (
        "base", "bounded", "cap", "count", "footprint", "key_load", "listed", "load",
        "max_batch", "max_step_s", "per_kv", "per_seq", "received", "rid", "state",
    )  # fmt: skip

    def __init__(self, state: Any) -> None:
        self.state: Any = state  # the ReplicaState it stands for
        self.rid: str = state.replica_id
        self.cap: int = state.kv_capacity_tokens
        self.max_batch: int = state.max_batch
        self.load: int = state.kv_used_tokens
        self.key_load: int = self.load  # its load when put in the destination list
        trajs = state.trajectories
        self.count: int = len(trajs)
        footprint = 0
        for t in trajs:
            footprint += t[1]  # TrajectoryState.kv_tokens
        self.footprint: int = footprint  # KV tokens its trajectories take once moved
        cost = state.step_cost
        max_step_s: float = state.max_step_s
        self.max_step_s: float = max_step_s
        self.bounded: bool = cost is not None and not math.isinf(max_step_s)
        self.base: float = float(cost.base_s) if self.bounded else 0.0
        self.per_seq: float = float(cost.per_seq_s) if self.bounded else 0.0
        self.per_kv: float = float(cost.per_kv_token_s) if self.bounded else 0.0
        self.received: bool = False
        self.listed: bool = True

    def fits(self, load_tokens: int, count: int) -> bool:
        """``ReplicaState.fits``: KV capacity, B and the step bound after a merge."""
        if load_tokens > self.cap or count > self.max_batch:
            return False
        if not self.bounded:
            return True
        return self.base + count * self.per_seq + load_tokens * self.per_kv <= self.max_step_s


def kv_falling(kv_used_tokens: int, kv_used_prev_tokens: int, kv_capacity_tokens: int) -> bool:
    """The KV half of ``repack.is_candidate``: use below capacity and below the previous check's.
    A caller holding fewer than B trajectories asks this before building a full snapshot (the
    simulator, for every replica at every check: here so that it runs compiled)."""
    return kv_used_tokens < min(kv_capacity_tokens, kv_used_prev_tokens)


def _before(a: Slot, b: Slot) -> bool:
    """Destination order: fullest first (by the load it was listed with), then replica id."""
    return a.key_load > b.key_load or (a.key_load == b.key_load and a.rid < b.rid)


class Destinations:
    """Candidates that may still receive, fullest first, with a count of free batch slots.

    A destination too full for one source is too full for every later one (sources come
    smallest first; loads and counts only grow), so it is dropped for good. The largest free
    batch room only shrinks, so a source with more trajectories than that is skipped in O(1).
    """

    def __init__(self, slots: list[Slot]) -> None:
        self.order: list[Slot] = sorted(slots, key=lambda s: (-s.key_load, s.rid))
        top = 0
        for s in slots:
            top = max(top, s.max_batch - s.count)
        self.rooms: list[int] = [0] * (top + 1)
        for s in slots:
            self.rooms[s.max_batch - s.count] += 1
        self.max_room: int = top

    def _index(self, slot: Slot) -> int:
        """Where ``slot`` is, or would go, in :attr:`order` (binary search)."""
        order = self.order
        lo, hi = 0, len(order)
        while lo < hi:
            mid = (lo + hi) // 2
            if _before(order[mid], slot):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _unlist(self, slot: Slot, index: int) -> None:
        del self.order[index]
        self.rooms[slot.max_batch - slot.count] -= 1
        slot.listed = False

    def remove(self, slot: Slot) -> None:
        if slot.listed:
            self._unlist(slot, self._index(slot))

    def grow(self, slot: Slot, tokens: int, count: int) -> None:
        self.remove(slot)
        slot.load += tokens
        slot.count += count
        slot.received = True
        slot.key_load = slot.load
        self.order.insert(self._index(slot), slot)
        self.rooms[slot.max_batch - slot.count] += 1  # counts only grow: within the list
        slot.listed = True

    def best_fit(self, src: Slot, fp: int, n: int) -> Slot | None:
        """The fullest destination that still fits ``fp`` tokens and ``n`` trajectories."""
        rooms = self.rooms
        while self.max_room > 0 and rooms[self.max_room] <= 0:
            self.max_room -= 1
        if n > self.max_room:
            return None
        order = self.order
        i = 0
        while i < len(order):
            cand = order[i]
            if cand is src:
                i += 1
                continue
            load = cand.load + fp
            if not cand.fits(load, cand.count + 1):
                self._unlist(cand, i)  # never fits again: later sources hold >= fp, >= 1
            elif cand.fits(load, cand.count + n):
                return cand
            else:
                i += 1
        return None


def plan_group(candidates: list[Any]) -> list[tuple[Any, Any]]:
    """Best fit within one version group: (source state, destination state) per move, in the
    order sources were considered (smallest footprint first; ties: replica id)."""
    slots = [Slot(r) for r in candidates]
    if len({s.rid for s in slots}) != len(slots):
        raise ValueError("replica ids must be unique within a repack check")
    dests = Destinations(slots)
    pairs: list[tuple[Any, Any]] = []
    for src in sorted(slots, key=lambda s: (s.footprint, s.rid)):
        if src.received:
            continue
        fp = src.footprint
        dst = dests.best_fit(src, fp, src.count)
        if dst is None:
            continue
        dests.remove(src)
        dests.grow(dst, fp, src.count)
        pairs.append((src.state, dst.state))
    return pairs
