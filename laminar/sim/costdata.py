"""Derive cost-model coefficients from hardware and model facts (``laminar/data/*.json``).

Each fact in the data files carries its value, unit and source. The derivations below turn them
into the coefficients of :class:`laminar.sim.cost.CostModel`; each derived coefficient's source
string records the formula and the numbers that went in, so ``cost_model.json`` in a run
directory explains itself. Model facts: DESIGN.md's table (Qwen2.5 config.json files).

Decode is memory-bound at rollout batch sizes (DESIGN.md): a step reads the weights once per
replica plus the K and V of every cached token; the per-sequence term is the matmul FLOPs. The
three efficiencies come from DistServe's fitted vLLM profile (see ``hardware.json``).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.sim.cost import Coefficient, CostModel, load_cost_file

BYTES_PER_PARAM = {"bfloat16": 2, "float16": 2, "float32": 4}

# Trainer FLOPs per token in units of the parameter count: forward + backward of the policy
# (6N, Kaplan et al. 2020) plus one forward to recompute the old policy's log-probs (2N), as
# GRPO trainers such as verl do before the update. DAPO drops the KL term, so no reference model.
TRAIN_FLOP_PER_PARAM_TOKEN = 8


def _table(name: str) -> dict[str, Any]:
    text = (resources.files("laminar") / "data" / name).read_text()
    return json.loads(text)


def hardware_names() -> list[str]:
    """Hardware presets shipped in ``laminar/data/hardware.json``."""
    return sorted(_table("hardware.json"))


def model_names() -> list[str]:
    """Model presets shipped in ``laminar/data/models.json``."""
    return sorted(_table("models.json"))


def _facts(table: str, name: str, key_path: str) -> dict[str, float]:
    data = _table(table)
    if name not in data:
        raise ConfigError("config", key_path, f"unknown preset {name!r}; known: {', '.join(data)}")
    return {k: float(v["value"]) for k, v in data[name]["facts"].items()}


def cost_model_for(cfg: LaminarConfig) -> CostModel:
    """The cost model a run uses: ``sim.cost_file`` when given, else derived from the presets."""
    if cfg.sim.cost_file:
        return load_cost_file(cfg.sim.cost_file)
    return derive(
        cfg.cluster.hardware,
        cfg.model.name,
        tp=cfg.model.rollout_tp,
        dtype=cfg.model.dtype,
        memory_utilization=cfg.sim.gpu_memory_utilization,
    )


def derive(
    hardware: str, model: str, *, tp: int, dtype: str = "bfloat16", memory_utilization: float = 0.9
) -> CostModel:
    """Coefficients for one rollout replica of ``tp`` GPUs of ``hardware`` serving ``model``."""
    hw = _facts("hardware.json", hardware, "cluster.hardware")
    m = _facts("models.json", model, "model.name")
    nbytes = BYTES_PER_PARAM[dtype]
    weight_bytes = m["params"] * nbytes
    kv_bytes_per_token = 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * nbytes
    c: dict[str, Coefficient] = {}

    def put(name: str, value: float, unit: str, why: str) -> None:
        c[name] = Coefficient(value, unit, why)

    put("replica_gpus", tp, "GPUs", f"model.rollout_tp = {tp}")
    put("weight_bytes", weight_bytes, "bytes", f"params {m['params']:.4g} x {nbytes} B ({dtype})")
    _derive_memory(put, hw, weight_bytes, kv_bytes_per_token, tp, memory_utilization)
    _derive_decode(put, hw, m, weight_bytes, kv_bytes_per_token, tp)
    _derive_train(put, hw, m)
    _derive_links(put, hw)
    return CostModel(c, f"{hardware} / {model} / tp={tp}")


def _derive_memory(put, hw, weight_bytes, kv_bytes_per_token, tp, util) -> None:
    free = hw["gpu_memory_bytes"] * util - weight_bytes / tp - hw["activation_reserve_bytes"]
    if free <= 0:
        raise ConfigError(
            "config",
            "model.rollout_tp",
            f"the weights ({weight_bytes / tp / 1e9:.1f} GB per GPU at tp={tp}) leave no room "
            "for a KV cache; raise model.rollout_tp",
        )
    tokens = int(free * tp // kv_bytes_per_token)
    put(
        "kv_capacity_tokens",
        tokens,
        "tokens",
        f"(gpu_memory {hw['gpu_memory_bytes']:.4g} B x sim.gpu_memory_utilization {util} - "
        f"weights/tp - activation_reserve {hw['activation_reserve_bytes']:.3g} B) x tp {tp} / "
        f"KV {kv_bytes_per_token:.0f} B/token (2 x layers x kv_heads x head_dim x bytes)",
    )


def _derive_decode(put, hw, m, weight_bytes, kv_bytes_per_token, tp) -> None:
    hbm = hw["hbm_bytes_per_s"]
    peak = hw["peak_flops"]
    allreduce = 0.0 if tp == 1 else 2 * m["layers"] * hw["tp_allreduce_s"]
    read_s = weight_bytes / tp / (hbm * hw["decode_weight_bw_efficiency"])
    put(
        "decode_base_s",
        read_s + allreduce,
        "s",
        f"weights/tp / (hbm {hbm:.3g} B/s x {hw['decode_weight_bw_efficiency']}) + "
        f"{'2 x layers x tp_allreduce_s' if tp > 1 else 'no TP all-reduce at tp=1'}",
    )
    put(
        "decode_per_seq_s",
        2 * m["params"] / tp / (peak * hw["decode_flops_efficiency"]),
        "s/sequence",
        f"2 x params/tp FLOP / (peak {peak:.4g} FLOP/s x {hw['decode_flops_efficiency']})",
    )
    put(
        "decode_per_kv_token_s",
        kv_bytes_per_token / tp / (hbm * hw["decode_kv_bw_efficiency"]),
        "s/token",
        f"KV {kv_bytes_per_token:.0f} B/token / tp / (hbm x {hw['decode_kv_bw_efficiency']})",
    )
    eff = hw["prefill_flops_efficiency"]
    put("prefill_base_s", read_s + allreduce, "s", "as decode_base_s: one pass over the weights")
    put(
        "prefill_per_token_s",
        2 * m["params"] / tp / (peak * eff),
        "s/token",
        f"2 x params/tp FLOP / (peak x prefill_flops_efficiency {eff})",
    )
    put(
        "prefill_per_token_sq_s",
        2 * m["layers"] * m["hidden"] / tp / (peak * eff),
        "s/token^2",
        "causal attention QK^T and AV: 2 x 2 x layers x hidden FLOP per token pair, half the "
        "pairs -> 2 x layers x hidden / tp per squared length, at prefill efficiency",
    )


def _derive_train(put, hw, m) -> None:
    k = TRAIN_FLOP_PER_PARAM_TOKEN
    put(
        "train_flop_per_token",
        k * m["params"],
        "FLOP/token",
        f"{k} x params: fwd+bwd 6N (Kaplan et al. 2020) + 2N old-log-prob forward (GRPO)",
    )
    put(
        "train_flop_per_token_sq",
        k * m["layers"] * m["hidden"],
        "FLOP/token^2",
        f"causal attention: 2 x layers x hidden per squared length per forward, x {k // 2} "
        "forward-equivalents (fwd+bwd = 3, old-log-prob = 1)",
    )
    put(
        "train_flop_per_s_per_gpu",
        hw["peak_flops"] * hw["train_mfu"],
        "FLOP/s",
        f"peak {hw['peak_flops']:.4g} FLOP/s x train_mfu {hw['train_mfu']}",
    )


def _derive_links(put, hw) -> None:
    put(
        "pcie_bytes_per_s",
        hw["pcie_bytes_per_s"] * hw["pcie_efficiency"],
        "bytes/s",
        f"PCIe {hw['pcie_bytes_per_s']:.3g} B/s x efficiency {hw['pcie_efficiency']}",
    )
    put("nvlink_bytes_per_s", hw["nvlink_bytes_per_s"], "bytes/s", "datasheet (hardware.json)")
    put(
        "rdma_bytes_per_s",
        hw["nic_bytes_per_s"] * hw["rdma_efficiency"],
        "bytes/s",
        f"machine NICs {hw['nic_bytes_per_s']:.3g} B/s x efficiency {hw['rdma_efficiency']}",
    )
    put("rdma_startup_s", hw["rdma_startup_s"], "s", "paper App. D.3 (hardware.json)")


__all__ = ["cost_model_for", "derive", "hardware_names", "load_cost_file", "model_names"]
