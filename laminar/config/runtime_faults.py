"""Fault injection and detection settings of the real runtime (``runtime.faults``).

A fault is ``KIND@WHEN`` (``laminar train --fault``, repeatable): KIND one of :data:`KINDS`,
optionally ``KIND:TARGET`` (a rollout id such as ``r1``, a relay index, a node index); WHEN a
trainer step (``@5``: right after step 5) or seconds since the training loop started (``@90s``).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from decimal import Decimal

from pydantic import Field, field_validator

from laminar.config.base import Section

KINDS = ("kill-rollout", "kill-engine", "kill-machine", "kill-relay", "kill-trainer")
MAX_SPEC_CHARS = 200  # a fault is a short word; a longer one is a mistake (or an attack)
# Matched whole (``fullmatch``: ``$`` would let a trailing newline through), ASCII only.
_SPEC = re.compile(r"(?P<kind>[^:@]*)(?::(?P<target>[^@]*))?@(?P<when>[^@]*)")
_TARGET = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # r1, 0, relay-0, m1
_STEP = re.compile(r"[0-9]{1,12}")  # [0-9], not \d: \d takes any script's digits
_SECONDS = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)s")
FORM = "KIND[:TARGET]@STEP or KIND[:TARGET]@SECONDSs, e.g. kill-rollout@5 or kill-machine@90s"


@dataclass(frozen=True)
class FaultSpec:
    """One scheduled fault: after trainer ``step`` or at ``at_s`` seconds into the loop."""

    kind: str
    step: int | None = None
    at_s: float | None = None
    target: str | None = None

    def text(self) -> str:
        where = _seconds_text(self.at_s) if self.at_s is not None else str(self.step)
        return f"{self.kind}{':' + self.target if self.target else ''}@{where}"


def _seconds_text(at_s: float) -> str:
    """``90s``, ``2.5s``: what :func:`parse_fault` reads back to the same number (``:g`` alone
    writes 1e+06, which is not a WHEN)."""
    if at_s.is_integer():
        return f"{int(at_s)}s"
    short = f"{at_s:g}"
    if "e" not in short and float(short) == at_s:
        return short + "s"
    return format(Decimal(repr(at_s)), "f") + "s"


def parse_fault(text: str) -> FaultSpec:
    """``KIND[:TARGET]@STEP`` or ``KIND[:TARGET]@SECONDSs``; a ValueError says what is wrong
    (without repeating ``text``: the caller names the setting and the text)."""
    text = text.strip()
    if len(text) > MAX_SPEC_CHARS:
        raise ValueError(f"{len(text)} characters; a fault is at most {MAX_SPEC_CHARS}")
    m = _SPEC.fullmatch(text)
    if m is None:
        raise ValueError(f"expected {FORM}")
    kind, target, when = m["kind"], m["target"], m["when"]
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind[:40]!r}; one of {', '.join(KINDS)}")
    if target is not None and not _TARGET.fullmatch(target):
        raise ValueError(
            f"target {target[:40]!r} is not a name such as r1, 0 or m1 (1..64 ASCII letters, "
            "digits, '_', '.', '-')"
        )
    if _STEP.fullmatch(when):
        return FaultSpec(kind, step=int(when), target=target)
    if _SECONDS.fullmatch(when):
        at_s = float(when[:-1])
        if math.isfinite(at_s):  # 1e400 is no time: float() makes it inf
            return FaultSpec(kind, at_s=at_s, target=target)
    raise ValueError(
        f"WHEN {when[:40]!r} is neither a step (a whole number, e.g. 5) nor seconds (a finite "
        "number ending in s, e.g. 90s or 2.5s)"
    )


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
        for i, text in enumerate(v):
            try:
                parse_fault(text)
            except ValueError as e:
                raise ValueError(f"[{i}] {text[:60]!r}: {e}") from None
        return v

    def specs(self) -> list[FaultSpec]:
        return [parse_fault(t) for t in self.inject]
