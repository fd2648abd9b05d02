"""The numbers of one model the cost model and the memory check use (:class:`ModelSpec`).

Built from a Hugging Face ``config.json`` by :func:`laminar.specs.hfconfig.from_hf_config`;
``laminar.specs.model`` re-exports both with the shipped catalog.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BYTES_PER_DTYPE = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1}


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The numbers of one model the cost model and the memory check use (see module doc)."""

    name: str
    source: str
    layers: int
    hidden: int
    vocab: int
    q_heads: int
    kv_heads: int
    """KV heads of GQA; 0 for MLA, whose one latent per token every head shares."""
    qk_head_dim: int
    v_head_dim: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    total_params: int
    embedding_params: int
    """Input embedding table (a lookup, no FLOPs)."""
    head_params: int
    """Output head (0 when tied to the embedding)."""
    experts: int
    """Routed experts per MoE layer; 0 for a dense model."""
    experts_per_token: int
    moe_layers: int
    expert_params: int
    """Parameters of one routed expert in one layer."""
    window_layers: int = 0
    """Attention layers with a sliding window (their KV capped at ``window`` tokens)."""
    window: int = 0
    """Tokens a sliding-window layer attends to (0: no such layers)."""
    state_layers: int = 0
    """Linear-attention / state-space (Mamba) layers: a fixed state per sequence, no KV."""
    state_elements: int = 0
    """Elements of that state per sequence, over all state layers (convolution + SSM state)."""
    state_beside_attention: bool = False
    """True when a state layer also attends (Falcon-H1's parallel hybrid): every layer then has
    a KV cache, the state layers a state as well."""
    state_f32_elements: int = 0
    """Of those, the elements kept in float32 whatever the model's dtype (a Mamba-2 SSM state
    under ``mamba_ssm_cache_dtype: float32``, as Nemotron-H's config asks of vLLM)."""
    index_topk: int = 0
    """Tokens each query attends to under DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5);
    0: dense attention. Every token's latent stays cached; a lightning indexer picks the top k."""
    index_head_dim: int = 0
    """Width of the indexer's one key a token and layer (cached in FP8 with an FP32 scale per
    128 values, as vLLM keeps it)."""
    index_n_heads: int = 0
    """Indexer query heads (each scores every cached token: its cost is quadratic)."""
    quant_method: str = ""
    """The checkpoint's own weight quantization (``quantization_config``): ``fp8``, ``mxfp4``,
    ``int4``, ``int8``; empty: the weights are in the model's dtype."""
    quant_bytes: float = 0.0
    """Bytes of one quantized weight, its share of the scales included."""
    quant_experts_only: bool = False
    """True when only the routed experts are quantized (gpt-oss's MXFP4)."""
    notes: tuple[str, ...] = ()
    """What the sizing left out or assumed (a vision tower, a default), for the describe line."""

    # Derived facts ------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention (full or sliding window): the ones with a KV cache."""
        return self.layers if self.state_beside_attention else self.layers - self.state_layers

    @property
    def routed_params(self) -> int:
        """Parameters of every routed expert of every MoE layer."""
        return self.moe_layers * self.experts * self.expert_params

    @property
    def dense_params(self) -> int:
        """Parameters every token uses: all but the routed experts (embeddings included)."""
        return self.total_params - self.routed_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: the dense part and ``experts_per_token`` experts a layer."""
        return self.dense_params + self.moe_layers * self.experts_per_token * self.expert_params

    @property
    def attention_width(self) -> int:
        """Query heads x query/key head width: the attention's width, not the hidden size."""
        return self.q_heads * self.qk_head_dim

    @property
    def linear_flop_per_token(self) -> float:
        """Forward matmul FLOPs of one token: 2 x active parameters, the embedding lookup
        excepted (the output head is a matmul and counts)."""
        return 2.0 * (self.active_params - self.embedding_params)

    @property
    def attn_flop_per_token_sq(self) -> float:
        """Forward causal-attention FLOPs per squared sequence length: QK^T (2·heads·qk_dim per
        pair and layer) and AV (2·heads·v_dim), over the half of the pairs a causal mask keeps;
        every attention layer as if unwindowed (see :meth:`attn_flop_sq`)."""
        return float(self.attention_layers * self.q_heads * (self.qk_head_dim + self.v_head_dim))

    def attn_flop_sq(self, context: int | None = None) -> float:
        """:attr:`attn_flop_per_token_sq` for sequences of ``context`` tokens: a sliding-window
        layer's causal pairs are W·L − W²/2 instead of L²/2, the fraction (2WL − W²)/L²; a
        sparse-attention (DSA) layer attends its top k as a window of k does, and its indexer
        scores every pair (index_n_heads x index_head_dim, QK^T only)."""
        full = self.attn_flop_per_token_sq
        if self.index_topk:
            k, n = self.index_topk, context
            indexer = float(self.attention_layers * self.index_n_heads * self.index_head_dim)
            if context is None or n <= k:
                return full + indexer
            return full * (2.0 * k * n - k * k) / (n * n) + indexer
        if not self.window_layers or context is None or context <= self.window:
            return full
        w, n = self.window, context
        per_layer = full / self.attention_layers
        return full - self.window_layers * per_layer * (1.0 - (2.0 * w * n - w * w) / (n * n))

    @property
    def index_bytes_per_token(self) -> float:
        """Bytes of the DSA indexer's cached keys a token, over all attention layers (FP8 and
        an FP32 scale per 128 values, whatever the model's dtype); 0 without an indexer."""
        if not self.index_topk:
            return 0.0
        return self.attention_layers * (self.index_head_dim + 4.0 * math.ceil(self.index_head_dim
                                                                             / 128))

    def kv_read_bytes_per_token(self, dtype_bytes: int, context: int | None = None) -> float:
        """KV bytes a decode step reads per cached token: :meth:`kv_bytes_per_token`, except
        under DSA, whose step reads every token's indexer key but only the top k latents (k /
        ``context`` of them, when ``context`` is longer)."""
        if not self.index_topk:
            return self.kv_bytes_per_token(dtype_bytes, context)
        latent = self.kv_bytes_per_token(dtype_bytes, context) - self.index_bytes_per_token
        if context is not None and context > self.index_topk:
            latent *= self.index_topk / context
        return latent + self.index_bytes_per_token

    def _kv_elements_per_layer(self) -> int:
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.qk_head_dim

    def kv_bytes_per_token(self, dtype_bytes: int, context: int | None = None) -> float:
        """KV-cache bytes of one token over all layers: 2·kv_heads·head_dim per layer (GQA) or
        the compressed latent plus the shared RoPE key, kv_lora_rank + qk_rope_head_dim (MLA).

        With sliding-window or state layers the bytes a token costs depend on the sequence's
        length: ``context`` tokens give a window layer window/context of a full layer's bytes
        (its cache is capped at the window) and spread the fixed state over the context.
        ``context`` None: every attention layer uncapped and no state (a short sequence)."""
        if not (self.window_layers or self.state_layers):
            if self.is_mla:
                latent = self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
                return latent + self.index_bytes_per_token
            return 2 * self.layers * self.kv_heads * self.qk_head_dim * dtype_bytes
        per_layer = self._kv_elements_per_layer()
        full = (self.attention_layers - self.window_layers) * per_layer
        window = self.window_layers * per_layer
        if context is not None and context > self.window:
            window = window * self.window / context
        state = self._state_per_token(dtype_bytes, context)
        return (full + window) * dtype_bytes + state + self.index_bytes_per_token

    def kv_bytes_per_token_per_gpu(self, dtype_bytes: int, context: int | None, tp: int) -> float:
        """:meth:`kv_bytes_per_token` on one GPU of a TP-``tp`` replica: the KV cache split over
        :meth:`kv_shards`, a linear/state-space layer's state over all ``tp`` (vLLM shards its
        heads: ``MambaStateShapeCalculator``)."""
        state = self._state_per_token(dtype_bytes, context)
        kv = self.kv_bytes_per_token(dtype_bytes, context) - state
        return kv / self.kv_shards(tp) + state / tp

    def kv_read_bytes_per_token_per_gpu(self, dtype_bytes: int, context: int | None,
                                        tp: int) -> float:  # fmt: skip
        """The attention layers' part of :meth:`kv_read_bytes_per_token` on one GPU of a
        TP-``tp`` replica (split over :meth:`kv_shards`); a decode step reads each sequence's
        whole state besides, whatever its length (:meth:`state_bytes_per_sequence_per_gpu`)."""
        kv = self.kv_read_bytes_per_token(dtype_bytes, context)
        return (kv - self._state_per_token(dtype_bytes, context)) / self.kv_shards(tp)

    def state_bytes_per_sequence_per_gpu(self, dtype_bytes: int, tp: int) -> float:
        """:meth:`state_bytes_per_sequence` on one GPU of a TP-``tp`` replica (vLLM shards the
        state's heads over all TP ranks)."""
        return self.state_bytes_per_sequence(dtype_bytes) / tp

    def _state_per_token(self, dtype_bytes: int, context: int | None) -> float:
        if not self.state_layers or not context:
            return 0.0
        return self.state_bytes_per_sequence(dtype_bytes) / context

    def state_bytes_per_sequence(self, dtype_bytes: int) -> int:
        """Bytes of the linear/state-space layers' state one sequence holds, whatever its length
        (its float32 part at 4 bytes an element)."""
        f32 = self.state_f32_elements
        return (self.state_elements - f32) * dtype_bytes + f32 * 4

    def kv_shards(self, tp: int) -> int:
        """Ways tensor parallelism splits the KV cache: by KV head, so at most ``kv_heads``
        (beyond that each GPU keeps a copy of its head); MLA's latent is not split at all."""
        if self.is_mla:
            return 1
        return max(1, min(tp, self.kv_heads))

    def experts_touched(self, batch: float) -> float:
        """Expected distinct routed experts one MoE layer reads for a decode batch of
        ``batch`` tokens, with uniform routing: E·(1 − (1 − k/E)^b)."""
        if not self.is_moe or batch <= 0:
            return 0.0
        e, k = self.experts, self.experts_per_token
        return e * (1.0 - (1.0 - k / e) ** batch)
