"""The search space of a plan: which configurations to try, as ``--set``-style overrides.

A point is one configuration: GPU count x system x trainer split (whole machines) x rollout TP
x max batch x repack x trainer layout (``trainer.tp/pp/ep/cp``), plus any extra dimension the
user varies. The trainer layouts default to ``auto``: the base config's layout, data
parallelism alone, and for an MoE model experts spread over one machine's GPUs (EP cuts the
gradient synchronisation of the routed experts, ``laminar.sim.layout``); a layout that cannot be
laid on a point's trainer GPUs, or does not fit their memory, is rejected by the screen.
Dimensions that a system does not read are not varied for it (a colocated system has no split,
a system without repack has no repack switch), so no two points simulate the same thing.

The grid's own keys (:data:`GRID_KEYS`) are set by their axes only: an extra dimension that
names one of them, a section holding one, or a field under one would override the axis after
the point was built, so it is refused (:func:`check_extra`). :func:`count_points` counts a
space without building it, so a grid of 10^12 points costs nothing to refuse.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.specs.hardware import DEFAULT_MACHINE_GPUS, catalog_machine_gpus

DEFAULT_FRACTIONS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875)
DEFAULT_TPS = (1, 2, 4, 8)
DEFAULT_MAX_BATCHES = (64, 128, 256)
DEFAULT_LAYOUTS = ("auto",)
LAYOUT_KEYS = ("trainer.tp", "trainer.pp", "trainer.ep", "trainer.cp")

GRID_KEYS = {
    "cluster.gpus": "--gpus",
    "sim.systems": "--systems",
    "cluster.trainer_fraction": "--trainer-fractions",
    "model.rollout_tp": "--tp",
    "sim.max_batch": "--max-batch",
    "repack.enabled": "--repack",
    **{key: "--trainer-layouts" for key in LAYOUT_KEYS},
}
"""Config keys every point sets, and the ``laminar plan`` flag of each axis."""

GPM_KEY = "cluster.gpus_per_machine"  # an extra dimension that changes the splits
HW_KEY = "cluster.hardware"  # changes them too where a GPU names its machine (GB200: 4)


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
    trainer_layouts: tuple[str, ...] = DEFAULT_LAYOUTS
    """Trainer layouts, each ``TPxPPxEPxCP`` (e.g. ``2x1x8x1``) or ``auto`` (module doc)."""
    extra: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    """Further dimensions: dotted config key -> values (``--vary KEY=V1,V2``); never a grid
    key (:data:`GRID_KEYS`)."""


@dataclass(frozen=True)
class Point:
    """One configuration of the plan; ``overrides`` turn the base config into it. What was
    simulated is read back from the resolved config (``laminar.plan.readback``), not from
    these fields."""

    pid: int
    gpus: int
    system: str
    trainer_gpus: int | None  # None: colocated (every GPU trains and rolls out)
    rollout_tp: int
    max_batch: int
    repack: bool | None  # None: the system has no repack
    extra: tuple[tuple[str, Any], ...]
    overrides: tuple[tuple[str, Any], ...]
    trainer_layout: tuple[int, int, int, int] = (1, 1, 1, 1)  # tp, pp, ep, cp


def default_rollout_tps(base: LaminarConfig) -> tuple[int, ...]:
    """The rollout TPs a plan tries without ``--tp``: :data:`DEFAULT_TPS`, unless none of them
    holds the base config's model and one longest trajectory at its ``model.rollout_ep`` and
    ``rollout_quant`` (DeepSeek-V3 in BF16 on any catalog GPU): then four powers of two from
    the smallest TP that does, so such a plan simulates something instead of rejecting every
    point for memory (``laminar.specs.memory``, the check that rejects them)."""
    from laminar.config.cluster import MAX_ROLLOUT_TP
    from laminar.specs.hardware import hardware_spec
    from laminar.specs.memory import MAX_REPLICA_GPUS, longest_trajectory_tokens, rollout_replica
    from laminar.specs.model import model_spec

    try:
        spec, hw = model_spec(base.model), hardware_spec(base.cluster)
    except ConfigError:  # the config's own check says what is wrong, point by point
        return DEFAULT_TPS
    need = longest_trajectory_tokens(base)
    ep = base.model.rollout_ep

    def holds(tp: int) -> bool:
        return rollout_replica(base, spec, hw, tp, ep).kv_tokens_per_group >= need

    if any(holds(tp) for tp in DEFAULT_TPS):
        return DEFAULT_TPS

    def allowed(tp: int) -> bool:
        return tp <= MAX_ROLLOUT_TP and tp * ep <= MAX_REPLICA_GPUS

    tp = 2 * max(DEFAULT_TPS)
    while allowed(tp) and not holds(tp):
        tp *= 2
    if not allowed(tp):
        return DEFAULT_TPS  # nothing fits: every point is rejected with the smallest that would
    return tuple(t for t in (tp, 2 * tp, 4 * tp, 8 * tp) if allowed(t))


def grid_key_of(key: str) -> str | None:
    """The grid key that ``key`` is, holds (a section above it) or lies under; None if none."""
    for g in GRID_KEYS:
        if key == g or g.startswith(key + ".") or key.startswith(g + "."):
            return g
    return None


def check_extra(space: SearchSpace) -> None:
    """Refuse extra dimensions that would override a grid axis, or that have no values."""
    for key, values in space.extra.items():
        g = grid_key_of(key)
        if g == key:
            raise ConfigError(f"--vary {key}", "", f"{key} is the plan's own {GRID_KEYS[g]} "
                              f"axis; give its values with {GRID_KEYS[g]}")  # fmt: skip
        if g is not None:
            what = "holds" if g.startswith(key + ".") else "lies under"
            raise ConfigError(
                f"--vary {key}", "", f"{key} {what} {g}, the plan's own {GRID_KEYS[g]} axis, "
                f"which it would override; vary the other fields one by one, {g} with "
                f"{GRID_KEYS[g]}"
            )
        if not values:
            raise ConfigError(f"--vary {key}", "", "no values")


def _systems(space: SearchSpace) -> dict[str, type]:
    from laminar.sim.registry import all_systems

    registry = all_systems()
    unknown = [s for s in space.systems if s not in registry]
    if unknown:
        raise ConfigError("laminar plan", "--systems", f"unknown system(s) {unknown}; "
                          f"known: {', '.join(registry)}")  # fmt: skip
    return {name: registry[name] for name in space.systems}


def _machine_size(value: Any, gpus: int) -> int:
    """GPUs of a machine as a point sees it (a value the config refuses counts as 1: that
    point is rejected when its config is validated)."""
    try:
        gpm = int(value)
    except (TypeError, ValueError, OverflowError):
        return 1
    return max(1, min(gpm, gpus))


def point_machine(base: LaminarConfig, extra: dict[str, Any]) -> Any:
    """GPUs a machine of a point: the varied ``cluster.gpus_per_machine``, else the base
    config's, except where the point varies ``cluster.hardware`` and the base config's machine
    is its own hardware's default: then the point's hardware's default (a GB200 NVL72 compute
    tray holds 4 GPUs, an HGX machine 8; ``ClusterConfig``'s own rule)."""
    if GPM_KEY in extra:
        return extra[GPM_KEY]
    gpm = base.cluster.gpus_per_machine
    if HW_KEY not in extra or gpm != _default_machine(base.cluster.hardware):
        return gpm
    return _default_machine(extra[HW_KEY])


def _default_machine(hardware: Any) -> int:
    return catalog_machine_gpus(hardware) or DEFAULT_MACHINE_GPUS


def _machine_key(space: SearchSpace) -> str | None:
    """The extra dimension whose values set the machine size, if any."""
    return GPM_KEY if GPM_KEY in space.extra else HW_KEY if HW_KEY in space.extra else None


def count_points(base: LaminarConfig, space: SearchSpace) -> int:
    """How many points :func:`enumerate_points` makes, computed without making them."""
    check_extra(space)
    systems = _systems(space)
    key = _machine_key(space)
    others = math.prod(len(v) for k, v in space.extra.items() if k != key)
    gpms = tuple(point_machine(base, {key: v}) for v in space.extra[key]) if key else (
        base.cluster.gpus_per_machine,
    )
    base_n = (
        len(space.rollout_tps) * len(space.max_batches) * others * len(trainer_layouts(base, space))
    )
    if base_n == 0:
        return 0
    fractions = sorted(set(space.trainer_fractions))
    memo: dict[tuple[int, int], int] = {}
    total = 0
    for gpus in space.gpus:
        sizes = [_machine_size(g, gpus) for g in gpms]
        decoupled = 0
        for gpm in sizes:
            shape = _units(gpus, gpm)
            if shape not in memo:
                memo[shape] = len(_split_ks(shape[1], fractions))
            decoupled += memo[shape]
        for cls in systems.values():
            repacks = len(space.repack) if cls.uses_repack else 1
            splits = len(sizes) if cls.colocated else decoupled
            total += splits * repacks * base_n
    return total


def iter_points(base: LaminarConfig, space: SearchSpace) -> Iterator[Point]:
    """Every point of ``space`` over ``base``, in a fixed order (ids 0, 1, ...)."""
    check_extra(space)
    systems = _systems(space)
    extra_keys = sorted(space.extra)
    layouts = trainer_layouts(base, space)
    pid = 0
    for gpus in space.gpus:
        for name, cls in systems.items():
            repacks = list(space.repack) if cls.uses_repack else [None]
            for combo in itertools.product(*(space.extra[k] for k in extra_keys)):
                extra = tuple(zip(extra_keys, combo, strict=True))
                machine = point_machine(base, dict(extra))
                if GPM_KEY not in space.extra and machine != base.cluster.gpus_per_machine:
                    extra = (*extra, (GPM_KEY, machine))  # the point's hardware's own machine
                gpm = _machine_size(machine, gpus)
                splits = [None] if cls.colocated else _splits(gpus, gpm, space.trainer_fractions)
                for trainer, tp, batch, repack, layout in itertools.product(
                    splits, space.rollout_tps, space.max_batches, repacks, layouts
                ):
                    yield _point(pid, gpus, name, trainer, tp, batch, repack, extra, layout)
                    pid += 1


def enumerate_points(base: LaminarConfig, space: SearchSpace) -> list[Point]:
    """:func:`iter_points` as a list."""
    return list(iter_points(base, space))


def _point(pid, gpus, name, trainer, tp, batch, repack, extra, layout) -> Point:
    ov: dict[str, Any] = dict(extra)  # first: the grid's own keys are set after them
    ov.update({"cluster.gpus": gpus, "sim.systems": [name], "model.rollout_tp": tp,
               "sim.max_batch": batch})  # fmt: skip
    ov.update(zip(LAYOUT_KEYS, layout, strict=True))
    if trainer is not None:
        ov["cluster.trainer_fraction"] = trainer[1]
    if repack is not None:
        ov["repack.enabled"] = repack
    return Point(
        pid=pid,
        gpus=gpus,
        system=name,
        trainer_gpus=None if trainer is None else trainer[0],
        rollout_tp=tp,
        max_batch=batch,
        repack=repack,
        extra=extra,
        overrides=tuple(ov.items()),
        trainer_layout=layout,
    )


def parse_layout(text: str) -> tuple[int, int, int, int]:
    """``TPxPPxEPxCP`` as four degrees; :class:`ConfigError` naming ``--trainer-layouts``."""
    parts = text.strip().lower().split("x")
    try:
        degrees = tuple(int(p) for p in parts)
    except ValueError:
        degrees = ()
    if len(degrees) != 4 or any(not 1 <= d <= 1024 for d in degrees):
        raise ConfigError("laminar plan", "--trainer-layouts", f"{text[:60]!r}: expected "
                          "auto or TPxPPxEPxCP, four degrees 1..1024 (e.g. 1x1x8x1)")  # fmt: skip
    return degrees  # type: ignore[return-value]


def trainer_layouts(base: LaminarConfig, space: SearchSpace) -> list[tuple[int, int, int, int]]:
    """The layouts every point is tried with: ``space.trainer_layouts`` with ``auto``
    expanded (module doc), duplicates dropped, in order."""
    out: list[tuple[int, int, int, int]] = []
    for text in space.trainer_layouts:
        if text.strip().lower() == "auto":
            out += _auto_layouts(base)
        else:
            out.append(parse_layout(text))
    return list(dict.fromkeys(out))


def _auto_layouts(base: LaminarConfig) -> list[tuple[int, int, int, int]]:
    t = base.trainer
    found = [(t.tp, t.pp, t.ep, t.cp), (1, 1, 1, 1)]
    try:
        from laminar.specs.model import model_spec

        spec = model_spec(base.model)
    except ConfigError:  # a runtime model known only by its cost file
        return found
    if spec.is_moe:
        found.append((1, 1, min(spec.experts, base.cluster.gpus_per_machine), 1))
    return found


def _units(gpus: int, gpm: int) -> tuple[int, int]:
    """(GPUs a unit, units) the trainer split counts in: machines, or GPUs below two."""
    machines = gpus // gpm
    return (gpm, machines) if machines >= 2 else (1, gpm)


def _split_ks(count: int, fractions) -> dict[int, float]:
    out: dict[int, float] = {}
    for f in fractions:
        k = min(count - 1, max(1, round(f * count)))
        out.setdefault(k, k / count)
    return out


def _splits(gpus: int, gpm: int, fractions) -> list[tuple[int, float]]:
    """(trainer GPUs, ``cluster.trainer_fraction``) per distinct split, whole machines.

    ``laminar.sim.systems.System.split`` rounds the fraction to machines (to GPUs below two
    machines); the fraction written is k / machines exactly, so it lands on k."""
    unit, count = _units(gpus, gpm)
    out = _split_ks(count, fractions)
    return [(k * unit, frac) for k, frac in sorted(out.items())]


def point_data(base_data: dict, point: Point) -> dict:
    """The raw (not yet validated) config mapping of ``point``."""
    from laminar.config.loader import apply_override

    data = _deep_copy(base_data)
    for key, value in point.overrides:
        apply_override(data, key.split("."), _deep_copy(value), f"{key}={value}")
    return data


def point_config(base_data: dict, point: Point) -> LaminarConfig:
    """The validated config of ``point`` (``base_data``: the base config's ``model_dump``)."""
    from laminar.config.loader import validate

    return validate(point_data(base_data, point), f"plan point {point.pid}", {})


def _deep_copy(d):
    if isinstance(d, dict):
        return {k: _deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deep_copy(v) for v in d]
    return d
