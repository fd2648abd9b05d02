"""The cost model: every duration the simulator charges comes through :class:`CostModel`.

The interface is narrow on purpose (DESIGN.md, "The simulator"): a decode step, a prefill, a
training step, a transfer over a link. A calibrated model only has to supply the coefficients
below, each with a unit and a written source; ``laminar.sim.costdata`` derives them from the
hardware and model facts in ``laminar/data/*.json`` or reads them back from a JSON file.

The decode step is linear in the KV, t(b, kv) = fixed(b) + kv·decode_per_kv_token_s, with
fixed(b) = decode_base_s + b·decode_per_seq_s + experts(b)·decode_per_expert_s, because the
event-skipping decode model (``laminar.sim.decode``) sums it in closed form while the batch b is
constant. experts(b) = moe_experts·(1 − (1 − k/moe_experts)^b) is the expected number of routed
experts a MoE layer reads for b tokens (k = moe_experts_per_token); 0 for dense models.

Coefficients in :data:`OPTIONAL_UNITS` may be left out of a cost file: their defaults are what
a file written before they existed meant (a dense model, no data-parallel sync charged, the
old-log-prob forward inside ``train_flop_per_token``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError

# name -> unit. A cost file must give each one; ``laminar.sim.costdata`` derives them.
COEFFICIENT_UNITS: dict[str, str] = {
    "replica_gpus": "GPUs",  # GPUs of one rollout replica (its TP degree)
    "weight_bytes": "bytes",  # the whole model's weights
    "kv_capacity_tokens": "tokens",  # KV cache of one rollout replica
    "decode_base_s": "s",  # per decode step, whatever the batch: reading the weights
    "decode_per_seq_s": "s/sequence",  # per running sequence per step: its matmul FLOPs
    "decode_per_kv_token_s": "s/token",  # per cached token per step: reading its K and V
    "prefill_base_s": "s",  # per prefill batch: reading the weights once
    "prefill_per_token_s": "s/token",  # per prompt token: its matmul FLOPs
    "prefill_per_token_sq_s": "s/token^2",  # per squared sequence length: causal attention
    "train_flop_per_token": "FLOP/token",  # trainer FLOPs per trained token (linear layers)
    "train_flop_per_token_sq": "FLOP/token^2",  # trainer attention FLOPs per squared length
    "train_flop_per_s_per_gpu": "FLOP/s",  # achieved trainer FLOP rate of one GPU
    "pcie_bytes_per_s": "bytes/s",  # host <-> one GPU, effective
    "nvlink_bytes_per_s": "bytes/s",  # GPU <-> GPU inside a machine
    "rdma_bytes_per_s": "bytes/s",  # machine <-> machine over all its NICs, effective
    "rdma_startup_s": "s",  # per RDMA message (the alpha of App. D)
}

# name -> (unit, default when a cost file leaves it out).
OPTIONAL_UNITS: dict[str, tuple[str, float]] = {
    "moe_experts": ("experts", 0.0),  # routed experts per MoE layer; 0: dense
    "moe_experts_per_token": ("experts", 0.0),  # k: experts each token is routed to
    "decode_per_expert_s": ("s/expert", 0.0),  # per distinct routed expert read per step
    "logprob_flop_per_token": ("FLOP/token", 0.0),  # old-log-prob forward, linear layers
    "logprob_flop_per_token_sq": ("FLOP/token^2", 0.0),  # its causal attention
    "train_sync_bytes": ("bytes", 0.0),  # gradients all-reduced per step over trainer GPUs
    "machine_gpus": ("GPUs", 8.0),  # GPUs per machine: beyond it, the sync crosses NICs
}

LINKS = ("pcie", "nvlink", "rdma")

# Coefficients that divide or count: zero would make a duration infinite or a replica useless.
POSITIVE = frozenset(
    {
        "replica_gpus",
        "weight_bytes",
        "kv_capacity_tokens",
        "train_flop_per_s_per_gpu",
        "pcie_bytes_per_s",
        "nvlink_bytes_per_s",
        "rdma_bytes_per_s",
        "machine_gpus",
    }
)


@dataclass(frozen=True, slots=True)
class Coefficient:
    """One named number of the cost model, with its unit and where it comes from."""

    value: float
    unit: str
    source: str


class CostModel:
    """Durations of the simulated operations, from named coefficients (see module docstring)."""

    def __init__(self, coefficients: Mapping[str, Coefficient], label: str):
        missing = sorted(set(COEFFICIENT_UNITS) - set(coefficients))
        if missing:
            raise ValueError(f"cost model lacks coefficients: {', '.join(missing)}")
        self.coefficients = dict(coefficients)
        self.label = label
        self.coefficients = {
            **{n: Coefficient(d, u, "default") for n, (u, d) in OPTIONAL_UNITS.items()},
            **self.coefficients,
        }
        for name in (*COEFFICIENT_UNITS, *OPTIONAL_UNITS):
            setattr(self, name, float(self.coefficients[name].value))
        self.replica_gpus = int(self.replica_gpus)
        self.machine_gpus = int(self.machine_gpus)
        self.kv_capacity_tokens = int(self.kv_capacity_tokens)
        if self.decode_step_s(1, 0) <= 0:
            raise ValueError("a decode step must take time: decode_base_s + decode_per_seq_s > 0")

    # The four operations -------------------------------------------------------------------

    def decode_step_s(self, batch: int, kv_tokens: float) -> float:
        """Seconds of one decode step of ``batch`` sequences holding ``kv_tokens`` in KV."""
        return self.decode_fixed_s(batch) + kv_tokens * self.decode_per_kv_token_s

    def decode_fixed_s(self, batch: int) -> float:
        """The part of a decode step that depends on the batch only: weights (dense, and the
        routed experts the batch touches), all-reduces and all-to-alls, matmul FLOPs."""
        t = self.decode_base_s + batch * self.decode_per_seq_s
        if self.moe_experts and batch > 0:
            e, k = self.moe_experts, self.moe_experts_per_token
            t += e * (1.0 - (1.0 - k / e) ** batch) * self.decode_per_expert_s
        return t

    def prefill_s(self, lengths: Iterable[int]) -> float:
        """Seconds to prefill one batch of sequences of these lengths (tokens); 0 for none."""
        total = sq = 0
        for n in lengths:
            total += n
            sq += n * n
        if total == 0:
            return 0.0
        return (
            self.prefill_base_s
            + total * self.prefill_per_token_s
            + sq * self.prefill_per_token_sq_s
        )

    def train_s(self, seq_lens: Iterable[int], gpus: int, *, old_logprob: bool = True) -> float:
        """Seconds for ``gpus`` trainer GPUs to train one step on sequences of these lengths
        (tokens): forward + backward, the old-log-prob forward when ``old_logprob``, and the
        data-parallel gradient sync at the end of the step (:meth:`train_sync_s`)."""
        if gpus < 1:
            raise ValueError("training needs at least one GPU")
        total = sq = 0
        for n in seq_lens:
            total += n
            sq += n * n
        flop = total * self.train_flop_per_token + sq * self.train_flop_per_token_sq
        if old_logprob:
            flop += total * self.logprob_flop_per_token + sq * self.logprob_flop_per_token_sq
        return flop / (gpus * self.train_flop_per_s_per_gpu) + self.train_sync_s(gpus)

    def train_sync_s(self, gpus: int) -> float:
        """Seconds of the gradient all-reduce (reduce-scatter + all-gather, ring: 2(g-1)/g of
        the bytes through each GPU) that ends a step on ``gpus`` data-parallel GPUs: over
        NVLink inside a machine, else over each GPU's share of its machine's NICs."""
        if gpus <= 1 or not self.train_sync_bytes:
            return 0.0
        if gpus <= self.machine_gpus:
            bw = self.nvlink_bytes_per_s
        else:
            bw = self.rdma_bytes_per_s / self.machine_gpus
        return 2 * (gpus - 1) / gpus * self.train_sync_bytes / bw

    def transfer_s(self, nbytes: float, link: str) -> float:
        """Seconds to move ``nbytes`` over one ``link`` (``pcie``, ``nvlink`` or ``rdma``)."""
        if link == "pcie":
            return nbytes / self.pcie_bytes_per_s
        if link == "nvlink":
            return nbytes / self.nvlink_bytes_per_s
        if link == "rdma":
            return self.rdma_startup_s + nbytes / self.rdma_bytes_per_s
        raise ValueError(f"unknown link {link!r}; expected one of {', '.join(LINKS)}")

    # Derived quantities the relay chain needs -------------------------------------------------

    @property
    def rdma_beta_s_per_byte(self) -> float:
        """Per-byte cost β of one chain hop (App. D.1)."""
        return 1.0 / self.rdma_bytes_per_s

    # Files ------------------------------------------------------------------------------------

    def to_json(self) -> str:
        """The coefficients as JSON (what :func:`load_cost_file` reads back)."""
        body = {
            "label": self.label,
            "coefficients": {
                name: {"value": c.value, "unit": c.unit, "source": c.source}
                for name, c in sorted(self.coefficients.items())
            },
        }
        return json.dumps(body, indent=2) + "\n"


def load_cost_file(path: str | Path) -> CostModel:
    """Read a cost model from JSON; errors name the file and the coefficient."""
    p = Path(path)
    if "\x00" in str(p):
        raise ConfigError(repr(str(p)), "", "a path cannot hold a NUL character")
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise ConfigError(str(p), "", f"cannot read cost file: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(str(p), "", f"not valid JSON: {e}") from None
    except (UnicodeDecodeError, RecursionError):
        detail = "not a JSON text file (undecodable, or nested too deeply)"
        raise ConfigError(str(p), "", detail) from None
    table = data.get("coefficients") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ConfigError(str(p), "coefficients", "expected a mapping of name -> {value, unit}")
    out: dict[str, Coefficient] = {}
    for name, unit in COEFFICIENT_UNITS.items():
        out[name] = _read_coefficient(str(p), name, unit, table.get(name))
    for name, (unit, _) in OPTIONAL_UNITS.items():
        if name in table:
            out[name] = _read_coefficient(str(p), name, unit, table[name])
    unknown = sorted(set(table) - set(COEFFICIENT_UNITS) - set(OPTIONAL_UNITS))
    if unknown:
        raise ConfigError(str(p), f"coefficients.{unknown[0]}", "unknown coefficient")
    return CostModel(out, str(data.get("label", p.name)))


def _read_coefficient(path: str, name: str, unit: str, entry: Any) -> Coefficient:
    key = f"coefficients.{name}"
    if not isinstance(entry, dict) or "value" not in entry:
        raise ConfigError(path, key, f"missing; expected {{value: ..., unit: {unit!r}}}")
    value = entry["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(path, key, f"value must be a finite number (got {value!r})")
    if value < 0 or (value == 0 and name in POSITIVE):
        bound = "> 0" if name in POSITIVE else ">= 0"
        raise ConfigError(path, key, f"value must be {bound} (got {value})")
    if entry.get("unit", unit) != unit:
        raise ConfigError(path, key, f"unit must be {unit!r} (got {entry.get('unit')!r})")
    return Coefficient(float(value), unit, str(entry.get("source", f"from {path}")))
