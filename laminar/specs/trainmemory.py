"""The trainer's memory per rank: the one estimate the simulator's fit check and the runtime share.

:func:`trainer_memory` takes plain values — a :class:`~laminar.specs.model.ModelSpec`, dtypes
as bytes, the FSDP shard count, the micro-batch, activation checkpointing, the log-prob chunk
and a parallel layout (tp, pp, ep, cp; 1 each by default) — and answers a
:class:`TrainerMemory` of bytes per rank:

- **model states**, sharded: master weights, gradients and optimizer states (AdamW: two), plus
  the frozen KL reference when there is one. Each rank holds
  ``(dense / (tp·pp) + routed / (tp·pp·ep)) / ranks`` parameters of each (``ranks``: the FSDP
  shard degree, the data-parallel ranks the states are split over).
- **gathered**: what FSDP2 unshards on every rank whatever ``ranks`` is — the input embedding
  or the output head (groups of their own when untied, one table when tied) and its unsharded
  gradient, and a decoder layer, the
  prefetched next one and the layer's unsharded gradient, in the compute dtype (a layer's
  routed experts are not gathered: MoE trainers keep experts with their owners).
- **activations** of one micro-batch of ``tokens`` (``/cp`` per rank): with checkpointing,
  every decoder layer's input (``hidden`` elements a token) and one layer's working set while
  it is recomputed; without, every layer's working set. A layer's working set is
  ``10·hidden + 4·kv_width + 4·mlp_width`` elements a token (``/tp``): the norms' inputs and
  outputs, q, k, v before and after rotary embedding and the k, v repeated for grouped
  attention, the attention output, and the gated MLP's gate, up, activation and product —
  measured within 10% on CPU (``tests/specs/test_trainmemory_measured.py``). Attention is taken
  as memory-efficient (no tokens² scores). Pipeline stages do not divide activations: under
  1F1B the first stage holds ``pp`` micro-batches of ``layers / pp`` layers.
- **log-prob chunk**: full-vocabulary logits of ``logprob_chunk_tokens`` tokens at a time in
  fp32 (and in the compute dtype while they are cast, when it is narrower), turned into their
  own gradient in place (``laminar.runtime.train.grpo``); 0 chunks: the model's own head on
  every token of the micro-batch — logits in the compute dtype, their fp32 log-softmax and its
  gradient.
- **reserve**: a fixed amount per rank (a process with torch imported, a CUDA context).

A rank's peak is the sum (:attr:`TrainerMemory.total`). On CPU, measured peaks of real steps
stay within it and above half of it (the test states the factor).
"""

from __future__ import annotations

from dataclasses import dataclass

from laminar.specs.modelspec import ModelSpec

LAYER_WORK = (10, 4, 4)  # elements a token of one layer: x hidden, x kv width, x MLP width


@dataclass(frozen=True, slots=True)
class TrainerMemory:
    """Bytes one trainer rank holds (see the module doc)."""

    weights: float
    """Master weights (sharded)."""
    grads: float
    """Gradients (sharded)."""
    optimizer: float
    """Optimizer states (sharded)."""
    reference: float
    """The frozen KL reference's weights (sharded); 0 without one."""
    gathered: float
    """Unsharded groups FSDP holds while it computes (root group, a layer and the next)."""
    activations: float
    """One micro-batch's activations kept for the backward, and the recomputed layer's."""
    logprobs: float
    """Full-vocabulary logits of one log-prob chunk (or of the micro-batch)."""
    reserve: float
    """Fixed per rank: process, runtime, device context."""

    @property
    def states(self) -> float:
        """Sharded model states: falls as 1/ranks."""
        return self.weights + self.grads + self.optimizer + self.reference

    @property
    def unsharded(self) -> float:
        """What a rank holds whatever the rank count."""
        return self.gathered + self.activations + self.logprobs + self.reserve

    @property
    def total(self) -> float:
        """A rank's peak."""
        return self.states + self.unsharded


def mlp_width(spec: ModelSpec) -> float:
    """Intermediate width of the MLP a token goes through (the active experts' widths for an
    MoE layer), from the layer's parameters: a gated MLP has 3·hidden·width."""
    h = spec.hidden
    q = spec.q_heads * spec.qk_head_dim
    kv = 2 * max(spec.kv_heads, 0) * spec.qk_head_dim
    attn = h * q + h * kv + spec.q_heads * spec.v_head_dim * h
    if spec.is_mla:
        attn = h * (q + spec.kv_lora_rank + spec.qk_rope_head_dim) + spec.q_heads * (
            spec.v_head_dim * h
        )
    body = spec.total_params - spec.embedding_params - spec.head_params - spec.routed_params
    per_layer = body / max(1, spec.layers)
    dense = max(0.0, (per_layer - attn) / (3 * h))
    if not spec.is_moe:
        return dense
    expert = spec.expert_params / (3 * h)
    return dense + spec.experts_per_token * expert * spec.moe_layers / max(1, spec.layers)


def kv_width(spec: ModelSpec) -> int:
    """Width of a token's keys (and values) in one layer."""
    if spec.is_mla:
        return spec.q_heads * spec.qk_head_dim
    return spec.kv_heads * spec.qk_head_dim


def trainer_memory(
    spec: ModelSpec,
    *,
    tokens: int,
    ranks: int = 1,
    checkpointing: bool = True,
    logprob_chunk_tokens: int = 512,
    master_bytes: int = 4,
    grad_bytes: int = 4,
    optimizer_bytes: int = 8,
    compute_bytes: int = 4,
    reference: bool = False,
    reference_bytes: int = 4,
    reserve_bytes: float = 0.0,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    cp: int = 1,
) -> TrainerMemory:
    """Bytes one trainer rank holds at its peak (see the module doc).

    ``tokens``: padded tokens of one micro-batch (at least the longest sequence: a micro-batch
    holds whole sequences). ``ranks``: the FSDP shard degree. ``optimizer_bytes``: optimizer
    state bytes a parameter (AdamW, fp32: 8). ``compute_bytes``: the dtype layers compute in
    (2 for bf16 mixed precision, 4 on CPU). ``tp``, ``pp``, ``ep``, ``cp``: tensor, pipeline,
    expert and context parallel degrees, each dividing what a rank holds.
    """
    for name, v in (("ranks", ranks), ("tp", tp), ("pp", pp), ("ep", ep), ("cp", cp)):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if tokens < 0 or logprob_chunk_tokens < 0:
        raise ValueError("tokens and logprob_chunk_tokens must be >= 0")
    h, b = spec.hidden, compute_bytes
    dense = spec.total_params - spec.routed_params
    params = (dense / (tp * pp) + spec.routed_params / (tp * pp * ep)) / ranks
    # the runtime wraps an untied output head and the input embedding as groups of their own
    # (as torchtitan does): one of them is unsharded at a time; a tied table is one group
    root = max(spec.embedding_params, spec.head_params) / tp
    body = spec.total_params - spec.embedding_params - spec.head_params
    # a layer's routed experts are not gathered: they stay with their expert-parallel owners
    # (MoE trainers shard experts by expert, not row-wise)
    layer = (body - spec.routed_params) / max(1, spec.layers) / tp
    gathered = root * (b + grad_bytes) + layer * (2 * b + grad_bytes)

    t = tokens / cp
    hc, kc, ic = LAYER_WORK
    work = (hc * h + kc * kv_width(spec) + ic * mlp_width(spec)) / tp  # elements a token
    # checkpointing: every layer's input and one layer recomputed; else every layer's set
    kept = spec.layers * t * (h if checkpointing else work) * b
    acts = kept + (t * work * b if checkpointing else 0.0)
    acts += 4 * t * h * b  # embedding output, final norm, hidden-state gradients in flight
    if logprob_chunk_tokens:  # one chunk in fp32, turned into its gradient in place
        logits = min(logprob_chunk_tokens, t) * spec.vocab / tp * (4 + (b if b != 4 else 0))
    else:  # the model's own head: compute dtype, fp32 log-softmax, its fp32 gradient
        logits = t * spec.vocab / tp * (b + 4 + 4)
    return TrainerMemory(
        weights=params * master_bytes,
        grads=params * grad_bytes,
        optimizer=params * optimizer_bytes,
        reference=params * reference_bytes if reference else 0.0,
        gathered=gathered,
        activations=acts,
        logprobs=logits,
        reserve=reserve_bytes,
    )
