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
    nvlink_spans_machines: bool = False  # a rack-scale domain (GB200 NVL72), not one machine's
    machine_gpus: int = 0  # GPUs in one of its machines where the catalog says; 0: not stated

    def __getitem__(self, key: str) -> float:
        return self.facts[key].value

    @property
    def catalog_name(self) -> str:
        """The catalog entry this spec starts from (``h20`` for ``h20+spec``)."""
        return self.name.removesuffix("+spec")

    def nvlink_gpus(self, gpus_per_machine: int) -> int:
        """GPUs one NVLink domain holds, laid out in machines of ``gpus_per_machine``: a group
        of at most this many talks over NVLink, a larger one over the NICs. Inside one machine
        (capped at it) unless the domain spans machines (``nvlink_spans_machines``)."""
        domain = int(self["nvlink_domain_gpus"])
        return domain if self.nvlink_spans_machines else min(domain, gpus_per_machine)

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


DEFAULT_MACHINE_GPUS = 8
"""GPUs in a machine where neither the config nor the GPU's catalog entry says (an HGX board)."""


def _machine_gpus(entry: dict[str, Any]) -> int:
    return int(entry.get("machine", {}).get("gpus", 0))


def catalog_machine_gpus(name: Any) -> int:
    """GPUs in one machine of catalog GPU ``name`` where its entry says (a GB200 NVL72 compute
    tray: 4); 0 where it does not, or for anything not a catalog name."""
    return _machine_gpus(_table()["gpus"].get(name, {})) if isinstance(name, str) else 0


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
    entry = gpus[name]
    return HardwareSpec(
        name,
        entry.get("arch", ""),
        facts,
        bool(entry.get("nvlink_spans_machines", False)),
        _machine_gpus(entry),
    )


def hardware_spec(cluster: Any) -> HardwareSpec:
    """The hardware a config's ``cluster`` section names: ``cluster.hardware`` from the
    catalog, with any ``cluster.hardware_spec`` facts put over it (checked by
    :func:`check_overrides`)."""
    base = catalog_hardware(cluster.hardware)
    _check_machine(cluster, base)
    extra = dict(cluster.hardware_spec or {})
    if not extra:
        return base
    try:
        checked = check_overrides(extra)
    except ValueError as e:
        key, _, msg = str(e).partition(": ")
        raise ConfigError("config", f"cluster.hardware_spec.{key}", msg) from None
    facts = dict(base.facts)
    arch = str(checked.pop("arch", base.arch))
    spans = bool(checked.pop("nvlink_spans_machines", base.nvlink_spans_machines))
    for key, value in checked.items():
        unit = facts[key].unit
        facts[key] = Fact(float(value), unit, "cluster.hardware_spec", "config", "the run's config")
    return HardwareSpec(cluster.hardware + "+spec", arch, facts, spans, base.machine_gpus)


def _check_machine(cluster: Any, hw: HardwareSpec) -> None:
    """A GPU whose catalog entry names its machine's size (a GB200 NVL72 compute tray holds 4)
    is refused at another ``cluster.gpus_per_machine`` that the config left at its default:
    the machine's NICs and PCIe would be shared by GPUs it does not have. Set explicitly, the
    config's size stands (a user's own build)."""
    set_fields = getattr(cluster, "model_fields_set", None)
    if not hw.machine_gpus or set_fields is None or "gpus_per_machine" in set_fields:
        return
    if cluster.gpus_per_machine != hw.machine_gpus:
        raise ConfigError(
            "config",
            "cluster.gpus_per_machine",
            f"{hw.name} machines hold {hw.machine_gpus} GPUs, not the default "
            f"{cluster.gpus_per_machine}; set cluster.gpus_per_machine: {hw.machine_gpus} "
            "(or your machines' size)",
        )


SPEC_FACTOR = 10.0
"""How far beyond the catalog a ``cluster.hardware_spec`` fact may lie: from a tenth of the
catalog's smallest value to ten times its largest (a GPU ten times an H200's bandwidth or a
B200's FLOPs is a typo or a unit slip, not a product)."""


def check_overrides(spec: dict[str, Any]) -> dict[str, float | str | bool]:
    """``cluster.hardware_spec`` checked: every key a fact of the catalog (or ``arch``, or
    ``nvlink_spans_machines`` as true/false), every value a finite number within
    :func:`fact_range` (text that parses as one counts: YAML 1.1 and quoted TOML write ``96e9``
    as text). Raises ``ValueError("key: what is wrong")``."""
    ranges = fact_ranges()
    out: dict[str, float | str | bool] = {}
    for key, value in spec.items():
        if key == "nvlink_spans_machines":
            if not isinstance(value, bool):
                raise ValueError(f"nvlink_spans_machines: expected true or false (whether the "
                                 f"NVLink domain spans machines), got {value!r:.40}")  # fmt: skip
            out[key] = value
            continue
        if key == "arch":
            if not isinstance(value, str) or not 0 < len(value) <= 32:
                raise ValueError(f"arch: expected an architecture name of 1..32 characters "
                                 f"(ampere, hopper, ...), got {value!r:.40}")  # fmt: skip
            out[key] = value
            continue
        if key not in ranges:
            raise ValueError(
                f"{str(key)[:40]}: unknown fact; known: arch, nvlink_spans_machines, "
                f"{', '.join(sorted(ranges))}"
            )
        out[key] = ranges[key].check(key, _number(value, key))
    return out


@dataclass(frozen=True, slots=True)
class FactRange:
    """Where one overridden fact may lie (:data:`SPEC_FACTOR`), and why."""

    low: float
    high: float
    unit: str
    why: str
    whole: bool = False
    zero: bool = False  # 0 allowed besides the range (fp8_flops: no FP8 tensor cores)
    open_low: bool = False  # ``low`` itself excluded (an efficiency of 0 divides by zero)

    def check(self, key: str, value: float) -> float:
        if self.zero and value == 0:
            return value
        unit = "" if self.unit == "1" else f" {self.unit}"
        if not self.low <= value <= self.high or (self.open_low and value == self.low):
            lo = f"{'>' if self.open_low else ''}{self.low:.3g}"
            raise ValueError(f"{key}: {value:.3g}{unit} is outside {lo}..{self.high:.3g}{unit} "
                             f"({self.why})")  # fmt: skip
        if self.whole and value != int(value):
            raise ValueError(f"{key}: {value:g} must be a whole number")
        return value


def fact_ranges() -> dict[str, FactRange]:
    """Each fact's range for ``cluster.hardware_spec`` (:data:`SPEC_FACTOR` around the
    catalog): efficiencies in (0, 1], latencies from 0, counts whole, every other fact from a
    tenth of the catalog's smallest to ten times its largest value."""
    table = _table()
    seen: dict[str, list[tuple[float, str]]] = {}
    units: dict[str, str] = {}
    for gpu, entry in table["gpus"].items():
        merged = {**table["efficiencies"], **entry["facts"], **entry.get("efficiencies", {})}
        for key, fact in merged.items():
            seen.setdefault(key, []).append((float(fact["value"]), gpu))
            units[key] = fact["unit"]
    out = {}
    for key, values in seen.items():
        unit, positive = units[key], [(v, g) for v, g in values if v > 0]
        lo_v, lo_g = min(positive or values)
        hi_v, hi_g = max(values)
        f = SPEC_FACTOR
        if unit == "1":
            out[key] = FactRange(0.0, 1.0, unit, "a fraction of a peak", open_low=True)
        elif unit == "s":  # latencies differ more between interconnects than rates do
            why = f"0 to {f * f:g}x the catalog's {hi_v:g} s"
            out[key] = FactRange(0.0, hi_v * f * f, unit, why)
        else:
            why = (f"{1 / f:g}x the catalog's smallest ({lo_g} {lo_v:.3g}) to {f:g}x its largest "
                   f"({hi_g} {hi_v:.3g})")  # fmt: skip
            whole = unit in ("GPUs", "NICs")
            low = max(1.0, lo_v / f) if whole else lo_v / f
            out[key] = FactRange(low, hi_v * f, unit, why, whole, zero=key in ZERO_FACTS)
    return out


ZERO_FACTS = frozenset({"fp8_flops", "activation_reserve_bytes"})
"""Facts whose 0 means "none" (no FP8 tensor cores; nothing kept back from the KV cache)."""


def _number(value: Any, path: str) -> float:
    """A finite number; text that parses as one counts (quoted in TOML or YAML: ``"96e9"``)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{path}: expected a finite number (got {value!r:.40})")
    return float(value)
