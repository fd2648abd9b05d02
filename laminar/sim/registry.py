"""Every simulated system by name: Laminar (``laminar.sim.systems``) and the baselines
(``laminar.sim.baselines``), which subclass it; kept apart so neither module imports the other
back."""

from __future__ import annotations

from laminar.errors import ConfigError
from laminar.sim.baselines import BASELINES
from laminar.sim.systems import SYSTEMS, System


def all_systems() -> dict[str, type[System]]:
    """Every system by name: Laminar and the baselines."""
    return {**SYSTEMS, **{s.name: s for s in BASELINES}}


def resolve_systems(names: list[str]) -> list[type[System]]:
    """The system classes for ``sim.systems`` (``all``: every registered system)."""
    registry = all_systems()
    out: list[type[System]] = []
    for name in names:
        if name == "all":
            out += [s for s in registry.values() if s not in out]
        elif name in registry:
            if registry[name] not in out:
                out.append(registry[name])
        else:
            known = ", ".join([*registry, "all"])
            raise ConfigError("config", "sim.systems", f"unknown system {name!r}; known: {known}")
    return out
