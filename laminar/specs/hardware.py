"""A GPU's facts and efficiencies, from ``laminar/data/hardware.json`` or an inline spec.

Every fact carries its value, unit and source. The efficiencies (fractions of a peak that
real kernels reach, latencies) carry a ``basis`` as well: ``calibrated`` with ``where`` it was
measured, or ``assumed``. ``cluster.hardware_spec`` overrides any of them for a run (its basis
becomes ``config``), so a GPU not in the catalog is a named one plus the facts that differ.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any

from laminar.errors import ConfigError

FACT_UNITS: dict[str, str] = {
    "gpu_memory_bytes": "bytes",
    "hbm_bytes_per_s": "bytes/s",
    "bf16_flops": "FLOP/s",
    "fp8_flops": "FLOP/s",  # 0: no FP8 tensor cores (fp8 weights computed in BF16)
    "nvlink_bytes_per_s": "bytes/s",  # one direction, GPU to GPU inside the domain
    "nvlink_domain_gpus": "GPUs",
    "pcie_bytes_per_s": "bytes/s",  # one direction, host <-> GPU
    "nics_per_machine": "NICs",
    "nic_bytes_per_s": "bytes/s",  # one NIC, one direction
}
POSITIVE_FACTS = frozenset(FACT_UNITS) - {"fp8_flops"}


@dataclass(frozen=True, slots=True)
class Fact:
    """One number with its unit, source and basis (``datasheet``, ``calibrated``,
    ``assumed`` or ``config``) and, when calibrated, where."""

    value: float
    unit: str
    source: str
    basis: str = "datasheet"
    where: str = ""

    def cite(self) -> str:
        """The basis and where, for a derived coefficient's source string."""
        return f"{self.basis}: {self.where}" if self.where else self.basis


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """A GPU type: datasheet facts and efficiencies (see module docstring)."""

    name: str
    arch: str
    facts: dict[str, Fact]

    def __getitem__(self, key: str) -> float:
        return self.facts[key].value

    @property
    def machine_nic_bytes_per_s(self) -> float:
        """All NICs of one machine, one direction."""
        return self["nics_per_machine"] * self["nic_bytes_per_s"]

    def peak_flops(self, fp8: bool) -> float:
        """Dense tensor-core peak for BF16, or FP8 where the GPU has FP8 tensor cores."""
        return self["fp8_flops"] if fp8 and self["fp8_flops"] > 0 else self["bf16_flops"]

    def basis(self) -> dict[str, list[str]]:
        """Names of the efficiencies by basis (``calibrated``, ``assumed``, ``config``)."""
        out: dict[str, list[str]] = {}
        for name, f in sorted(self.facts.items()):
            if f.basis != "datasheet":
                out.setdefault(f.basis, []).append(name)
        return out


def _table() -> dict[str, Any]:
    return json.loads((resources.files("laminar") / "data" / "hardware.json").read_text())


def hardware_names() -> list[str]:
    """GPU types shipped in ``laminar/data/hardware.json``."""
    return sorted(_table()["gpus"])


def catalog_hardware(name: str) -> HardwareSpec:
    """The catalog's :class:`HardwareSpec` of ``name`` (datasheet facts + efficiencies)."""
    table = _table()
    gpus = table["gpus"]
    if name not in gpus:
        raise ConfigError(
            "config",
            "cluster.hardware",
            f"unknown hardware {name!r}; known: {', '.join(sorted(gpus))} "
            "(or override facts with cluster.hardware_spec)",
        )
    facts = {
        k: Fact(float(v["value"]), v["unit"], v["source"]) for k, v in gpus[name]["facts"].items()
    }
    merged = {**table["efficiencies"], **gpus[name].get("efficiencies", {})}
    for k, v in merged.items():
        facts[k] = Fact(float(v["value"]), v["unit"], v["source"], v["basis"], v.get("where", ""))
    return HardwareSpec(name, gpus[name].get("arch", ""), facts)


def hardware_spec(cluster: Any) -> HardwareSpec:
    """The hardware a config's ``cluster`` section names: ``cluster.hardware`` from the
    catalog, with any ``cluster.hardware_spec`` facts put over it."""
    base = catalog_hardware(cluster.hardware)
    extra = dict(cluster.hardware_spec or {})
    if not extra:
        return base
    facts = dict(base.facts)
    arch = base.arch
    for key, value in extra.items():
        path = f"cluster.hardware_spec.{key}"
        if key == "arch":
            arch = str(value)
            continue
        if key not in facts:
            raise ConfigError(
                "config", path, f"unknown fact; known: arch, {', '.join(sorted(facts))}"
            )
        value = _number(value, path)
        if value < 0 or (value == 0 and key in POSITIVE_FACTS):
            raise ConfigError(
                "config", path, f"must be {'> 0' if key in POSITIVE_FACTS else '>= 0'}"
            )
        unit = facts[key].unit
        facts[key] = Fact(float(value), unit, "cluster.hardware_spec", "config", "the run's config")
    name = cluster.hardware + "+spec"
    return HardwareSpec(name, arch, facts)


def _number(value: Any, path: str) -> float:
    """A finite number; YAML 1.1 reads ``96e9`` (no dot) as text, so text that parses counts."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError("config", path, f"expected a finite number (got {value!r})")
    return float(value)
