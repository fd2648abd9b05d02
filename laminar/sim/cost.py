"""The cost model: every duration the simulator charges comes through :class:`CostModel`.

The interface is narrow on purpose (DESIGN.md, "The simulator"): a decode step, a prefill, a
training step, a transfer over a link. A calibrated model only has to supply the coefficients
below, each with a unit and a written source; ``laminar.sim.costdata`` derives them from the
hardware and model facts in ``laminar/data/*.json`` or reads them back from a JSON file.

The decode step is linear in the KV, t(b, kv) = fixed(b) + kv·decode_per_kv_token_s, with
fixed(b) = decode_base_s + b·decode_per_seq_s + experts(b)·decode_per_expert_s, because the
event-skipping decode model (``laminar.sim.decode``) sums it in closed form while the batch b is
constant. experts(b) = moe_experts·(1 − (1 − k/moe_experts)^b) is the expected number of routed
experts a MoE layer reads for b tokens (k = moe_experts_per_token); 0 for dense models. An eager
engine (no CUDA graphs) waits for the host's kernel launches, so fixed(b) is at least
decode_min_step_s (0: CUDA graphs, no floor); the KV term stays linear on top.

Coefficients in :data:`OPTIONAL_UNITS` may be left out of a cost file: their defaults are what
a file written before they existed meant (a dense model, no data-parallel sync charged, the
old-log-prob forward inside ``train_flop_per_token``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from laminar.costfile import COEFFICIENTS, OPTIONAL, read_cost_file

# name -> unit. A cost file must give each one; ``laminar.sim.costdata`` derives them. Their
# meaning is in :class:`CostModel`'s methods, their ranges in ``laminar.costfile``.
COEFFICIENT_UNITS: dict[str, str] = {name: unit for name, (unit, _) in COEFFICIENTS.items()}

# name -> (unit, default when a cost file leaves it out).
OPTIONAL_UNITS: dict[str, tuple[str, float]] = {
    name: (unit, default) for name, (unit, default, _) in OPTIONAL.items()
}

LINKS = ("pcie", "nvlink", "rdma")


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
        self.nvlink_gpus = int(self.nvlink_gpus) or self.machine_gpus
        self.kv_capacity_tokens = int(self.kv_capacity_tokens)
        if self.decode_step_s(1, 0) <= 0:
            raise ValueError("a decode step must take time: decode_base_s + decode_per_seq_s > 0")

    # The four operations -------------------------------------------------------------------

    def decode_step_s(self, batch: int, kv_tokens: float) -> float:
        """Seconds of one decode step of ``batch`` sequences holding ``kv_tokens`` in KV."""
        return self.decode_fixed_s(batch) + kv_tokens * self.decode_per_kv_token_s

    def decode_fixed_s(self, batch: int) -> float:
        """The part of a decode step that depends on the batch only: weights (dense, and the
        routed experts the batch touches), all-reduces and all-to-alls, matmul FLOPs; at least
        ``decode_min_step_s`` (an eager engine's host launches)."""
        t = self.decode_base_s + batch * self.decode_per_seq_s
        if self.moe_experts and batch > 0:
            e, k = self.moe_experts, self.moe_experts_per_token
            t += e * (1.0 - (1.0 - k / e) ** batch) * self.decode_per_expert_s
        return t if t >= self.decode_min_step_s else self.decode_min_step_s

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

    def logprob_s(self, seq_lens: Iterable[int], gpus: int) -> float:
        """The part of :meth:`train_s` (``old_logprob=True``) that is the old-log-prob forward
        on ``gpus`` trainer GPUs (0 for a cost file without ``logprob_*`` coefficients)."""
        total = sq = 0
        for n in seq_lens:
            total += n
            sq += n * n
        flop = total * self.logprob_flop_per_token + sq * self.logprob_flop_per_token_sq
        return flop / (gpus * self.train_flop_per_s_per_gpu)

    def train_sync_s(self, gpus: int) -> float:
        """Seconds of the gradient all-reduce (reduce-scatter + all-gather, ring: 2(g-1)/g of
        the bytes through each GPU) that ends a step on ``gpus`` data-parallel GPUs: over
        NVLink inside one NVLink domain, else over each GPU's share of its machine's NICs."""
        if gpus <= 1 or not self.train_sync_bytes:
            return 0.0
        if gpus <= self.nvlink_gpus:
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
    """The cost model of a cost file, read and checked by ``laminar.costfile`` (errors name the
    file and the coefficient, with its range)."""
    checked = read_cost_file(path)
    coeffs = {name: Coefficient(*entry) for name, entry in checked.coefficients.items()}
    return CostModel(coeffs, checked.label)
