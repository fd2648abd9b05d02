"""A model's derived facts from its Hugging Face ``config.json`` (or an inline spec).

The cost model and the memory check ask for what a model *does* (parameters read per decode
step, KV bytes per token, FLOPs per token, experts touched by a batch), never for raw config
keys. :func:`from_hf_config` reads the keys of the architectures in the catalog
(``laminar/data/models/``): dense GQA (Qwen2/2.5, Qwen3, Llama), Qwen3-MoE (routed experts,
``decoder_sparse_step``, ``mlp_only_layers``) and DeepSeek-V3 (MLA attention, shared experts,
``first_k_dense_replace`` dense layers). Mixtral's ``num_local_experts`` reads as experts too.

Parameter counts follow the modules the checkpoint holds: embeddings, every layer's attention
projections (with the QKV bias of Qwen2 and the q/k norms of Qwen3), RMSNorms, MLPs or routers +
experts, the final norm and an untied output head. DeepSeek's multi-token-prediction module
(``num_nextn_predict_layers``) is left out, as the model card's 671B leaves it out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError
from laminar.inputfile import InputFileError, MiB, load_json

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
        pair and layer) and AV (2·heads·v_dim), over the half of the pairs a causal mask keeps."""
        return float(self.layers * self.q_heads * (self.qk_head_dim + self.v_head_dim))

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """KV-cache bytes of one token over all layers: 2·kv_heads·head_dim per layer (GQA) or
        the compressed latent plus the shared RoPE key, kv_lora_rank + qk_rope_head_dim (MLA)."""
        if self.is_mla:
            return self.layers * (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
        return 2 * self.layers * self.kv_heads * self.qk_head_dim * dtype_bytes

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


# Reading config.json ------------------------------------------------------------------------


# The largest value each config.json dimension may take. Real models stay orders of magnitude
# below (the largest in parentheses); a bigger one is a typo or an attack, and refusing it
# keeps every count below exact in a float and every loop over layers short.
MAX_DIMS: dict[str, int] = {
    "hidden_size": 1 << 20,  # (16,384: Llama 3.1 405B)
    "num_hidden_layers": 10_000,  # (126: Llama 3.1 405B)
    "vocab_size": 1 << 24,  # (262,144: Gemma 3)
    "num_attention_heads": 1 << 14,  # (128: DeepSeek-V3, Llama 3.1 405B)
    "num_key_value_heads": 1 << 14,  # (<= the query heads)
    "head_dim": 1 << 14,  # (256: Gemma)
    "intermediate_size": 1 << 22,  # (53,248: Llama 3.1 405B)
    "moe_intermediate_size": 1 << 22,  # (2,048: DeepSeek-V3)
    "shared_expert_intermediate_size": 1 << 22,  # (20,480: Qwen2-57B-A14B)
    "n_routed_experts": 1 << 16,  # (384: Kimi K2)
    "num_experts": 1 << 16,
    "num_local_experts": 1 << 16,
    "num_experts_per_tok": 1 << 16,  # (<= the experts)
    "n_shared_experts": 1 << 10,  # (2: DeepSeek-V2)
    "kv_lora_rank": 1 << 16,  # (512: DeepSeek-V3)
    "q_lora_rank": 1 << 16,  # (1,536: DeepSeek-V3)
    "qk_rope_head_dim": 1 << 16,  # (64)
    "qk_nope_head_dim": 1 << 16,  # (128)
    "v_head_dim": 1 << 16,  # (128)
    "first_k_dense_replace": 10_000,  # (<= the layers)
    "moe_layer_freq": 10_000,
    "decoder_sparse_step": 10_000,
}


class _Keys:
    """Typed access to a config mapping; errors name the file and key."""

    def __init__(self, data: dict[str, Any], source: str, where: str):
        self.data, self.source, self.where = data, source, where

    def _err(self, key: str, msg: str) -> ConfigError:
        return ConfigError(self.source, f"{self.where}{key}" if self.where else key, msg)

    def int(self, key: str, default: int | None = None, *, low: int = 1) -> int:
        """A whole number in ``low``..``MAX_DIMS[key]`` (a float with nothing after the point
        counts: some exporters write ``4096.0``)."""
        v = self.data.get(key, default)
        if v is None:
            raise self._err(key, "missing; a Hugging Face config.json has it for this model")
        high = MAX_DIMS[key]
        whole = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v == int(v))
        if isinstance(v, bool) or not whole or not low <= v <= high:
            shown = repr(v) if isinstance(v, int | float | str) else type(v).__name__
            raise self._err(key, f"expected a whole number {low}..{high:,} (got {shown:.40})")
        return int(v)

    def flag(self, key: str, default: bool) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            raise self._err(key, f"expected true or false (got {v!r:.40})")
        return v

    def layer_list(self, key: str, layers: int) -> set[int]:
        """A list of layer indices (0..layers-1), each at most once: checked before use."""
        v = self.data.get(key) or []
        if not isinstance(v, list) or len(v) > layers:
            raise self._err(key, f"expected a list of at most {layers} layer indices")
        bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < layers]
        if bad:
            raise self._err(key, f"{bad[0]!r:.40} is not a layer index 0..{layers - 1}")
        return set(v)


def _check_finite(data: dict[str, Any], source: str, where: str) -> None:
    """Every number in ``data`` (at any depth) finite: a NaN or infinite ``rope_theta`` is no
    model, even where Laminar does not read it."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, key = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{key}.{k}" if key else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, f"{key}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(source, f"{where}{key}"[:120], f"{value} is not a finite number")


def from_hf_config(data: dict[str, Any], *, name: str, source: str, where: str = "") -> ModelSpec:
    """The :class:`ModelSpec` of a Hugging Face ``config.json`` mapping.

    ``source`` and ``where`` (a key prefix such as ``model.spec.``) go into error messages."""
    if not isinstance(data, dict):
        raise ConfigError(source, where.rstrip("."), "expected a mapping (a config.json object)")
    _check_finite(data, source, where)
    k = _Keys(data, source, where)
    hidden, layers, vocab = k.int("hidden_size"), k.int("num_hidden_layers"), k.int("vocab_size")
    heads = k.int("num_attention_heads")
    mtype = data.get("model_type", "")
    if not isinstance(mtype, str):
        raise k._err("model_type", f"expected text, got {type(mtype).__name__}")
    if "kv_lora_rank" in data and data.get("kv_lora_rank"):
        attn, dims = _mla_attention(k, hidden, heads)
    else:
        attn, dims = _gqa_attention(k, hidden, heads, mtype)
    moe = _moe_layout(k, layers)
    dense_mlp = 3 * hidden * k.int("intermediate_size") if moe["dense_layers"] else 0
    moe_layer = 0
    if moe["moe_layers"]:
        moe_layer = moe["router"] * hidden + moe["experts"] * moe["expert_params"](hidden)
        moe_layer += moe["shared_params"](hidden)
    embed = vocab * hidden
    head = 0 if k.flag("tie_word_embeddings", False) else vocab * hidden
    total = (
        embed
        + head
        + hidden  # final norm
        + layers * (attn + 2 * hidden)  # attention + its two RMSNorms
        + moe["dense_layers"] * dense_mlp
        + moe["moe_layers"] * moe_layer
    )
    return ModelSpec(
        name=name,
        source=source,
        layers=layers,
        hidden=hidden,
        vocab=vocab,
        q_heads=heads,
        total_params=total,
        embedding_params=embed,
        head_params=head,
        experts=moe["experts"],
        experts_per_token=moe["per_token"],
        moe_layers=moe["moe_layers"],
        expert_params=moe["expert_params"](hidden) if moe["experts"] else 0,
        **dims,
    )


def _gqa_attention(k: _Keys, hidden: int, heads: int, mtype: str) -> tuple[int, dict]:
    kv = k.int("num_key_value_heads", heads)
    if heads % kv:
        raise k._err("num_key_value_heads", f"{kv} must divide num_attention_heads ({heads})")
    default_dim = hidden // heads if hidden % heads == 0 else None
    head_dim = k.int("head_dim", default_dim) if k.data.get("head_dim") else default_dim
    if head_dim is None:
        raise k._err("head_dim", "missing, and hidden_size is not a multiple of the heads")
    q_w, kv_w = heads * head_dim, kv * head_dim
    # Qwen2 has a bias on q, k and v without an attention_bias key; Llama's key says.
    bias = k.flag("attention_bias", mtype.startswith("qwen2"))
    params = hidden * q_w + 2 * hidden * kv_w + q_w * hidden + (q_w + 2 * kv_w if bias else 0)
    if mtype.startswith("qwen3"):
        params += 2 * head_dim  # q_norm and k_norm over one head's width
    dims = dict(
        kv_heads=kv, qk_head_dim=head_dim, v_head_dim=head_dim, kv_lora_rank=0, qk_rope_head_dim=0
    )
    return params, dims


def _mla_attention(k: _Keys, hidden: int, heads: int) -> tuple[int, dict]:
    rank, rope = k.int("kv_lora_rank"), k.int("qk_rope_head_dim")
    nope, v_dim = k.int("qk_nope_head_dim"), k.int("v_head_dim")
    qk_dim = nope + rope
    q_rank = k.int("q_lora_rank", 0, low=0) if k.data.get("q_lora_rank") else 0
    # With a q LoRA: q_a_proj, q_a_layernorm, q_b_proj; without: one projection.
    full_q = hidden * heads * qk_dim
    q = hidden * q_rank + q_rank + q_rank * heads * qk_dim if q_rank else full_q
    kv = hidden * (rank + rope) + rank + rank * heads * (nope + v_dim)  # kv_a, its norm, kv_b
    params = q + kv + heads * v_dim * hidden  # + o_proj
    dims = dict(
        kv_heads=0, qk_head_dim=qk_dim, v_head_dim=v_dim, kv_lora_rank=rank, qk_rope_head_dim=rope
    )
    return params, dims


def _moe_layout(k: _Keys, layers: int) -> dict:
    """Which layers are MoE, and the size of a routed and a shared expert."""
    experts = 0
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        if k.data.get(key):
            experts = k.int(key)
            break
    none = {
        "experts": 0,
        "per_token": 0,
        "moe_layers": 0,
        "dense_layers": layers,
        "router": 0,
        "expert_params": lambda h: 0,
        "shared_params": lambda h: 0,
    }
    if experts == 0:
        return none
    per_token = k.int("num_experts_per_tok")
    if per_token > experts:
        raise k._err("num_experts_per_tok", f"{per_token} exceeds the {experts} experts")
    inter = k.int("moe_intermediate_size", k.data.get("intermediate_size"))
    if "first_k_dense_replace" in k.data:  # DeepSeek: the first k layers stay dense
        first = k.int("first_k_dense_replace", 0, low=0)
        freq = k.int("moe_layer_freq", 1)
        moe_idx = [i for i in range(layers) if i >= first and i % freq == 0]
    else:  # Qwen-MoE: every decoder_sparse_step-th layer, except mlp_only_layers
        step = k.int("decoder_sparse_step", 1)
        only = k.layer_list("mlp_only_layers", layers)
        moe_idx = [i for i in range(layers) if i not in only and (i + 1) % step == 0]
    shared = k.int("n_shared_experts", 0, low=0) if k.data.get("n_shared_experts") else 0
    shared_inter = shared * inter
    if k.data.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one gated shared expert
        shared_inter = k.int("shared_expert_intermediate_size")
    gate = 1 if k.data.get("shared_expert_intermediate_size") else 0
    bias = 1 if k.data.get("topk_method") == "noaux_tc" else 0  # DeepSeek's correction bias
    return {
        "experts": experts,
        "per_token": per_token,
        "moe_layers": len(moe_idx),
        "dense_layers": layers - len(moe_idx),
        "router": experts,
        "expert_params": lambda h: 3 * h * inter,
        "shared_params": lambda h: 3 * h * shared_inter + gate * h + bias * experts,
    }


# The catalog and the config's choice -------------------------------------------------------


def _catalog() -> dict[str, Any]:
    text = (resources.files("laminar") / "data" / "models" / "catalog.json").read_text()
    return json.loads(text)


def catalog_names() -> list[str]:
    """Models shipped in ``laminar/data/models/`` (one plain config.json each)."""
    return sorted(_catalog())


def catalog_entry(name: str) -> dict[str, Any]:
    """The catalog's record of ``name``: Hugging Face id, source, the model card's counts."""
    cat = _catalog()
    if name not in cat:
        raise ConfigError(
            "config",
            "model.name",
            f"unknown model {name!r}; known: "
            f"{', '.join(sorted(cat))} (or give model.hf_config / model.spec)",
        )
    return cat[name]


def catalog_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of a catalog model."""
    entry = catalog_entry(name)
    text = (resources.files("laminar") / "data" / "models" / f"{name}.json").read_text()
    return from_hf_config(json.loads(text), name=name, source=entry["source"])


MAX_HF_CONFIG_BYTES = 4 * MiB
"""Largest ``config.json`` read (bytes); a model's is a few kilobytes."""


def read_hf_config(path: str | Path, *, name: str = "") -> ModelSpec:
    """The :class:`ModelSpec` of a local ``config.json`` file, read with bounds
    (``laminar.inputfile``: a regular file, UTF-8, at most 64 deep, standard JSON numbers)."""
    p = Path(path)
    try:
        data = load_json(p, kind="model.hf_config (config.json)", max_bytes=MAX_HF_CONFIG_BYTES)
    except InputFileError as e:
        raise ConfigError(e.path, "", e.detail) from None
    return from_hf_config(data, name=name or p.parent.name or p.stem, source=str(p))


def model_spec(model: Any) -> ModelSpec:
    """The spec a config's ``model`` section names: ``spec`` (inline), else ``hf_config`` (a
    file), else the catalog entry ``name``."""
    if model.spec:
        return from_hf_config(
            dict(model.spec), name=model.name, source="config", where="model.spec."
        )
    if model.hf_config:
        return read_hf_config(model.hf_config, name=model.name)
    return catalog_spec(model.name)


def describe(spec: ModelSpec) -> str:
    """One line: total/active parameters, layers, attention and KV bytes per token (bf16)."""
    moe = f", {spec.experts} experts (top-{spec.experts_per_token})" if spec.is_moe else ""
    return (
        f"{spec.name}: {spec.total_params / 1e9:.2f}B params ({spec.active_params / 1e9:.2f}B "
        f"active{moe}), {spec.layers} layers, attention width {spec.attention_width}, "
        f"KV {spec.kv_bytes_per_token(2):,} B/token (bf16)"
    )
