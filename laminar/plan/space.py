"""The search space of a plan: which configurations to try, as ``--set``-style overrides.

A point is one configuration: GPU count x system x trainer split (whole machines) x rollout TP
x max batch x repack, plus any extra dimension the user varies. Dimensions that a system does
not read are not varied for it (a colocated system has no split, a system without repack has
no repack switch), so no two points simulate the same thing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.errors import ConfigError

DEFAULT_FRACTIONS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)
DEFAULT_TPS = (1, 2, 4, 8)
DEFAULT_MAX_BATCHES = (64, 128, 256)


@dataclass(frozen=True)
class SearchSpace:
    """What a plan varies; every list is tried in full (a grid)."""

    gpus: tuple[int, ...]
    systems: tuple[str, ...]
    trainer_fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    """Trainer share of the machines; each becomes a whole number of machines (duplicates
    after rounding are dropped)."""
    rollout_tps: tuple[int, ...] = DEFAULT_TPS
    max_batches: tuple[int, ...] = DEFAULT_MAX_BATCHES
    repack: tuple[bool, ...] = (True, False)
    extra: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Further dimensions: dotted config key -> values (``--vary KEY=V1,V2``)."""


@dataclass(frozen=True)
class Point:
    """One configuration of the plan; ``overrides`` turn the base config into it."""

    pid: int
    gpus: int
    system: str
    trainer_gpus: int | None  # None: colocated (every GPU trains and rolls out)
    rollout_tp: int
    max_batch: int
    repack: bool | None  # None: the system has no repack
    extra: tuple[tuple[str, Any], ...]
    overrides: tuple[tuple[str, Any], ...]


def enumerate_points(base: LaminarConfig, space: SearchSpace) -> list[Point]:
    """Every point of ``space`` over ``base``, in a fixed order (ids 0, 1, ...)."""
    from laminar.sim.registry import all_systems

    registry = all_systems()
    unknown = [s for s in space.systems if s not in registry]
    if unknown:
        raise ConfigError("laminar plan", "--systems", f"unknown system(s) {unknown}; "
                          f"known: {', '.join(registry)}")  # fmt: skip
    extra_keys = sorted(space.extra)
    extra_combos = list(itertools.product(*(space.extra[k] for k in extra_keys)))
    points: list[Point] = []
    for gpus in space.gpus:
        gpm = min(base.cluster.gpus_per_machine, gpus)
        for name in space.systems:
            cls = registry[name]
            splits = [None] if cls.colocated else _splits(gpus, gpm, space.trainer_fractions)
            repacks = list(space.repack) if cls.uses_repack else [None]
            for trainer, tp, batch, repack, combo in itertools.product(
                splits, space.rollout_tps, space.max_batches, repacks, extra_combos
            ):
                extra = tuple(zip(extra_keys, combo, strict=True))
                ov: dict[str, Any] = {
                    "cluster.gpus": gpus,
                    "sim.systems": [name],
                    "model.rollout_tp": tp,
                    "sim.max_batch": batch,
                }
                if trainer is not None:
                    ov["cluster.trainer_fraction"] = trainer[1]
                if repack is not None:
                    ov["repack.enabled"] = repack
                ov.update(extra)
                points.append(
                    Point(
                        pid=len(points),
                        gpus=gpus,
                        system=name,
                        trainer_gpus=None if trainer is None else trainer[0],
                        rollout_tp=tp,
                        max_batch=batch,
                        repack=repack,
                        extra=extra,
                        overrides=tuple(ov.items()),
                    )
                )
    return points


def _splits(gpus: int, gpm: int, fractions) -> list[tuple[int, float]]:
    """(trainer GPUs, ``cluster.trainer_fraction``) per distinct split, whole machines.

    ``laminar.sim.systems.System.split`` rounds the fraction to machines (to GPUs below two
    machines); the fraction written is k / machines exactly, so it lands on k."""
    machines = gpus // gpm
    unit, count = (gpm, machines) if machines >= 2 else (1, gpm)
    out: dict[int, float] = {}
    for f in fractions:
        k = min(count - 1, max(1, round(f * count)))
        out.setdefault(k, k / count)
    return [(k * unit, frac) for k, frac in sorted(out.items())]


def point_config(base_data: dict, point: Point) -> LaminarConfig:
    """The validated config of ``point`` (``base_data``: the base config's ``model_dump``)."""
    from laminar.config.loader import apply_override, validate

    data = _deep_copy(base_data)
    for key, value in point.overrides:
        apply_override(data, key.split("."), value, f"{key}={value}")
    return validate(data, f"plan point {point.pid}", {})


def _deep_copy(d):
    if isinstance(d, dict):
        return {k: _deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deep_copy(v) for v in d]
    return d
