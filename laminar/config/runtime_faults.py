"""Fault injection and detection settings of the real runtime (``runtime.faults``).

A fault is ``KIND@WHEN`` (``laminar train --fault``, repeatable): KIND one of :data:`KINDS`,
optionally ``KIND:TARGET`` (a rollout id such as ``r1``, a relay index, a node index); WHEN a
trainer step (``@5``: right after step 5) or seconds since the training loop started (``@90s``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pydantic import Field, field_validator

from laminar.config.base import Section

KINDS = ("kill-rollout", "kill-engine", "kill-machine", "kill-relay", "kill-trainer")
_SPEC = re.compile(
    r"^(?P<kind>[a-z-]+)(?::(?P<target>[A-Za-z0-9_.-]+))?@(?P<when>[0-9.]+)(?P<s>s?)$"
)


@dataclass(frozen=True)
class FaultSpec:
    """One scheduled fault: after trainer ``step`` or at ``at_s`` seconds into the loop."""

    kind: str
    step: int | None = None
    at_s: float | None = None
    target: str | None = None

    def text(self) -> str:
        where = f"{self.at_s:g}s" if self.at_s is not None else str(self.step)
        return f"{self.kind}{':' + self.target if self.target else ''}@{where}"


def parse_fault(text: str) -> FaultSpec:
    """``KIND[:TARGET]@STEP`` or ``KIND[:TARGET]@SECONDSs``; ValueError says what is wrong."""
    m = _SPEC.match(text.strip())
    if m is None:
        raise ValueError(
            f"fault {text!r}: expected KIND@STEP or KIND@SECONDSs (e.g. kill-rollout@5, "
            f"kill-machine@90s), KIND one of {', '.join(KINDS)}"
        )
    kind = m["kind"]
    if kind not in KINDS:
        raise ValueError(f"fault {text!r}: unknown kind {kind!r}; one of {', '.join(KINDS)}")
    when = m["when"]
    if m["s"]:
        at_s = float(when)
        return FaultSpec(kind, at_s=at_s, target=m["target"])
    if not when.isdigit():
        raise ValueError(f"fault {text!r}: a step is a whole number (seconds end with 's')")
    return FaultSpec(kind, step=int(when), target=m["target"])


def chaos_plan(seed: int, steps: int, kinds: tuple[str, ...] = KINDS) -> list[str]:
    """A seeded random fault of each kind in ``kinds``, each after a distinct step in
    ``1..steps-2`` where possible (the first step warms up; the last leaves time to recover)."""
    rng = random.Random(seed)
    slots = list(range(1, max(2, steps - 1)))
    rng.shuffle(slots)
    return [f"{k}@{slots[i % len(slots)]}" for i, k in enumerate(rng.sample(kinds, len(kinds)))]


class RuntimeFaultsConfig(Section):
    """Injected faults and the bounds of failure detection in ``laminar train``."""

    inject: list[str] = Field(default_factory=list, max_length=1000)
    """Faults to inject, each ``KIND[:TARGET]@STEP`` or ``KIND[:TARGET]@SECONDSs`` (at most
    1000; ``laminar train --fault`` adds to it). KIND: kill-rollout, kill-engine (the engine
    process; its actor stays), kill-machine (a Ray node with its rollouts and relay),
    kill-relay, kill-trainer."""

    engine_stall_s: float = Field(120.0, gt=0.0, le=86400.0)
    """An engine with requests running that yields no token for this long is declared hung and
    its rollout dead (seconds, 0 < s <= 86400); its trajectories are recovered elsewhere."""

    health_timeout_s: float = Field(60.0, gt=0.0, le=86400.0)
    """A rollout that does not answer the manager's health check for this long is declared dead
    (seconds, 0 < s <= 86400)."""

    replace_dead: bool = True
    """Start a new rollout in place of each dead one when resources allow (true/false)."""

    poll_s: float = Field(0.5, gt=0.0, le=60.0)
    """How often the driver checks for deaths and due faults while a step runs (0 < s <= 60)."""

    @field_validator("inject")
    @classmethod
    def _specs(cls, v: list[str]) -> list[str]:
        for text in v:
            parse_fault(text)
        return v

    def specs(self) -> list[FaultSpec]:
        return [parse_fault(t) for t in self.inject]
