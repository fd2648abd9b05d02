"""Staleness accounting (paper §6).

Every trajectory carries the weight version(s) it was generated with: exactly one under Laminar
(a rollout never changes weights mid-trajectory), several under partial rollout. Its staleness
is the trainer's version when it is consumed minus its generation version (the oldest one, for a
mixed trajectory). Laminar configures no bound; bounded baselines (one-step, AReaL-like with η)
check one with :class:`StalenessBound`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field


def _oldest(versions: int | Iterable[int]) -> int:
    if isinstance(versions, int):
        return versions
    vs = list(versions)
    if not vs:
        raise ValueError("a trajectory needs at least one generation version")
    return min(vs)


def staleness(consumer_version: int, versions: int | Iterable[int]) -> int:
    """Trainer version at consumption minus the (oldest) generation version; never negative."""
    s = consumer_version - _oldest(versions)
    if s < 0:
        raise ValueError(
            f"trajectory generated with version {_oldest(versions)} consumed at older version "
            f"{consumer_version}"
        )
    return s


@dataclass(frozen=True, slots=True)
class StalenessBound:
    """A bound η on staleness, as bounded-staleness systems enforce it (None: unbounded)."""

    eta: int | None

    def admits(self, consumer_version: int, versions: int | Iterable[int]) -> bool:
        """True when a trajectory of these versions may be consumed at ``consumer_version``."""
        return self.eta is None or staleness(consumer_version, versions) <= self.eta

    def may_generate(self, trainer_version: int, rollout_version: int) -> bool:
        """True when a rollout at ``rollout_version`` may start a trajectory now.

        A trajectory started now is consumed at ``trainer_version`` or later, so a rollout more
        than η versions behind must pull weights first (AReaL-style admission control).
        """
        return self.eta is None or trainer_version - rollout_version <= self.eta


@dataclass(slots=True)
class StalenessTracker:
    """Running staleness statistics over consumed trajectories."""

    counts: Counter = field(default_factory=Counter)

    def record(self, consumer_version: int, versions: int | Iterable[int]) -> int:
        """Record one consumed trajectory; return its staleness."""
        s = staleness(consumer_version, versions)
        self.counts[s] += 1
        return s

    def record_all(
        self, consumer_version: int, versions: Iterable[int | Iterable[int]]
    ) -> list[int]:
        """Record many consumed trajectories (one item of ``versions`` each, as for
        :meth:`record`); their staleness, in order."""
        # a single version (every trajectory but a partial-rollout one) takes the short way
        out = [
            consumer_version - v
            if type(v) is int and v <= consumer_version
            else staleness(consumer_version, v)
            for v in versions
        ]
        self.counts.update(out)
        return out

    @property
    def n(self) -> int:
        """Trajectories recorded."""
        return sum(self.counts.values())

    def histogram(self) -> dict[int, int]:
        """Staleness value -> number of trajectories, ascending by staleness."""
        return dict(sorted(self.counts.items()))

    def mean(self) -> float:
        """Mean staleness (0.0 when nothing was recorded)."""
        n = self.n
        return sum(s * c for s, c in self.counts.items()) / n if n else 0.0

    def max(self) -> int:
        """Largest staleness seen (0 when nothing was recorded)."""
        return max(self.counts, default=0)
