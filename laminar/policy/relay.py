"""Relay chain planning (paper §4 and Appendix D).

The trainer pushes weights once to a master relay and returns to training; the master and the
relays after it pass the weights down a chain in k equal chunks, pipelined (relay i forwards
chunk j while receiving chunk j+1). With a link startup cost α (s) and a per-byte cost β
(s/byte), a chain of p nodes (master + p−1 relays) moves M bytes in

    T(p, k) = (p + k − 2) · (α + β·M/k)                                  (App. D.2)

which is minimised near k* = sqrt((p − 2)·β·M/α) (App. D.3). For large M the β·M term, which
does not depend on p, dominates: that is why the chain scales to 127 relays (§4.2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


def broadcast_time(p: int, k: int, nbytes: float, alpha_s: float, beta_s_per_byte: float) -> float:
    """Seconds for a pipelined chain of ``p`` nodes to deliver ``nbytes`` in ``k`` chunks."""
    if p < 1 or k < 1:
        raise ValueError(f"need p >= 1 and k >= 1, got p={p}, k={k}")
    if p == 1:
        return 0.0  # the master alone: nothing to send
    return (p + k - 2) * (alpha_s + beta_s_per_byte * nbytes / k)


def optimal_chunks(
    p: int, nbytes: float, alpha_s: float, beta_s_per_byte: float, *, max_chunks: int | None = None
) -> int:
    """The integer k >= 1 minimising :func:`broadcast_time` (ties: the smaller k).

    T is convex in k, so the best integer is the floor or ceiling of the continuous optimum
    k* = sqrt((p−2)·β·M/α). ``max_chunks`` (default: one chunk per byte) caps k when α = 0.
    """
    if p < 1:
        raise ValueError(f"need p >= 1, got {p}")
    if alpha_s < 0 or beta_s_per_byte < 0 or nbytes < 0:
        raise ValueError("alpha_s, beta_s_per_byte and nbytes must be >= 0")
    cap = max(1, int(nbytes)) if max_chunks is None else max(1, max_chunks)
    if p <= 2 or beta_s_per_byte * nbytes == 0:
        return 1  # T grows with k: no pipeline to fill
    if alpha_s == 0:
        return cap
    k_star = math.sqrt((p - 2) * beta_s_per_byte * nbytes / alpha_s)
    lo = min(cap, max(1, math.floor(k_star)))
    hi = min(cap, lo + 1)
    t_lo = broadcast_time(p, lo, nbytes, alpha_s, beta_s_per_byte)
    t_hi = broadcast_time(p, hi, nbytes, alpha_s, beta_s_per_byte)
    return hi if t_hi < t_lo else lo


@dataclass(frozen=True, slots=True)
class Chain:
    """A broadcast chain: the master receives from the trainer, then ``relays`` in order."""

    master: str
    relays: tuple[str, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        """Master first, then each relay in chain order."""
        return (self.master, *self.relays)

    @property
    def p(self) -> int:
        """Number of nodes in the chain, master included (the p of App. D)."""
        return 1 + len(self.relays)

    def upstream(self, node: str) -> str | None:
        """The node ``node`` receives from (None for the master: it receives from the trainer)."""
        nodes = self.nodes
        i = nodes.index(node)
        return nodes[i - 1] if i > 0 else None

    def downstream(self, node: str) -> str | None:
        """The node ``node`` forwards to (None for the tail)."""
        nodes = self.nodes
        i = nodes.index(node)
        return nodes[i + 1] if i + 1 < len(nodes) else None


def _natural_key(s: str) -> tuple:
    """Sort 'relay-2' before 'relay-10'."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", s))


def plan_chain(relay_ids: Iterable[str], master_id: str) -> Chain:
    """A deterministic chain: the master, then the other relays in natural id order.

    Ids are expected to encode placement (machine index), so neighbours in the chain are
    neighbours in the cluster; the order does not depend on the order ids were given in.
    """
    ids = set(relay_ids)
    if len(ids) == 0:
        raise ValueError("a chain needs at least one relay")
    if master_id not in ids:
        raise ValueError(f"master {master_id!r} is not among the relays")
    rest = sorted(ids - {master_id}, key=_natural_key)
    return Chain(master_id, tuple(rest))


def choose_master(relay_machines: Mapping[str, str], trainer_machine: str) -> str:
    """§4.2: the master relay is the one on the trainer's machine, so the trainer's hand-off is a
    local memory copy (its only stall); without one, the first relay in natural id order.

    ``relay_machines`` maps relay id -> machine id; ties on one machine go to the smallest id.
    """
    if not relay_machines:
        raise ValueError("no relays to choose a master from")
    local = [r for r, m in relay_machines.items() if m == trainer_machine]
    return min(local or relay_machines, key=_natural_key)


def rebuild_chain(chain: Chain, failed: set[str] | frozenset[str]) -> Chain:
    """§4.3: drop failed relays and relink the survivors in their old order, in O(p).

    When the master failed, the first surviving relay downstream of it becomes master: it holds
    the newest chunks of any survivor, and the trainer is told its address.
    """
    survivors = [n for n in chain.nodes if n not in failed]
    if not survivors:
        raise ValueError("every relay in the chain failed: nothing left to rebuild")
    return Chain(survivors[0], tuple(survivors[1:]))
