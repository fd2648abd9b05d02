"""A plan row's settings, read back from what was simulated.

A row of ``plan.csv`` never copies the search grid: its GPU count, system, trainer GPUs,
rollout TP, max batch, repack switch and every varied key are read from the resolved config
the point ran with (and, once simulated, the GPU count, system and trainer GPUs from the
simulation's own summary), so a row cannot say one thing while another was simulated.
"""

from __future__ import annotations

from typing import Any

MISSING = object()


def lookup(data: dict, key: str) -> Any:
    """The value at dotted ``key`` in a config mapping (:data:`MISSING` when absent)."""
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def settings(data: dict, extra_keys, cfg=None) -> dict[str, Any]:
    """Row settings from a point's config mapping ``data`` (validated into ``cfg`` when it
    validated): the grid's columns, then one column per varied key."""
    from laminar.sim.registry import all_systems

    systems = lookup(data, "sim.systems")
    system = systems[0] if isinstance(systems, list) and len(systems) == 1 else systems
    cls = all_systems().get(system) if isinstance(system, str) else None
    repack = lookup(data, "repack.enabled")
    row = {
        "gpus": lookup(data, "cluster.gpus"),
        "system": system,
        "trainer_gpus": _trainer_gpus(cfg, cls),
        "rollout_tp": lookup(data, "model.rollout_tp"),
        "max_batch": lookup(data, "sim.max_batch"),
        "repack": str(repack).lower() if cls is not None and cls.uses_repack else "",
        "trainer_layout": "x".join(
            str(lookup(data, f"trainer.{k}") if lookup(data, f"trainer.{k}") is not MISSING else 1)
            for k in ("tp", "pp", "ep", "cp")
        ),
    }
    for key in extra_keys:
        row[key] = lookup(data, key)
    return {k: (None if v is MISSING else _cell(v)) for k, v in row.items()}


def _trainer_gpus(cfg, cls) -> int | None:
    """The trainer's GPUs of a valid config: every GPU for a colocated system, else the
    decoupled split (the simulator's own rule, ``laminar.specs.memory``)."""
    from laminar.specs.memory import decoupled_trainer_gpus

    if cfg is None or cls is None:
        return None
    if cls.colocated:
        return cfg.cluster.gpus
    gpus = decoupled_trainer_gpus(cfg.cluster, cfg.model.rollout_tp * cfg.model.rollout_ep)
    return gpus if gpus >= 1 else None


def _cell(v: Any) -> Any:
    """A CSV cell: scalars as they are, anything else as its compact text."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def canonical_split(cfg, cls):
    """``cfg`` with ``cluster.trainer_fraction`` written as the split it resolves to (trainer
    GPUs / GPUs), so two fractions that land on one split are one config (and one simulation).
    Colocated systems and splits the simulator would refuse are left as they are."""
    if cls.colocated:
        return cfg
    trainer = _trainer_gpus(cfg, cls)
    if trainer is None:
        return cfg
    frac = trainer / cfg.cluster.gpus
    if frac == cfg.cluster.trainer_fraction or not 0 < frac < 1:
        return cfg
    from laminar.specs.memory import decoupled_trainer_gpus

    cluster = cfg.cluster.model_copy(update={"trainer_fraction": frac})
    if decoupled_trainer_gpus(cluster, cfg.model.rollout_tp * cfg.model.rollout_ep) != trainer:
        return cfg  # rounding would move it: keep the fraction the grid wrote
    return cfg.model_copy(update={"cluster": cluster})
