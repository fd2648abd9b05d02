"""Does a configuration fit in GPU memory? Checked before anything is simulated.

Trainer (FSDP, the trainer of verl and of the paper's systems):
:func:`laminar.specs.trainmemory.trainer_memory`, the estimate the runtime's start-up check
uses too — fp32 master weights, gradients and Adam states (16 bytes a parameter) sharded over
the trainer's GPUs; plus, on every GPU, the groups FSDP gathers, the activations of one
micro-batch under ``runtime.grpo.activation_checkpointing`` and the log-prob chunk
(``runtime.grpo.logprob_chunk_tokens``), and the reserve. Sequence parallelism and CPU offload
are not modelled.

Rollout (vLLM): weights per GPU of a TP x EP replica (the dense part split by TP, routed
experts by TP x EP), the reserve vLLM keeps back, and at least one longest trajectory of KV
cache per attention group, all within ``sim.gpu_memory_utilization`` of the GPU.

:func:`check_fit` returns a :class:`FitReport` (``.ok``, ``.reason``); :func:`require_fit`
raises :class:`~laminar.errors.ConfigError` naming the smallest GPU count or parallel degree
that would fit. ``laminar.sim.simulate`` calls the latter; the planner calls the former.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from laminar.errors import ConfigError
from laminar.specs.hardware import HardwareSpec, hardware_spec
from laminar.specs.model import BYTES_PER_DTYPE, ModelSpec, model_spec

TRAIN_STATE_BYTES_PER_PARAM = 16  # fp32 master + fp32 grad + Adam m, v (FSDP mixed precision)
LAYER_WORKING_BYTES_PER_HIDDEN = 34  # Korthikanti et al. 2022: 34·s·b·h bytes a layer, 16-bit
MAX_REPLICA_GPUS = 512


@dataclass(frozen=True, slots=True)
class FitReport:
    """The memory check of one configuration (bytes are per GPU)."""

    ok: bool
    reason: str
    """Empty when ``ok``; else what does not fit and the smallest change that would."""
    key_path: str
    """The config key to change ("" when ``ok``)."""
    trainer_gpus: int
    trainer_bytes_per_gpu: float
    min_trainer_gpus: int
    """Fewest trainer GPUs whose memory holds the trainer (0: none would); a GPU count, to be
    rounded up to whole machines for a decoupled split."""
    rollout_bytes_per_gpu: float
    """Weights, reserve and the minimum KV cache on one rollout GPU."""
    min_replica_gpus: int
    """Fewest GPUs a rollout replica needs (TP x EP; 0: none up to 512 would)."""
    gpu_bytes: float


@dataclass(frozen=True, slots=True)
class Replica:
    """The memory of one rollout replica of ``tp`` x ``ep`` GPUs."""

    tp: int
    ep: int
    weight_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    free_bytes_per_gpu: float
    """What is left for the KV cache on each GPU (may be negative)."""

    @property
    def gpus(self) -> int:
        """GPUs of the replica."""
        return self.tp * self.ep

    @property
    def kv_tokens_per_group(self) -> int:
        """Tokens of KV one attention group (``tp`` GPUs) holds."""
        return max(0, int(self.free_bytes_per_gpu // self.kv_bytes_per_token_per_gpu))


def weight_bytes(spec: ModelSpec, dtype: str, quant: str) -> tuple[float, float]:
    """(dense, routed) bytes of a rollout's weights: fp8 quantizes every linear layer to one
    byte; embeddings and the output head stay in ``dtype``. A checkpoint quantized already
    (``quantization_config``: ``spec.quant_method``) is served as stored: its quantized layers
    at ``spec.quant_bytes`` a weight (scales included), the rest in ``dtype``."""
    nbytes = BYTES_PER_DTYPE[dtype]
    if spec.quant_method:
        if quant not in ("none", spec.quant_method):
            raise ConfigError(
                "config", "model.rollout_quant",
                f"{quant}: {spec.name}'s checkpoint is {spec.quant_method} already "
                "(quantization_config) and is served as stored; use model.rollout_quant=none",
            )  # fmt: skip
        q = spec.quant_bytes
        if spec.quant_experts_only:
            return spec.dense_params * nbytes, spec.routed_params * q
        kept = spec.embedding_params + spec.head_params
        return kept * nbytes + (spec.dense_params - kept) * q, spec.routed_params * q
    if quant != "fp8":
        return spec.dense_params * nbytes, spec.routed_params * nbytes
    kept = spec.embedding_params + spec.head_params
    return kept * nbytes + (spec.dense_params - kept), float(spec.routed_params)


def serves_fp8(spec: ModelSpec, quant: str) -> bool:
    """True when the rollout's matmuls run in FP8: ``model.rollout_quant=fp8`` or an FP8
    checkpoint (MXFP4 and int4/int8 checkpoints are weight-only: their matmuls stay 16-bit)."""
    return quant == "fp8" or spec.quant_method == "fp8"


def experts_quantized(spec: ModelSpec, quant: str) -> bool:
    """True when the rollout stores its routed experts quantized (``model.rollout_quant=fp8``
    or a quantized checkpoint): their kernels read them at ``decode_expert_bw_efficiency``,
    16-bit experts at ``decode_expert_bw_efficiency_16bit``."""
    return quant == "fp8" or bool(spec.quant_method)


def trajectory_context(cfg: Any) -> int:
    """Tokens of the longest trajectory (prompt + response): the length at which a
    sliding-window layer's KV and a state-space layer's state are spread per token."""
    w = cfg.workload
    return w.max_prompt_len + w.max_response_len


def rollout_replica(
    cfg: Any, spec: ModelSpec, hw: HardwareSpec, tp: int, ep: int, context: int | None = None
) -> Replica:
    """Memory of a ``tp`` x ``ep`` replica of ``cfg``'s model on ``hw``; KV bytes a token at
    ``context`` tokens (default: the longest trajectory of ``cfg.workload``)."""
    dense, routed = weight_bytes(spec, cfg.model.dtype, cfg.model.rollout_quant)
    per_gpu = dense / tp + routed / (tp * ep)
    usable = hw["gpu_memory_bytes"] * cfg.sim.gpu_memory_utilization
    if context is None and (spec.window_layers or spec.state_layers) and hasattr(cfg, "workload"):
        context = trajectory_context(cfg)
    kv = spec.kv_bytes_per_token_per_gpu(BYTES_PER_DTYPE[cfg.model.dtype], context, tp)
    return Replica(tp, ep, per_gpu, kv, usable - per_gpu - hw["activation_reserve_bytes"])


def longest_trajectory_tokens(cfg: Any) -> int:
    """KV a replica must hold for one longest trajectory, with the admission watermark."""
    w = cfg.workload
    return math.ceil((w.max_prompt_len + w.max_response_len + 1) / (1 - cfg.sim.kv_watermark))


def trainer_bytes(cfg: Any, spec: ModelSpec, hw: HardwareSpec) -> tuple[float, float]:
    """(sharded, per-GPU) trainer bytes: states to split over the GPUs, and what every GPU
    holds whatever their number (gathered groups, one micro-batch's activations and log-prob
    chunk, reserve), from :func:`laminar.specs.trainmemory.trainer_memory` — the estimate the
    runtime's start-up check uses too."""
    m = sim_trainer_memory(cfg, spec, hw)
    return m.states, m.unsharded


def sim_trainer_memory(cfg: Any, spec: ModelSpec, hw: HardwareSpec, **layout: int) -> Any:
    """The simulated trainer's :class:`~laminar.specs.trainmemory.TrainerMemory` on one GPU
    (``ranks=1``: divide ``states`` by the shard count): fp32 master weights, gradients and
    Adam states, ``model.dtype`` compute, ``sim.train_micro_batch_tokens`` (at least one
    longest trajectory), checkpointing and log-prob chunk of ``runtime.grpo``; ``layout``:
    tp, pp, ep, cp."""
    from laminar.specs.trainmemory import trainer_memory

    w, g = cfg.workload, cfg.runtime.grpo
    return trainer_memory(
        spec,
        tokens=max(cfg.sim.train_micro_batch_tokens, w.max_prompt_len + w.max_response_len),
        checkpointing=g.activation_checkpointing,
        logprob_chunk_tokens=g.logprob_chunk_tokens,
        compute_bytes=BYTES_PER_DTYPE[cfg.model.dtype],
        reference=g.kl_coef > 0,
        reserve_bytes=hw["activation_reserve_bytes"],
        **layout,
    )


def decoupled_trainer_gpus(cluster: Any, replica_gpus: int) -> int:
    """Trainer GPUs of a decoupled system: ``cluster.trainer_fraction`` of the machines,
    rounded, at least one and leaving one for rollouts; on a single machine, by GPU."""
    gpm = min(cluster.gpus_per_machine, cluster.gpus)
    machines = cluster.gpus // gpm
    if machines >= 2:
        return gpm * min(machines - 1, max(1, round(cluster.trainer_fraction * machines)))
    return min(gpm - replica_gpus, max(1, round(cluster.trainer_fraction * gpm)))


def check_fit(cfg: Any, *, trainer_gpus: int | None = None) -> FitReport:
    """Check ``cfg`` (a :class:`~laminar.config.LaminarConfig`) against GPU memory.

    ``trainer_gpus``: the trainer's GPUs; None: the decoupled split of ``cfg.cluster``
    (colocated systems pass ``cluster.gpus``)."""
    spec, hw = model_spec(cfg.model), hardware_spec(cfg.cluster)
    m = cfg.model
    gpus = trainer_gpus or decoupled_trainer_gpus(cfg.cluster, m.rollout_tp * m.rollout_ep)
    if gpus < 1:  # one GPU in all: the rollout replica takes it
        return FitReport(False, f"cluster.gpus={cfg.cluster.gpus} leaves no GPU for the trainer "
                         "next to a rollout replica", "cluster.gpus", 0, 0.0, 0, 0.0, 0,
                         hw["gpu_memory_bytes"])  # fmt: skip
    sharded, fixed = trainer_bytes(cfg, spec, hw)
    gpu_bytes = hw["gpu_memory_bytes"]
    room = gpu_bytes - fixed
    min_trainer = math.ceil(sharded / room) if room > 0 else 0
    replica = rollout_replica(cfg, spec, hw, m.rollout_tp, m.rollout_ep)
    need = longest_trajectory_tokens(cfg)
    rollout_per_gpu = (
        replica.weight_bytes_per_gpu
        + hw["activation_reserve_bytes"]
        + need * replica.kv_bytes_per_token_per_gpu
    )
    smallest = _smallest_replica(cfg, spec, hw, need)
    base = dict(
        trainer_gpus=gpus,
        trainer_bytes_per_gpu=sharded / gpus + fixed,
        min_trainer_gpus=min_trainer,
        rollout_bytes_per_gpu=rollout_per_gpu,
        min_replica_gpus=smallest[0] * smallest[1] if smallest else 0,
        gpu_bytes=gpu_bytes,
    )
    if replica.kv_tokens_per_group < need:
        why, key = _rollout_reason(cfg, spec, replica, need, smallest)
        return FitReport(False, why, key, **base)
    if min_trainer == 0 or gpus < min_trainer:
        why, key = _trainer_reason(cfg, spec, gpus, sharded, fixed, min_trainer, trainer_gpus)
        return FitReport(False, why, key, **base)
    return FitReport(True, "", "", **base)


def require_fit(cfg: Any, *, trainer_gpus: int | None = None) -> FitReport:
    """:func:`check_fit`, raising :class:`ConfigError` (exit 2 from the CLI) when it fails."""
    report = check_fit(cfg, trainer_gpus=trainer_gpus)
    if not report.ok:
        raise ConfigError("config", report.key_path, report.reason)
    return report


def _smallest_replica(cfg, spec, hw, need) -> tuple[int, int] | None:
    """The (tp, ep) with the fewest GPUs that holds the weights and one longest trajectory;
    powers of two, EP only for MoE models. Among equals, TP inside a machine first, then the
    most EP (attention data-parallel, experts spread: how MoE models are served)."""
    eps = [1] + ([2**i for i in range(1, 10)] if spec.is_moe else [])
    shapes = [(2**i, ep) for i in range(7) for ep in eps if 2**i * ep <= MAX_REPLICA_GPUS]
    gpm = cfg.cluster.gpus_per_machine
    for tp, ep in sorted(shapes, key=lambda s: (s[0] * s[1], s[0] > gpm, s[0])):
        if rollout_replica(cfg, spec, hw, tp, ep).kv_tokens_per_group >= need:
            return tp, ep
    return None


def _gb(x: float) -> str:
    return f"{x / 1e9:.1f} GB"


def _rollout_reason(cfg, spec, replica, need, smallest) -> tuple[str, str]:
    m = cfg.model
    what = (
        f"a rollout replica of {spec.name} at rollout_tp={m.rollout_tp}, rollout_ep={m.rollout_ep} "
        f"holds {_gb(replica.weight_bytes_per_gpu)} of weights per GPU "
        f"({m.rollout_quant if m.rollout_quant != 'none' else m.dtype}) and has room for "
        f"{replica.kv_tokens_per_group:,} KV tokens per attention group; one longest trajectory "
        f"needs {need:,} (workload.max_prompt_len + workload.max_response_len)"
    )
    if smallest is None:
        return f"{what}; no replica up to {MAX_REPLICA_GPUS} GPUs fits", "model.rollout_tp"
    tp, ep = smallest
    key = "model.rollout_ep" if ep > m.rollout_ep and tp <= m.rollout_tp else "model.rollout_tp"
    hint = f"rollout_tp={tp}" + (f", rollout_ep={ep}" if spec.is_moe else "")
    extra = "" if m.rollout_quant == "fp8" else " (model.rollout_quant=fp8 halves the weights)"
    return f"{what}; the smallest replica that fits is {tp * ep} GPUs: {hint}{extra}", key


def _trainer_reason(cfg, spec, gpus, sharded, fixed, min_trainer, given) -> tuple[str, str]:
    c = cfg.cluster
    what = (
        f"the trainer of {spec.name} needs {_gb(sharded)} of weights, gradients and Adam states "
        f"({TRAIN_STATE_BYTES_PER_PARAM} B/param, sharded) plus {_gb(fixed)} per GPU "
        f"(activations of a micro-batch, gathered layers, reserve) on {_gb(cfg_gpu(cfg))} GPUs"
    )
    if min_trainer == 0:
        return (
            f"{what}: the per-GPU part alone does not fit; lower workload.max_response_len "
            "or sim.train_micro_batch_tokens",
            "sim.train_micro_batch_tokens",
        )
    gpm = min(c.gpus_per_machine, c.gpus)
    machines_needed = math.ceil(min_trainer / gpm)
    plural = "s" if machines_needed > 1 else ""
    msg = (
        f"{what}: at least {min_trainer} trainer GPUs ({machines_needed} machine{plural}), "
        f"{gpus} given"
    )
    if given is not None:
        return f"{msg}; raise cluster.gpus to at least {machines_needed * gpm}", "cluster.gpus"
    machines = c.gpus // gpm
    replica_machines = max(1, math.ceil(cfg.model.rollout_tp * cfg.model.rollout_ep / gpm))
    if machines_needed + replica_machines <= machines:
        frac = machines_needed / machines
        return (
            f"{msg} (cluster.trainer_fraction {c.trainer_fraction} of {c.gpus}); raise "
            f"cluster.trainer_fraction to at least {frac:.3g}",
            "cluster.trainer_fraction",
        )
    total = (machines_needed + replica_machines) * gpm
    return (
        f"{msg} (cluster.trainer_fraction {c.trainer_fraction} of {c.gpus}); raise "
        f"cluster.gpus to at least {total} (the trainer's machines and one rollout "
        "replica's)",
        "cluster.gpus",
    )


def cfg_gpu(cfg: Any) -> float:
    """Memory of one GPU of ``cfg``'s hardware, bytes."""
    return hardware_spec(cfg.cluster)["gpu_memory_bytes"]
