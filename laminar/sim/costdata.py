"""Derive cost-model coefficients from model and hardware facts (``laminar.specs``).

The model's facts come from its Hugging Face config.json (``laminar.specs.model``: catalog,
``model.hf_config`` or ``model.spec``), the GPU's from ``laminar/data/hardware.json``
(``laminar.specs.hardware``, with ``cluster.hardware_spec`` over it). The derivations below ask
those for derived facts (weight bytes, KV bytes per token, FLOPs per token, experts a batch
touches), never raw config keys, and each coefficient's source string records the formula
and the numbers that went in, so ``cost_model.json`` in a run directory explains itself.

Decode is memory-bound at rollout batch sizes (DESIGN.md): a step reads the dense weights once
per replica, the routed experts its batch touches, and the K and V of every cached token, and
pays a per-layer floor (the kernels of a layer take that long however few bytes they read);
the per-sequence term is the matmul FLOPs (and, with expert parallelism, the all-to-all bytes).
The trainer's terms are in ``laminar.sim.costtrain``.
"""

from __future__ import annotations

from laminar.config import LaminarConfig
from laminar.errors import ConfigError
from laminar.sim.cost import Coefficient, CostModel, load_cost_file
from laminar.sim.costtrain import derive_links, derive_train
from laminar.specs.hardware import HardwareSpec, catalog_hardware, hardware_names, hardware_spec
from laminar.specs.memory import (
    experts_quantized,
    rollout_replica,
    serves_fp8,
    trajectory_context,
    weight_bytes,
)
from laminar.specs.model import BYTES_PER_DTYPE, ModelSpec, catalog_names, catalog_spec, model_spec
from laminar.specs.trainer import train_mfu

# the read rate of the routed experts, by whether the rollout stores them quantized
_EXPERT_RATE = {True: "decode_expert_bw_efficiency", False: "decode_expert_bw_efficiency_16bit"}


def model_names() -> list[str]:
    """Models shipped in the catalog (``laminar/data/models/``)."""
    return catalog_names()


def cost_model_for(cfg: LaminarConfig) -> CostModel:
    """The cost model a run uses: ``sim.cost_file`` when given, else derived from the specs."""
    if cfg.sim.cost_file:
        return load_cost_file(cfg.sim.cost_file)
    m = cfg.model
    return derive_specs(
        hardware_spec(cfg.cluster),
        model_spec(m),
        tp=m.rollout_tp,
        ep=m.rollout_ep,
        dtype=m.dtype,
        quant=m.rollout_quant,
        memory_utilization=cfg.sim.gpu_memory_utilization,
        gpus_per_machine=min(cfg.cluster.gpus_per_machine, cfg.cluster.gpus),
        context=trajectory_context(cfg),
        train_precision=_train_precision(cfg),
        eager=m.rollout_eager,
    )


def _train_precision(cfg: LaminarConfig) -> str:
    """``trainer.precision``, refused on a GPU without FP8 tensor cores."""
    precision = cfg.trainer.precision
    if precision == "fp8" and not hardware_spec(cfg.cluster)["fp8_flops"]:
        raise ConfigError(
            "config",
            "trainer.precision",
            f"fp8 needs FP8 tensor cores, which {cfg.cluster.hardware} does not have; use bf16",
        )
    return precision


def efficiency_basis(cfg: LaminarConfig) -> dict[str, str]:
    """Which efficiencies the run's cost model rests on, by basis: ``calibrated`` and
    ``assumed`` (``;``-separated names; ``config`` ones set by ``cluster.hardware_spec`` count
    as assumed), for ``summary.csv``. A cost file's coefficients are all ``cost_file``."""
    if cfg.sim.cost_file:
        return {"calibrated": f"cost_file {cfg.sim.cost_file}", "assumed": ""}
    hw = hardware_spec(cfg.cluster)
    by = hw.basis()
    spec = model_spec(cfg.model)
    mfu = train_mfu(hw.arch, spec.active_params, moe=spec.is_moe,
                    precision=cfg.trainer.precision, hardware=hw.catalog_name)  # fmt: skip
    calibrated = [*by.get("calibrated", []), *(["train_mfu"] if mfu.basis == "calibrated" else [])]
    assumed = [*by.get("assumed", []), *by.get("config", [])]
    # only an eager engine's steps rest on its floor, only a MoE's on its experts' read rate
    unused = set() if cfg.model.rollout_eager else {"decode_layer_eager_s"}
    unused |= set(_EXPERT_RATE.values())
    if spec.is_moe:
        unused.discard(_EXPERT_RATE[experts_quantized(spec, cfg.model.rollout_quant)])
    calibrated = [n for n in calibrated if n not in unused]
    assumed = [n for n in assumed if n not in unused]
    assumed += ["train_mfu"] if mfu.basis != "calibrated" else []
    return {"calibrated": ";".join(calibrated), "assumed": ";".join(assumed)}


def derive(
    hardware: str,
    model: str,
    *,
    tp: int,
    ep: int = 1,
    dtype: str = "bfloat16",
    quant: str = "none",
    memory_utilization: float = 0.9,
) -> CostModel:
    """Coefficients for one ``tp`` x ``ep`` rollout replica of catalog ``model`` on catalog
    ``hardware`` (8 GPUs a machine)."""
    return derive_specs(
        catalog_hardware(hardware),
        catalog_spec(model),
        tp=tp,
        ep=ep,
        dtype=dtype,
        quant=quant,
        memory_utilization=memory_utilization,
    )


class _Cfg:
    """The few config fields the memory helpers read, for :func:`derive_specs` callers
    without a whole config."""

    def __init__(self, dtype: str, quant: str, util: float):
        self.model = type("M", (), {"dtype": dtype, "rollout_quant": quant})()
        self.sim = type("S", (), {"gpu_memory_utilization": util})()


def derive_specs(
    hw: HardwareSpec,
    m: ModelSpec,
    *,
    tp: int,
    ep: int = 1,
    dtype: str = "bfloat16",
    quant: str = "none",
    memory_utilization: float = 0.9,
    gpus_per_machine: int = 8,
    context: int | None = None,
    train_precision: str = "bf16",
    eager: bool = False,
) -> CostModel:
    """Coefficients for one ``tp`` x ``ep`` replica of ``m`` on ``hw`` (see module doc);
    ``context``: the trajectory length (tokens) at which a sliding-window or state-space
    model's KV bytes a token and attention FLOPs are taken (None: uncapped);
    ``train_precision``: the trainer's matmuls (``trainer.precision``); ``eager``: the engine
    runs without CUDA graphs (``model.rollout_eager``)."""
    if ep > 1 and not m.is_moe:
        raise ConfigError("config", "model.rollout_ep", f"{m.name} has no experts; use 1")
    c: dict[str, Coefficient] = {}

    def put(name: str, value: float, unit: str, why: str) -> None:
        c[name] = Coefficient(value, unit, why)

    dense, routed = weight_bytes(m, dtype, quant)
    wdesc = f"{quant} linear layers" if quant != "none" else dtype
    if m.quant_method:
        wdesc = f"{m.quant_method} checkpoint ({m.quant_bytes:.4g} B a quantized weight)"
    fp8 = serves_fp8(m, quant)
    put("replica_gpus", tp * ep, "GPUs", f"model.rollout_tp {tp} x model.rollout_ep {ep}")
    put(
        "weight_bytes",
        dense + routed,
        "bytes",
        f"{m.name}: {m.total_params / 1e9:.4g}B params from config.json ({m.source}), {wdesc}",
    )
    replica = rollout_replica(_Cfg(dtype, quant, memory_utilization), m, hw, tp, ep, context)
    _derive_memory(put, hw, m, replica, memory_utilization, context)
    x_eff = hw.facts[_EXPERT_RATE[experts_quantized(m, quant)]]
    _derive_decode(put, hw, m, (dense, routed, dtype, context, x_eff), tp, ep, fp8,
                   gpus_per_machine)  # fmt: skip
    _derive_eager(put, hw, m, eager)
    _derive_prefill(put, hw, m, (dense, routed, context, x_eff), tp, ep, fp8, gpus_per_machine)
    derive_train(put, hw, m, dtype, train_precision)
    derive_links(put, hw, gpus_per_machine)
    return CostModel(c, f"{hw.name} / {m.name} / tp={tp}" + (f" ep={ep}" if ep > 1 else ""))


def _derive_memory(put, hw, m, replica, util, context) -> None:
    if replica.free_bytes_per_gpu <= 0:
        raise ConfigError(
            "config",
            "model.rollout_tp",
            f"the weights ({replica.weight_bytes_per_gpu / 1e9:.1f} GB per GPU at "
            f"tp={replica.tp}, ep={replica.ep}) leave no room for a KV cache; raise "
            "model.rollout_tp (or model.rollout_ep, model.rollout_quant=fp8)",
        )
    tokens = replica.kv_tokens_per_group * replica.ep
    put(
        "kv_capacity_tokens",
        tokens,
        "tokens",
        f"(gpu_memory {hw['gpu_memory_bytes']:.4g} B x sim.gpu_memory_utilization {util} - "
        f"weights per GPU {replica.weight_bytes_per_gpu:.4g} B - activation_reserve "
        f"{hw['activation_reserve_bytes']:.3g} B) / KV {replica.kv_bytes_per_token_per_gpu:.0f} "
        f"B/token per GPU ({m.kv_bytes_per_token(1, context):.0f} elements/token over "
        f"{m.kv_shards(replica.tp)} TP shard(s)) x ep {replica.ep} attention groups",
    )


def _derive_decode(put, hw, m: ModelSpec, weights, tp, ep, fp8, gpm) -> None:
    dense, routed, dtype, context, x_eff = weights
    hbm = hw["hbm_bytes_per_s"]
    w_eff, kv_eff = hw.facts["decode_weight_bw_efficiency"], hw.facts["decode_kv_bw_efficiency"]
    peak = hw.peak_flops(fp8)
    f_eff = hw.facts["decode_flops_efficiency"]
    allreduce = 0.0 if tp == 1 else 2 * m.layers * hw["tp_allreduce_s"]
    x_base, x_per_seq, x_why = _tp_across_machines(hw, m, tp, gpm)
    a2a_base, a2a_per_seq, link = _alltoall(hw, m, tp, ep, gpm)
    put(
        "decode_base_s",
        dense / tp / (hbm * w_eff.value)
        + m.layers * hw["decode_layer_floor_s"]
        + allreduce
        + x_base
        + a2a_base,
        "s",
        f"dense weights/tp / (hbm {hbm:.3g} B/s x {w_eff.value} [{w_eff.cite()}]) + layers "
        f"{m.layers} x decode_layer_floor_s {hw['decode_layer_floor_s']:.3g} "
        f"[{hw.facts['decode_layer_floor_s'].cite()}] + "
        f"{'2 x layers x tp_allreduce_s' if tp > 1 else 'no TP all-reduce at tp=1'}"
        + x_why
        + (f" + 2 x moe_layers x alltoall_startup_s (EP {ep})" if ep > 1 else ""),
    )
    # a linear-attention / state-space layer reads (and writes back) a sequence's whole state
    # every step, whatever its length: a per-sequence read, not a per-token one
    state_gpu = m.state_bytes_per_sequence_per_gpu(BYTES_PER_DTYPE[dtype], tp)
    state_s = state_gpu / ep / (hbm * kv_eff.value)
    put(
        "decode_per_seq_s",
        m.linear_flop_per_token / (tp * ep) / (peak * f_eff.value) + a2a_per_seq + x_per_seq
        + state_s,
        "s/sequence",
        f"2 x active params ({m.active_params / 1e9:.4g}B, embeddings excepted) / (tp x ep) "
        f"FLOP / (peak {peak:.4g} FLOP/s x {f_eff.value} [{f_eff.cite()}])"
        + (f" + all-to-all of k x hidden x 2 B x 2 per MoE layer over {link}" if ep > 1 else "")
        + (" + a sequence's share of the all-reduces over NICs" if x_per_seq else "")
        + (f" + its state ({state_gpu:.4g} B a GPU) / ep {ep} / (hbm x {kv_eff.value})"
           if m.state_layers else ""),
    )  # fmt: skip
    kv_bytes = m.kv_read_bytes_per_token(BYTES_PER_DTYPE[dtype], context)  # KV stays in dtype
    kv_gpu = m.kv_read_bytes_per_token_per_gpu(BYTES_PER_DTYPE[dtype], context, tp)
    put(
        "decode_per_kv_token_s",
        kv_gpu / ep / (hbm * kv_eff.value),
        "s/token",
        f"KV {kv_bytes:.0f} B/token / {m.kv_shards(tp)} TP shard(s)"
        + (" (the attention layers'; the state is read a sequence)" if m.state_layers else "")
        + f" / ep {ep} / (hbm x {kv_eff.value} [{kv_eff.cite()}])",
    )
    put("moe_experts", m.experts, "experts", "config.json routed experts (0: dense)")
    put("moe_experts_per_token", m.experts_per_token, "experts", "config.json experts per token")
    expert_bytes = routed / max(1, m.moe_layers * m.experts) if m.is_moe else 0.0
    put(
        "decode_per_expert_s",
        m.moe_layers * expert_bytes / (tp * ep) / (hbm * x_eff.value) if m.is_moe else 0.0,
        "s/expert",
        f"moe_layers {m.moe_layers} x one expert's bytes {expert_bytes:.4g} / (tp x ep) / (hbm x "
        f"{x_eff.value} [{x_eff.cite()}]); a step reads E(1-(1-k/E)^b) experts a layer",
    )


def _derive_eager(put, hw, m: ModelSpec, eager: bool) -> None:
    """The least a decode step takes: an eager engine's GPU waits for the host to launch each
    layer's kernels (``decode_layer_eager_s`` a layer); with CUDA graphs, no such floor."""
    f = hw.facts["decode_layer_eager_s"]
    put(
        "decode_min_step_s",
        m.layers * f.value if eager else 0.0,
        "s",
        f"model.rollout_eager: layers {m.layers} x decode_layer_eager_s {f.value:.3g} [{f.cite()}]"
        if eager
        else "CUDA graphs (model.rollout_eager false): no host-launch floor",
    )


def _tp_across_machines(hw, m: ModelSpec, tp, gpm) -> tuple[float, float, str]:
    """(per-step latency, per-sequence seconds, why) a TP group spanning NVLink domains adds to
    each forward: NCCL's hierarchical all-reduce, inside each domain over NVLink (the
    ``tp_allreduce_s`` already charged) and across its n = tp/domain domains in a ring, 2(n-1)
    steps between machines (``tp_allreduce_cross_s`` each: a small all-reduce's latency between
    machines, measured end to end) moving 2(n-1)/n of a token's hidden state (16-bit) through
    each domain's NICs (its machines'); two all-reduces a layer (Megatron TP). 0 inside one
    domain (one machine, or a GB200 NVL72 rack)."""
    domain = hw.nvlink_gpus(gpm)
    n = -(-tp // domain)  # domains it spans (72-GPU racks need not divide a power of two)
    if n <= 1:
        return 0.0, 0.0, ""
    nic = hw.machine_nic_bytes_per_s * domain / gpm * hw.facts["rdma_efficiency"].value
    base = 2 * m.layers * 2 * (n - 1) * hw["tp_allreduce_cross_s"]
    per_seq = 2 * m.layers * 2 * (n - 1) / n * m.hidden * 2 / nic
    where = "machines" if domain == gpm else "NVLink domains"
    return base, per_seq, f" + 2 x layers x ring over {n} {where} (2(n-1) x tp_allreduce_cross_s)"


def _alltoall(hw, m: ModelSpec, tp, ep, gpm) -> tuple[float, float, str]:
    """(per-step latency, per-sequence seconds, link) of the EP all-to-alls of a decode step:
    dispatch and combine per MoE layer, each token's hidden state (16-bit) to k experts, the
    share (ep-1)/ep leaving the GPU, spread over the replica's tp x ep GPUs."""
    if ep <= 1:
        return 0.0, 0.0, ""
    in_domain = tp * ep <= hw.nvlink_gpus(gpm)
    bw = hw["nvlink_bytes_per_s"] if in_domain else hw.machine_nic_bytes_per_s / gpm
    per_seq = 2 * m.moe_layers * m.experts_per_token * m.hidden * 2 * (ep - 1) / ep / (tp * ep) / bw
    return 2 * m.moe_layers * hw["alltoall_startup_s"], per_seq, "NVLink" if in_domain else "NICs"


def _derive_prefill(put, hw, m: ModelSpec, weights, tp, ep, fp8, gpm) -> None:
    dense, routed, context, x_eff = weights
    hbm = hw["hbm_bytes_per_s"]
    w_eff = hw.facts["decode_weight_bw_efficiency"]
    eff = hw.facts["prefill_flops_efficiency"]
    peak = hw.peak_flops(fp8)
    allreduce = 0.0 if tp == 1 else 2 * m.layers * hw["tp_allreduce_s"]
    x_base, x_per_token, _ = _tp_across_machines(hw, m, tp, gpm)
    put(
        "prefill_base_s",
        (dense / (hbm * w_eff.value) + routed / (hbm * x_eff.value)) / (tp * ep)
        + m.layers * hw["decode_layer_floor_s"]
        + allreduce
        + x_base,
        "s",
        "one pass over all weights (every expert, at the experts' own read rate) per prefill "
        "batch, and the per-layer floor, as decode_base_s",
    )
    _, a2a_per_token, _ = _alltoall(hw, m, tp, ep, gpm)
    put(
        "prefill_per_token_s",
        m.linear_flop_per_token / (tp * ep) / (peak * eff.value) + a2a_per_token + x_per_token,
        "s/token",
        f"2 x active params / (tp x ep) FLOP / (peak x prefill_flops_efficiency {eff.value} "
        f"[{eff.cite()}])" + (" + the EP all-to-all bytes of a token, as decode" if ep > 1 else ""),
    )
    put(
        "prefill_per_token_sq_s",
        m.attn_flop_sq(context) / (tp * ep) / (peak * eff.value),
        "s/token^2",
        "causal attention QK^T and AV: layers x heads x (qk_dim + v_dim) FLOP per squared length "
        f"(attention width {m.attention_width}, not hidden) / (tp x ep), at prefill efficiency",
    )


__all__ = [
    "cost_model_for",
    "derive",
    "derive_specs",
    "hardware_names",
    "load_cost_file",
    "model_names",
]
