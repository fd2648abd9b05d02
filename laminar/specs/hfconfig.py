"""Reading a Hugging Face ``config.json`` into a :class:`~laminar.specs.modelspec.ModelSpec`.

What is understood (anything else that changes a model's size is refused by name, and keys
nobody reads are listed in a :class:`~laminar.errors.LaminarWarning`):

- **Families** by ``model_type`` (:data:`FAMILIES`): gated (SwiGLU/GeGLU: gate, up, down) or
  two-matrix (GELU/ReLU fc1/fc2) MLPs, RMSNorm or LayerNorm with a bias, norms a layer,
  attention/MLP biases, learned positions, q/k norms, attention sinks, and whether the output
  head is tied to the embedding when ``tie_word_embeddings`` is left out (transformers' config
  class defaults, e.g. Gemma, GPT-2, Falcon and StarCoder2 tie). A ``model_type`` not among
  them is refused by name (a new architecture sized as Llama came out 14-37% off, or thousands
  of times); a config with no ``model_type`` (an inline ``model.spec``) is sized as a
  Llama-style decoder, with a warning that says so. Every family the installed transformers
  builds a causal LM for is checked against the parameters and KV cache its modeling code
  builds (``tests/specs/test_transformers_types.py``); of the others (remote-code families:
  ChatGLM, InternLM2, Yi, EXAONE 3), ChatGLM has a hand count in
  ``tests/specs/test_real_configs.py``, the rest are Llama's layers under their own names.
- **Key names** of other families (:data:`ALIASES`): GPT-2's ``n_embd``/``n_layer``/
  ``n_head``/``n_inner``, ChatGLM's ``num_layers``/``ffn_hidden_size``/``padded_vocab_size``/
  ``multi_query_group_num``/``kv_channels``, Falcon's ``num_kv_heads``/``multi_query``,
  XGLM's ``attention_heads``, EXAONE's and Hunyuan's ``num_shared_experts``; and sub-configs
  (:data:`NESTED`): DBRX's ``attn_config.kv_n_heads`` and ``ffn_config``'s expert count, top k
  and width, named so in errors.
- **Attention kinds per layer**: full, sliding window (``sliding_window`` with ``layer_types``,
  ``sliding_window_pattern``, Gemma-2/3's, Cohere-2's and gpt-oss's alternation, Qwen2's
  ``use_sliding_window``/``max_window_layers``, or every layer as Mistral), Llama 4's chunked
  attention (its cache capped at ``attention_chunk_size``), MLA, and the linear-attention /
  state-space layers of hybrids, each with its parameters and its state a sequence (the
  convolution's last kernel-1 inputs and the SSM or delta-rule state, as vLLM allocates it,
  not a KV cache): Jamba's Mamba layers; Mamba-2 in Bamba and Granite 4 (``layer_types``,
  ``attn_layer_indices``) and Nemotron-H, whose every layer is one Mamba-2, attention, MLP or
  MoE block (``hybrid_override_pattern``; an SSM state in float32 where
  ``mamba_ssm_cache_dtype`` says); Gated DeltaNet with gated attention in Qwen3-Next and
  Qwen3.5 (``layer_types``, ``full_attention_interval``; its state in float32 where
  ``mamba_ssm_dtype`` says); MiniMax's lightning attention
  (``layer_types``, ``attn_type_list``); Kimi Delta Attention beside MLA in Kimi Linear
  (``linear_attn_config``); LFM2's gated short convolutions (``layer_types``,
  ``full_attn_idxs``); Falcon-H1, whose every layer runs attention and a
  Mamba-2 mixer side by side (a KV cache and a state in each). Other linear-attention / recurrent
  layers (:data:`STATE_SPACE_TYPES`: pure Mamba models, RWKV, ...) are refused naming the feature.
- **DeepSeek sparse attention** (DeepSeek-V3.2, GLM-5: ``index_topk``): MLA plus a lightning
  indexer a layer, its FP8 key cached beside each token's latent; a decode step reads the top
  k latents and every indexer key (``ModelSpec.kv_read_bytes_per_token``).
- **MoE**: Qwen-MoE, Mixtral, DeepSeek-V2/V3 (MLA, shared experts, dense first layers),
  GLM-4.5, gpt-oss (expert biases, router bias), Jamba (``expert_layer_period``), Llama 4
  (``interleave_moe_layer_step``, a shared expert, dense layers of ``intermediate_size_mlp``),
  Granite-MoE's shared MLP, and transformers 5's ``mlp_layer_types``.
- **quantization_config** of the checkpoint (``fp8`` with its block scales, gpt-oss's
  ``mxfp4`` experts, NVFP4 (ModelOpt's ``modelopt`` or compressed-tensors', served
  weight-only), AWQ/GPTQ/compressed-tensors int4/int8): the rollout serves the weights as
  stored (``ModelSpec.quant_*``); the trainer keeps ``model.dtype``.
- **Multimodal** configs: the language model under ``text_config`` (``llm_config``,
  ``language_config``) is sized, with transformers' defaults for the dimensions a nested
  config leaves out (Llama, Mistral, Qwen2, Gemma); the vision/audio tower is not, and a note
  says so.

DeepSeek's multi-token-prediction module (``num_nextn_predict_layers``) is left out, as the
model card's 671B leaves it out; so are Qwen3-Next's and Qwen3.5's (``mtp_num_hidden_layers``)
and Nemotron-H's.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

from laminar.errors import ConfigError, LaminarWarning
from laminar.inputfile import leaves
from laminar.specs.modelspec import ModelSpec

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
    "shared_intermediate_size": 1 << 22,  # (Granite-MoE-shared)
    "prefix_dense_intermediate_size": 1 << 22,  # (Cohere 2 MoE)
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
    "moe_num_shared_experts": 1 << 10,
    "moe_k": 1 << 16,
    "moe_num_experts": 1 << 16,
    "moe_layer_interval": 10_000,
    "moe_layer_end_index": 10_000,
    "moe_layer_start_index": 10_000,
    "moe_layer_freq": 10_000,
    "decoder_sparse_step": 10_000,
    "sliding_window": 1 << 24,  # (131,072)
    "sliding_window_pattern": 10_000,  # (6: Gemma 3)
    "max_window_layers": 10_000,
    "n_positions": 1 << 24,  # (GPT-2's 1,024)
    "attn_layer_period": 10_000,  # (8: Jamba)
    "attn_layer_offset": 10_000,
    "expert_layer_period": 10_000,
    "expert_layer_offset": 10_000,
    "mamba_d_state": 1 << 16,  # (16: Jamba)
    "mamba_d_conv": 1 << 10,  # (4)
    "mamba_expand": 64,  # (2)
    "mamba_dt_rank": 1 << 20,  # (256)
    # Mamba-2 mixers (Bamba, Granite 4, Nemotron-H: their own names for the same widths)
    "mamba_n_heads": 1 << 14,  # (128)
    "mamba_num_heads": 1 << 14,
    "mamba_d_head": 1 << 14,  # (64)
    "mamba_head_dim": 1 << 14,
    "mamba_n_groups": 1 << 14,  # (8)
    "n_groups": 1 << 14,
    "ssm_state_size": 1 << 16,  # (256)
    "conv_kernel": 1 << 10,  # (4)
    "block_multiple_of": 1 << 16,  # (LFM2)
    "conv_L_cache": 1 << 10,  # (LFM2)
    "num_dense_layers": 10_000,  # (LFM2-MoE)
    "expand": 64,  # (2)
    "mamba_d_ssm": 1 << 20,  # (Falcon-H1: the mixer's width, over mamba_expand x hidden)
    # Gated DeltaNet (Qwen3-Next, Qwen3.5)
    "linear_num_value_heads": 1 << 14,  # (64)
    "linear_num_key_heads": 1 << 14,  # (16)
    "linear_key_head_dim": 1 << 14,  # (128)
    "linear_value_head_dim": 1 << 14,  # (128)
    "linear_conv_kernel_dim": 1 << 10,  # (4)
    "linear_head_dim": 1 << 14,  # (Kimi Linear)
    "linear_num_heads": 1 << 14,  # (Kimi Linear)
    "full_attention_interval": 10_000,  # (4)
    "moe_latent_size": 1 << 20,  # (Nemotron 3 Super's latent MoE)
    "moe_shared_expert_intermediate_size": 1 << 22,  # (Nemotron-H)
    "attention_chunk_size": 1 << 24,  # (8,192: Llama 4)
    "interleave_moe_layer_step": 10_000,  # (2: Llama 4 Maverick)
    "intermediate_size_mlp": 1 << 22,  # (16,384: Llama 4)
    "index_topk": 1 << 24,  # (2,048: DeepSeek-V3.2, GLM-5)
    "index_head_dim": 1 << 14,  # (128)
    "index_n_heads": 1 << 14,  # (64)
}

ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "d_model"),
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads", "attention_heads"),
    "intermediate_size": ("ffn_hidden_size", "n_inner", "ffn_dim"),
    "head_dim": ("kv_channels",),
    "n_shared_experts": ("num_shared_experts", "moe_num_shared_experts"),  # EXAONE, Hunyuan,
    # ERNIE 4.5 MoE (which names its experts moe_num_experts, its experts a token moe_k)
    "num_experts": ("moe_num_experts",),
    "num_experts_per_tok": ("moe_k", "num_experts_per_token"),  # ERNIE, Kimi Linear
}
"""Other families' names of a dimension, tried in order when the usual key is missing
(ChatGLM's ``padded_vocab_size``, the real table size, wins over ``vocab_size``)."""


@dataclass(frozen=True, slots=True)
class Family:
    """How a ``model_type``'s decoder layers are built (transformers' modeling code)."""

    gated: bool = True
    """Gated MLP (gate, up, down: 3 matrices) or two-matrix (fc1, fc2)."""
    layer_norm: bool = False
    """LayerNorm with a bias (2·hidden) instead of RMSNorm (hidden)."""
    norms: int = 2
    """Norms a layer (Gemma-2/3 and GLM-4: 4; parallel-attention models: 1)."""
    tie: bool = False
    """``tie_word_embeddings`` when the config leaves it out (the config class's default)."""
    bias_key: str = "attention_bias"
    bias_default: bool = False
    bias_o: bool = True
    """The attention bias key covers o_proj as well as q, k, v (Llama); False: q, k, v (Qwen2)."""
    mlp_bias_key: str = "mlp_bias"
    mlp_bias_default: bool = False
    qk_norm: bool = False
    """RMSNorm over one head's width on q and k (Qwen3, Gemma 3)."""
    positions_key: str = ""
    """Key of a learned position-embedding table's length (GPT-2)."""
    head_bias: bool = False
    window_pattern: int = 0
    """Every ``window_pattern``-th layer full, the rest sliding, when ``layer_types`` is absent."""
    sinks: bool = False
    """A learned attention sink a head (gpt-oss)."""
    kv_rule: str = ""
    """``falcon``, ``bigcode``, ``chatglm``: the family's own KV-head keys."""
    shared_experts: int = 0
    """Shared experts a MoE layer has when no key says (Llama 4: one, of intermediate_size)."""
    sized_keys: tuple[str, ...] = ()
    """Keys of :data:`REFUSED_KEYS` this family's sizing reads (Llama 4's interleaved MoE layers,
    chunked attention and parameter-free q/k norm)."""
    mixer: str = ""
    """The state layers' token mixer: ``mamba`` (Jamba), ``mamba2`` (Bamba, Granite 4,
    Nemotron-H) or ``gdn`` (Gated DeltaNet: Qwen3-Next, Qwen3.5); empty: attention only."""
    attn_gate: bool = False
    """q_proj also produces a sigmoid gate on the attention output (Qwen3-Next: 2x its width)."""
    parallel: bool = False
    """Every layer runs attention and the state mixer side by side (Falcon-H1): each layer holds
    a KV cache and a state."""
    blocks: bool = False
    """Every layer of the config is one block of one kind (Nemotron-H: a Mamba-2, attention, MLP
    or MoE block, each with its own norm), read from ``hybrid_override_pattern``/
    ``layers_block_type``; otherwise a layer is a token mixer and an MLP."""
    known: bool = True


_GPT2 = Family(gated=False, layer_norm=True, tie=True, bias_key="", bias_default=True,
               mlp_bias_key="", mlp_bias_default=True, positions_key="n_positions")  # fmt: skip
_NONGATED = Family(gated=False, layer_norm=True, bias_default=True, mlp_bias_key="",
                   mlp_bias_default=True)  # fmt: skip
_QWEN2 = Family(bias_key="", bias_default=True, bias_o=False)
FAMILIES: dict[str, Family] = {
    **dict.fromkeys(("llama", "mistral", "mixtral", "ministral", "phi3", "granite", "olmo",
                     "olmo2", "internlm2", "stablelm", "deepseek_v2", "deepseek_v3", "yi",
                     "exaone", "seed_oss", "hunyuan_v1_dense", "helium", "smollm3"), Family()),
    # Baichuan 1/2 (remote code): Llama's layers with q, k, v fused in one W_pack (ALiBi in the
    # 13B: no parameters either way), an untied head (Baichuan 2's NormHead: a plain weight)
    "baichuan": Family(),
    # DBRX: every layer MoE (GLU experts w1, v1, w2), LayerNorms without a bias, fused Wqkv
    # without a bias; its widths in sub-configs (NESTED)
    "dbrx": Family(),
    **dict.fromkeys(("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_vl_text",
                     "qwen2_5_vl_text"), _QWEN2),
    **dict.fromkeys(("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text"),
                    Family(qk_norm=True)),
    "smollm3": Family(tie=True),
    "gemma": Family(tie=True),
    "gemma2": Family(tie=True, norms=4, window_pattern=2),
    **dict.fromkeys(("gemma3", "gemma3_text"),
                    Family(tie=True, norms=4, qk_norm=True, window_pattern=6)),
    "cohere": Family(tie=True, norms=1),
    "cohere2": Family(tie=True, norms=1, window_pattern=4),
    # Cohere 2 MoE: dense prefix layers of prefix_dense_intermediate_size, then experts
    "cohere2_moe": Family(tie=True, norms=1, window_pattern=4),
    "glm": Family(bias_default=True, bias_o=False),
    **dict.fromkeys(("glm4", "glm4v_text"), Family(norms=4, bias_default=True, bias_o=False)),
    "chatglm": Family(bias_key="add_qkv_bias", bias_o=False, mlp_bias_key="add_bias_linear",
                      kv_rule="chatglm"),
    "gpt_oss": Family(bias_default=True, window_pattern=2, sinks=True),
    "jamba": Family(mixer="mamba"),
    # Gated DeltaNet / attention hybrids: Qwen3-Next, Qwen3.5 (its text model; the flat name too)
    **dict.fromkeys(("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"),
                    Family(qk_norm=True, attn_gate=True, mixer="gdn",
                           sized_keys=("linear_num_value_heads", "attn_output_gate"))),
    # Mamba-2 / attention hybrids, a mixer and an MLP a layer: Bamba, Granite 4 (-H)
    **dict.fromkeys(("bamba", "granitemoehybrid"),
                    Family(mixer="mamba2", sized_keys=("mamba_n_heads",))),
    # LFM2: gated short-convolution layers beside attention (q/k norms), a tied head
    **dict.fromkeys(("lfm2", "lfm2_moe"), Family(tie=True, qk_norm=True, mixer="shortconv")),
    # Kimi Linear: Kimi Delta Attention layers beside MLA layers, DeepSeek-style experts
    "kimi_linear": Family(mixer="kda"),
    # MiniMax-Text-01 / M1 (transformers' minimax): lightning (linear) attention layers
    "minimax": Family(mixer="lightning"),
    # Falcon-H1: attention and a Mamba-2 mixer in parallel in every layer
    "falcon_h1": Family(mixer="mamba2", parallel=True, sized_keys=("mamba_n_heads",)),
    # Nemotron-H (Nemotron Nano 2, Nemotron 3): one block a layer, relu2 MLPs and experts
    "nemotron_h": Family(gated=False, mixer="mamba2", blocks=True,
                         sized_keys=("hybrid_override_pattern", "ssm_state_size")),
    "gpt2": _GPT2,
    "gpt_bigcode": replace(_GPT2, kv_rule="bigcode"),
    "gpt_neox": Family(gated=False, layer_norm=True, mlp_bias_key="", mlp_bias_default=True,
                       bias_default=True),
    "phi": Family(gated=False, layer_norm=True, norms=1, bias_key="", bias_default=True,
                  mlp_bias_key="", mlp_bias_default=True, head_bias=True),
    "falcon": Family(gated=False, layer_norm=True, tie=True, bias_key="bias",
                     mlp_bias_key="bias", kv_rule="falcon"),
    "starcoder2": Family(gated=False, layer_norm=True, tie=True, bias_key="use_bias",
                         bias_default=True, mlp_bias_key="use_bias", mlp_bias_default=True),
    "gptj": Family(gated=False, layer_norm=True, norms=1, bias_key="", mlp_bias_key="",
                   mlp_bias_default=True, head_bias=True),
    **dict.fromkeys(("gpt_neo", "bloom", "opt", "mpt", "codegen", "xglm", "biogpt",
                     "openai-gpt"), _NONGATED),
    "nemotron": Family(gated=False, layer_norm=True),  # squared-ReLU fc1/fc2, LayerNorm1P
    # Checked against transformers' modeling code by a meta-device count of each default config
    # (tests/specs/test_transformers_types.py): Llama-style layers under another name, MLA
    # (kv_lora_rank), DeepSeek- or Mixtral-style experts, layer_types windows.
    **dict.fromkeys(("axk1", "bitnet", "cwm", "diffllama", "exaone4", "flex_olmo", "granitemoe",
                     "hyperclovax", "minimax_m2", "ministral3", "olmo3", "olmoe", "solar_open"),
                    Family()),
    **dict.fromkeys(("granite_swa", "minicpm3", "vaultgemma", "youtu"), Family(tie=True)),
    **dict.fromkeys(("glm4_moe_lite", "granitemoeshared", "granitemoe_swa", "mellum",
                     "exaone_moe", "hy_v3"), Family()),
    "ernie4_5": Family(tie=True, bias_key="use_bias", mlp_bias_key="use_bias"),
    # ERNIE 4.5 MoE: experts from moe_layer_start_index to moe_layer_end_index every
    # moe_layer_interval-th layer, moe_num_shared_experts, an expert-score bias a MoE layer
    "ernie4_5_moe": Family(tie=True, bias_key="use_bias", mlp_bias_key="use_bias",
                           sized_keys=("moe_layer_start_index", "moe_num_shared_experts")),
    # two-matrix MLPs (ReLU^2, xIELU) on RMSNorm: Arcee AFM, Apertus (q/k norms); Jais 2's on
    # LayerNorm
    "arcee": Family(gated=False),
    "apertus": Family(gated=False, qk_norm=True),
    "jais2": Family(gated=False, layer_norm=True),
    # GLM-4.5/4.6 (and GLM-4.5V's text model): q, k, v biases; DeepSeek-style experts
    **dict.fromkeys(("glm4_moe", "glm4v_moe_text"), Family(bias_o=False)),
    # DeepSeek sparse attention (DSA): MLA with a lightning indexer a layer (_indexer)
    **dict.fromkeys(("deepseek_v32", "glm_moe_dsa"), Family()),
    "dots1": Family(qk_norm=True),
    "phimoe": Family(layer_norm=True, bias_default=True),
    # Llama 4: MoE every interleave_moe_layer_step-th layer (moe_layers), a shared expert, dense
    # layers of intermediate_size_mlp, chunked local attention (its KV capped at the chunk), an
    # L2 q/k norm without weights
    **dict.fromkeys(("llama4", "llama4_text"), Family(
        shared_experts=1,
        sized_keys=("interleave_moe_layer_step", "attention_chunk_size", "use_qk_norm"))),
}  # fmt: skip
_UNKNOWN = Family(known=False)

NESTED_DEFAULTS: dict[str, dict[str, int]] = {
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                  num_hidden_layers=32, num_attention_heads=32),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8),
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32),
    "gemma3_text": dict(vocab_size=262_208, hidden_size=2304, intermediate_size=9216,
                        num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=256, sliding_window=4096),
    "gemma": dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576,
                  num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=16,
                  head_dim=256),
}  # fmt: skip
"""transformers' config-class defaults of the dimensions, for a nested ``text_config`` (which
``save_pretrained`` writes as a diff against them: LLaVA-1.5 leaves out Llama's 4096)."""

STATE_SPACE_TYPES: dict[str, str] = {
    "zamba": "Mamba state-space layers",
    "zamba2": "Mamba-2 state-space layers",
    "mamba": "Mamba state-space layers",
    "mamba2": "Mamba-2 state-space layers",
    "falcon_mamba": "Mamba state-space layers",
    "rwkv": "RWKV recurrent layers",
    "recurrent_gemma": "RG-LRU recurrent layers",
    "xlstm": "xLSTM recurrent layers",
    "olmo_hybrid": "linear-attention layers",
}
"""Architectures with linear-attention or state-space layers Laminar does not size (the hybrids
of :data:`FAMILIES` with a ``mixer`` it does)."""

REFUSED_KEYS: dict[str, str] = {
    "hidden_size_per_layer_input": "Gemma 3n's per-layer embeddings",
    "altup_num_inputs": "Gemma 3n's AltUp",
    "interleave_moe_layer_step": "Llama 4's interleaved MoE layers",
    "attention_chunk_size": "chunked attention",
    "cross_attention_layers": "cross-attention layers (Llama 3.2 Vision)",
    "hybrid_override_pattern": "a Mamba/attention hybrid pattern",
    "linear_num_value_heads": "linear-attention layers",
    "mamba_n_heads": "Mamba-2 state-space layers",
    "ssm_state_size": "state-space layers",
    "moe_layer_start_index": "MoE layers from a start index",
    "moe_num_shared_experts": "shared experts under this name",
    "parallel_attn_mlp_res": "parallel residual variants",
    "use_qk_norm": "q/k norms under this name",
    "qk_layernorm": "q/k LayerNorms",
    "attn_output_gate": "a gated attention output",
}
"""Keys that change a model's size in a way Laminar does not count: refused when set."""

_HARMLESS_TEXT = """
_name_or_path architectures auto_map model_type transformers_version torch_dtype dtype
bos_token_id eos_token_id pad_token_id sep_token_id unk_token_id decoder_start_token_id
initializer_range initializer_factor rms_norm_eps layer_norm_eps layer_norm_epsilon
norm_epsilon norm_eps layernorm_epsilon use_cache attention_dropout hidden_dropout
resid_pdrop embd_pdrop
attn_pdrop embedding_dropout hidden_act hidden_activation activation_function rope_theta
rope_scaling rope_parameters rotary_emb_base rotary_pct partial_rotary_factor rotary_dim
rope_local_base_freq max_position_embeddings pretraining_tp output_router_logits
router_aux_loss_coef router_z_loss_coef norm_topk_prob n_group topk_group topk_method
routed_scaling_factor scoring_func ep_size aux_loss_alpha seq_aux num_nextn_predict_layers
use_parallel_residual attn_logit_softcapping final_logit_softcapping query_pre_attn_scalar
cache_implementation scale_embedding embedding_multiplier logits_scaling residual_multiplier
attention_multiplier swiglu_limit initial_context_length experts_per_token
router_jitter_noise output_attentions output_hidden_states return_dict use_return_dict
is_decoder add_cross_attention tokenizer_class task_specific_params id2label label2id
problem_type chunk_size_feed_forward prefix finetuning_task torchscript model_max_length
seq_length apply_residual_connection_post_layernorm post_layer_norm rmsnorm
apply_query_key_layer_scaling attention_softmax_in_fp32 fp32_residual_connection
original_rope rope_ratio classifier_dropout bias_dropout_fusion quantization_bit
pre_seq_len prefix_projection image_token_index image_token_id video_token_id
vision_start_token_id vision_end_token_id vision_token_id projector_hidden_act
vision_feature_select_strategy vision_feature_layer image_seq_length mm_tokens_per_image
boi_token_index eoi_token_index _attn_implementation attn_implementation use_flash_attn
n_ctx scale_attn_weights reorder_and_upcast_attn scale_attn_by_inverse_layer_idx
summary_type summary_use_proj summary_activation summary_proj_to_labels
summary_first_dropout use_mamba_kernels use_mambapy use_associative_scan
num_logits_to_keep max_length use_bfloat16 layer_norm_type attention_bias_in_fp32 alibi
tie_encoder_decoder vision_config audio_config vision_tower mm_vision_tower
num_experts_per_token decoder_layer_norm_eps use_sliding_window max_window_layers
head_dim_original sliding_window_size rope_interleave layer_rope_theta no_rope_layers
no_rope_layer_interval attn_temperature_tuning floor_scale attn_scale enable_moe_fp32_combine
router_scaling_factor time_step_min time_step_max time_step_limit time_step_floor
mamba_chunk_size chunk_size mamba_hidden_act mlp_hidden_act residual_in_fp32
rescale_prenorm_residual mamba_dt_min mamba_dt_max mamba_dt_limit mamba_dt_init_floor
position_embedding_type moe_shared_expert_overlap mtp_layers_block_type
mtp_hybrid_override_pattern z_loss_coefficient mamba_norm_before_gate
lm_head_multiplier mlp_multipliers key_multiplier attention_out_multiplier moe_norm_min
attention_in_multiplier ssm_multipliers ssm_in_multiplier ssm_out_multiplier
expert_selection_fn shared_expert_combination_strategy prefix_dense_sliding_window_pattern
logit_scale moe_renormalize num_expert_group mla_use_nope use_expert_bias
mtp_num_hidden_layers mtp_use_dedicated_embeddings block_size full_attn_alpha_factor
full_attn_beta_factor linear_attn_alpha_factor linear_attn_beta_factor mlp_alpha_factor
mlp_beta_factor postnorm layernorm_full_attention_alpha layernorm_full_attention_beta
layernorm_linear_attention_alpha layernorm_linear_attention_beta layernorm_mlp_alpha
layernorm_mlp_beta max_seq_len emb_pdrop z_loss_weight
"""
HARMLESS = frozenset(_HARMLESS_TEXT.split())
"""Keys read by nothing that change no parameter count or cache size."""

WRAPPERS = ("text_config", "llm_config", "language_config")
TOWERS = ("vision_config", "audio_config", "vision_tower", "mm_vision_tower", "visual",
          "speech_config")  # fmt: skip


class UnknownArchitecture(ConfigError):
    """A ``model_type`` that is not among :data:`FAMILIES` (nor a refused state-space type)."""


NESTED: dict[str, dict[str, str]] = {
    "dbrx": {
        "num_key_value_heads": "attn_config.kv_n_heads",
        "num_local_experts": "ffn_config.moe_num_experts",
        "num_experts_per_tok": "ffn_config.moe_top_k",
        "moe_intermediate_size": "ffn_config.ffn_hidden_size",
    },
}
"""Families that keep size-setting keys in sub-configs: canonical key -> ``parent.child``
(DBRX's ``attn_config`` and ``ffn_config``, transformers' DbrxConfig), each required."""

NESTED_COPIES: dict[str, dict[str, str]] = {"dbrx": {"hidden_size": "ffn_config.hidden_size"}}
"""Sub-config copies of a top-level key (transformers writes DBRX's width into ffn_config too):
checked against it where both are given, never required."""

NESTED_HARMLESS = frozenset(("model_type", "attn_pdrop", "clip_qkv", "rope_theta", "ffn_act_fn",
                             "moe_jitter_eps", "moe_loss_weight", "moe_normalize_expert_weights",
                             "uniform_expert_assignment"))  # fmt: skip
"""Sub-config keys that change no parameter count or cache size."""


def as_llama_shaped(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its ``model_type``: sized as a Llama-style decoder, for the estimates
    that tolerate it where the architecture is not known (the runtime's memory check, whether
    a model the runtime serves has experts); never for the simulator's sizes."""
    return {k: v for k, v in data.items() if k != "model_type"}


class _Keys:
    """Typed access to a config mapping; errors name the file and key (its family's name for
    it); every key read is remembered, so the unread ones can be listed."""

    def __init__(self, data: dict[str, Any], source: str, where: str):
        self.data, self.source, self.where = data, source, where
        self.alias: dict[str, str] = {}
        self.used: set[str] = set()

    def name(self, key: str) -> str:
        return self.alias.get(key, key)

    def get(self, key: str, default: Any = None) -> Any:
        actual = self.name(key)
        self.used.add(actual)
        return self.data.get(actual, default)

    def _err(self, key: str, msg: str) -> ConfigError:
        key = self.name(key)
        return ConfigError(self.source, f"{self.where}{key}" if self.where else key, msg)

    def int(self, key: str, default: int | None = None, *, low: int = 1) -> int:
        """A whole number in ``low``..``MAX_DIMS[key]`` (a float with nothing after the point
        counts: some exporters write ``4096.0``)."""
        v = self.get(key, default)
        if v is None:
            raise self._err(key, "missing; a Hugging Face config.json has it for this model")
        high = MAX_DIMS[key]
        whole = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v == int(v))
        if isinstance(v, bool) or not whole or not low <= v <= high:
            shown = repr(v) if isinstance(v, int | float | str) else type(v).__name__
            raise self._err(key, f"expected a whole number {low}..{high:,} (got {shown:.40})")
        return int(v)

    def opt_int(self, key: str, *, low: int = 1) -> int:
        """``int(key)`` when set (not null, not 0/false), else 0."""
        return self.int(key, low=low) if self.get(key) else 0

    def flag(self, key: str, default: bool) -> bool:
        if not key:
            return default
        v = self.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self._err(key, f"expected true or false (got {v!r:.40})")
        return v

    def layer_list(self, key: str, layers: int) -> set[int]:
        """A list of layer indices (0..layers-1), each at most once: checked before use."""
        v = self.get(key) or []
        if not isinstance(v, list) or len(v) > layers:
            raise self._err(key, f"expected a list of at most {layers} layer indices")
        bad = [x for x in v if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < layers]
        if bad:
            raise self._err(key, f"{bad[0]!r:.40} is not a layer index 0..{layers - 1}")
        return set(v)


UNBOUNDED = frozenset(("time_step_limit", "mamba_dt_limit"))
"""Keys whose upper bound a Mamba-2 config writes as infinity (no clamp of dt): accepted."""


def check_finite(data: dict[str, Any], source: str, where: str) -> None:
    """Every number in ``data`` (at any depth) finite: a NaN or infinite ``rope_theta`` is no
    model, even where Laminar does not read it."""
    for value, key in leaves(data):
        if value == math.inf and str(key).split("[")[0].rsplit(".", 1)[-1] in UNBOUNDED:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(source, f"{where}{key}"[:120], f"{value} is not a finite number")


# The language model of a config ---------------------------------------------------------------


def _text_model(data: dict[str, Any], source: str, where: str) -> tuple[dict, str, dict, list]:
    """(the language model's keys, their key prefix, the outer config, notes): a multimodal
    config's ``text_config`` when its top level has no hidden size of its own."""
    notes = [f"{t} (the {t.split('_')[0]} tower) not sized" for t in TOWERS if data.get(t)]
    top_has = any(data.get(n) is not None for n in ("hidden_size", *ALIASES["hidden_size"]))
    for key in WRAPPERS:
        inner = data.get(key)
        if top_has or inner is None:
            continue
        if not isinstance(inner, dict):
            raise ConfigError(source, f"{where}{key}", "expected a mapping (the text model)")
        inner = dict(inner)
        mtype = inner.get("model_type", "")
        filled = [k for k, v in NESTED_DEFAULTS.get(mtype, {}).items() if k not in inner]
        for k in filled:
            inner[k] = NESTED_DEFAULTS[mtype][k]
        if filled:
            notes.append(f"{key}: {', '.join(filled)} from transformers' {mtype} defaults")
        return inner, f"{where}{key}.", data, notes
    return data, where, {}, notes


def _family(k: _Keys, outer: dict[str, Any]) -> tuple[str, Family]:
    mtype = k.get("model_type", "")
    if not isinstance(mtype, str):
        raise k._err("model_type", f"expected text, got {type(mtype).__name__}")
    if mtype in STATE_SPACE_TYPES:
        raise k._err(
            "model_type",
            f"{mtype!r} has {STATE_SPACE_TYPES[mtype]}, which Laminar does not size (their "
            "parameters and per-sequence state differ from attention's); supported hybrids: "
            + ", ".join(sorted(t for t, f in FAMILIES.items() if f.mixer)),
        )
    if k.get("is_encoder_decoder") or outer.get("is_encoder_decoder"):
        raise k._err("is_encoder_decoder", "encoder-decoder models are not sized; a decoder-only "
                     "language model is")  # fmt: skip
    fam = FAMILIES.get(mtype, _UNKNOWN)
    for key, what in REFUSED_KEYS.items():
        if key not in fam.sized_keys and k.get(key):
            raise k._err(key, f"{what} changes the model's size and is not sized by Laminar")
    if mtype and not fam.known:
        raise UnknownArchitecture(
            k.source,
            k.where + "model_type",
            f"{mtype!r:.60} is not an architecture Laminar sizes (`laminar config "
            f"architectures` lists the {len(FAMILIES)} it does); if its layers are Llama-style "
            "(gated MLP, RMSNorm, "
            "no biases, the head untied unless tie_word_embeddings), set model_type to \"llama\" "
            "in a copy of the config.json or in model.spec",
        )
    _aliases(k)
    return mtype, fam


def _aliases(k: _Keys) -> None:
    for canon, alts in ALIASES.items():
        if k.data.get(canon) is not None:  # a second name of the same value (GLM-4's num_layers)
            k.used.update(a for a in alts if k.data.get(a) == k.data[canon])
        else:
            alt = next((a for a in alts if k.data.get(a) is not None), None)
            if alt:
                k.alias[canon] = alt
    if k.data.get("padded_vocab_size") is not None:
        k.alias["vocab_size"] = "padded_vocab_size"
        k.used.add("vocab_size")


def _tied(k: _Keys, fam: Family, outer: dict[str, Any], notes: list[str]) -> bool:
    """``tie_word_embeddings``: the text model's, else the outer config's, else the config
    class's default for the text model's type, else the outer type's."""
    if "tie_word_embeddings" in k.data and k.data["tie_word_embeddings"] is not None:
        return k.flag("tie_word_embeddings", False)
    if outer.get("tie_word_embeddings") is not None:
        v = outer["tie_word_embeddings"]
        if not isinstance(v, bool):
            raise ConfigError(k.source, "tie_word_embeddings", f"expected true or false ({v!r:.9})")
        return v
    if fam.known:
        return fam.tie
    outer_fam = FAMILIES.get(outer.get("model_type", ""))
    if outer_fam is not None:
        return outer_fam.tie
    notes.append("tie_word_embeddings not given: an untied output head assumed")
    return False


# Attention -------------------------------------------------------------------------------------


def _kv_heads(k: _Keys, fam: Family, heads: int) -> int:
    if fam.kv_rule == "falcon":
        if k.flag("new_decoder_architecture", False):
            return k.int("num_key_value_heads", k.get("num_kv_heads", heads))
        return 1 if k.flag("multi_query", True) else heads
    if fam.kv_rule == "bigcode":
        return 1 if k.flag("multi_query", True) else heads
    if fam.kv_rule == "chatglm" and k.flag("multi_query_attention", False):
        k.alias["num_key_value_heads"] = "multi_query_group_num"
    if k.get("num_key_value_heads") is None:  # null: one KV head a query head (transformers)
        return heads
    return k.int("num_key_value_heads")


def _gqa_attention(k: _Keys, fam: Family, hidden: int, heads: int) -> tuple[int, dict]:
    kv = _kv_heads(k, fam, heads)
    if heads % kv:
        raise k._err("num_key_value_heads", f"{kv} must divide num_attention_heads ({heads})")
    default_dim = hidden // heads if hidden % heads == 0 else None
    head_dim = k.int("head_dim", default_dim) if k.get("head_dim") else default_dim
    if head_dim is None:
        raise k._err("head_dim", "missing, and hidden_size is not a multiple of the heads")
    q_w, kv_w = heads * head_dim, kv * head_dim
    params = hidden * q_w + 2 * hidden * kv_w + q_w * hidden
    if k.flag(fam.bias_key, fam.bias_default):
        params += q_w + 2 * kv_w + (hidden if fam.bias_o else 0)
    if fam.attn_gate and k.flag("attn_output_gate", True):
        params += hidden * q_w  # q_proj's second half: the output gate
    if fam.qk_norm:
        params += 2 * head_dim  # q_norm and k_norm over one head's width
    if fam.sinks:
        params += heads
    dims = dict(
        kv_heads=kv, qk_head_dim=head_dim, v_head_dim=head_dim, kv_lora_rank=0, qk_rope_head_dim=0
    )
    return params, dims


def _mla_attention(k: _Keys, hidden: int, heads: int) -> tuple[int, dict]:
    rank, rope = k.int("kv_lora_rank"), k.int("qk_rope_head_dim")
    for derived in ("num_key_value_heads", "head_dim", "qk_head_dim"):
        k.get(derived)  # MLA's one latent serves every head; its widths follow from the ranks
    if k.flag("attention_bias", False):
        raise k._err("attention_bias", "biases on MLA's projections are not sized")
    nope, v_dim = k.int("qk_nope_head_dim"), k.int("v_head_dim")
    qk_dim = nope + rope
    q_rank = k.opt_int("q_lora_rank", low=0)
    # With a q LoRA: q_a_proj, q_a_layernorm, q_b_proj; without: one projection.
    full_q = hidden * heads * qk_dim
    q = hidden * q_rank + q_rank + q_rank * heads * qk_dim if q_rank else full_q
    kv = hidden * (rank + rope) + rank + rank * heads * (nope + v_dim)  # kv_a, its norm, kv_b
    params = q + kv + heads * v_dim * hidden  # + o_proj
    dims = dict(
        kv_heads=0, qk_head_dim=qk_dim, v_head_dim=v_dim, kv_lora_rank=rank, qk_rope_head_dim=rope
    )
    return params, dims


def _indexer(k: _Keys, hidden: int) -> tuple[int, dict]:
    """(parameters a layer, dims) of DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2,
    GLM-5): wq_b from the q LoRA to index_n_heads x index_head_dim, wk from the hidden state to
    one index_head_dim key, its LayerNorm, and weights_proj (a weight a head); none without
    ``index_topk``."""
    if not k.get("index_topk"):
        types = k.data.get("layer_types")
        if isinstance(types, list) and "indexed_attention" in types:
            raise k._err("layer_types", "indexed_attention layers need the indexer's index_topk, "
                         "index_head_dim and index_n_heads")  # fmt: skip
        return 0, {}
    topk, dim, heads = k.int("index_topk"), k.int("index_head_dim"), k.int("index_n_heads")
    q_rank = k.opt_int("q_lora_rank", low=0)
    if not q_rank or not k.get("kv_lora_rank"):
        raise k._err("index_topk", "a sparse-attention indexer is sized on MLA with a q LoRA "
                     "(DeepSeek-V3.2, GLM-5); this config has none")  # fmt: skip
    types = k.get("indexer_types")
    if types is not None and (not isinstance(types, list) or any(t != "full" for t in types)):
        raise k._err(
            "indexer_types",
            "layers that reuse another layer's top-k (\"shared\") are not sized by Laminar; "
            "every layer's own indexer (\"full\") is",
        )
    for key in ("index_topk_freq", "index_skip_topk_offset", "index_topk_pattern"):
        if k.get(key) is not None:
            raise k._err(key, "an indexer pattern across layers is not sized by Laminar")
    params = q_rank * heads * dim + hidden * dim + 2 * dim + hidden * heads
    return params, dict(index_topk=topk, index_head_dim=dim, index_n_heads=heads)


_FULL = {"full_attention": "full", "attention": "full", "global": "full",
         "indexed_attention": "full"}  # DSA: every token's latent cached, top-k attended
_SLIDING = {"sliding_attention": "sliding", "local": "sliding", "sliding": "sliding",
            "chunked_attention": "sliding"}  # Llama 4: its cache capped at the chunk


def _layer_kinds(k: _Keys, mtype: str, fam: Family, layers: int) -> list[str]:
    """``full``, ``sliding`` or ``state`` (a linear-attention / state-space mixer) for each
    layer (see module doc)."""
    own = _own_pattern(k, mtype, layers)
    if own is not None:
        return own
    key = "layer_types"
    if k.get(key) is None and k.get("layers_block_type") is not None:
        key = "layers_block_type"  # Granite 4's and Bamba's other name for it
    types = k.get(key)
    window = _window(k)
    if types is not None:
        k.get("sliding_window_pattern")  # the pattern layer_types spells out
        k.get("full_attn_idxs")  # LFM2's, which layer_types spells out too
        return _listed_kinds(k, key, types, layers, window, fam)
    if mtype == "minimax":  # transformers' default: softmax on even layers
        return ["full" if i % 2 == 0 else "state" for i in range(layers)]
    if fam.mixer == "gdn":  # Qwen3-Next: every full_attention_interval-th layer attends
        every = k.int("full_attention_interval", 4)
        return ["full" if (i + 1) % every == 0 else "state" for i in range(layers)]
    if fam.mixer == "mamba2":  # Bamba, Granite 4 without a list: every layer Mamba-2
        return ["state"] * layers
    if not window:
        return ["full"] * layers
    pattern = k.opt_int("sliding_window_pattern") or fam.window_pattern
    if pattern:
        return ["sliding" if (i + 1) % pattern else "full" for i in range(layers)]
    if "use_sliding_window" in k.data:  # Qwen2/3: the layers from max_window_layers on
        if not k.flag("use_sliding_window", False):
            return ["full"] * layers
        first = k.int("max_window_layers", layers, low=0)
        return ["sliding" if i >= first else "full" for i in range(layers)]
    return ["sliding"] * layers  # Mistral, Phi-3, StarCoder2: every layer


def _own_pattern(k: _Keys, mtype: str, layers: int) -> list[str] | None:
    """A family's own key for where its attention layers are (None: not given)."""
    if mtype == "jamba":
        period, offset = k.int("attn_layer_period", 8), k.int("attn_layer_offset", 4, low=0)
        return ["full" if i % period == offset else "state" for i in range(layers)]
    if mtype == "bamba" and k.get("attn_layer_indices") is not None:
        attn = k.layer_list("attn_layer_indices", layers)
        return ["full" if i in attn else "state" for i in range(layers)]
    if mtype == "kimi_linear" and k.get("layer_types") is None:
        return _kimi_kinds(k, layers)
    if mtype in ("lfm2", "lfm2_moe") and k.get("layer_types") is None:  # 0-indexed
        if k.get("full_attn_idxs") is None:
            return ["full"] * layers
        attn = k.layer_list("full_attn_idxs", layers)
        return ["full" if i in attn else "state" for i in range(layers)]
    listed = k.get("attn_type_list") if mtype == "minimax" else None
    if listed is not None:  # MiniMax's remote-code name: 0 lightning, 1 softmax, a layer
        if not isinstance(listed, list) or len(listed) != layers or any(
                t not in (0, 1) or isinstance(t, bool) for t in listed):  # fmt: skip
            raise k._err("attn_type_list", f"expected a list of {layers} 0 (lightning) or 1 "
                         "(softmax attention), one a layer")  # fmt: skip
        return ["full" if t else "state" for t in listed]
    return None


def _kimi_kinds(k: _Keys, layers: int) -> list[str]:
    """Kimi Linear's layers from its checkpoint's ``linear_attn_config``: ``full_attn_layers``
    and ``kda_layers``, 1-indexed (transformers' default without them: MLA on every 4th)."""
    cfg = _linear_attn_config(k)
    full, kda = cfg.get("full_attn_layers"), cfg.get("kda_layers")
    if full is None and kda is None:
        return ["full" if i and i % 4 == 0 else "state" for i in range(layers)]
    kinds: list[str | None] = [None] * layers
    for name, listed, kind in (("full_attn_layers", full, "full"), ("kda_layers", kda, "state")):
        if not isinstance(listed, list) or any(
                isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= layers
                for i in listed):  # fmt: skip
            raise k._err(f"linear_attn_config.{name}", f"expected a list of layer numbers "
                         f"1..{layers}")  # fmt: skip
        for i in listed:
            kinds[i - 1] = kind
    if None in kinds:
        raise k._err("linear_attn_config", f"layer {kinds.index(None) + 1} is in neither "
                     "full_attn_layers nor kda_layers")  # fmt: skip
    return kinds  # type: ignore[return-value]


def _linear_attn_config(k: _Keys) -> dict[str, Any]:
    cfg = k.get("linear_attn_config") or {}
    if not isinstance(cfg, dict):
        raise k._err("linear_attn_config", "expected a mapping")
    return cfg


def _window(k: _Keys) -> int:
    """Tokens a local layer keeps: ``sliding_window``, else Llama 4's ``attention_chunk_size``
    (a chunked layer attends within its chunk; its cache, like a window's, is capped)."""
    return k.opt_int("sliding_window") or k.opt_int("attention_chunk_size")


_STATE = {"linear_attention": "state", "mamba": "state", "conv": "state"}


def _listed_kinds(k: _Keys, key: str, types: Any, layers: int, window: int,
                  fam: Family) -> list[str]:  # fmt: skip
    if not isinstance(types, list) or len(types) != layers:
        raise k._err(key, f"expected a list of {layers} layer types (one a layer)")
    kinds = []
    for t in types:
        if t in _FULL or (t in _SLIDING and not window):
            kinds.append("full")
        elif t in _SLIDING:
            kinds.append("sliding")
        elif t in _STATE and fam.mixer:
            kinds.append("state")
        else:
            shown = repr(t) if isinstance(t, str) else type(t).__name__
            raise k._err(
                key,
                f"{shown:.40} layers are not sized by Laminar here (full_attention and "
                "sliding_attention are; linear-attention and state-space layers only in the "
                "hybrid families `laminar config architectures` lists)",
            )
    return kinds


# MLPs and experts -----------------------------------------------------------------------------


def _lift_nested(k: _Keys, mtype: str) -> None:
    """A family's sub-configs (:data:`NESTED`) read as dotted keys (``ffn_config.moe_top_k``,
    named so in errors); a canonical key also at the top must agree with its sub-config's, and
    a sub-config key nothing reads is listed with the unread keys."""
    wanted, copies = NESTED.get(mtype, {}), NESTED_COPIES.get(mtype, {})
    if not wanted and not copies:
        return
    k.data = dict(k.data)
    for parent in sorted({d.split(".")[0] for d in (*wanted.values(), *copies.values())}):
        _flatten(k, parent)
    for canon, dotted in wanted.items():
        at_top = k.data.get(canon) is not None or canon in k.alias
        if k.data.get(dotted) is None:
            if not at_top:
                raise k._err(dotted, f"missing; a {mtype} config.json states it (its size and "
                             "cache depend on it)")  # fmt: skip
        elif at_top:
            _agree(k, canon, dotted)
        else:
            k.alias[canon] = dotted
            k.used.add(dotted)
    for canon, dotted in copies.items():
        if k.data.get(dotted) is not None:
            _agree(k, canon, dotted)


def _flatten(k: _Keys, parent: str) -> None:
    """A sub-config's keys as ``parent.child`` in ``k.data`` (its harmless ones marked read)."""
    sub = k.data.get(parent)
    if sub is None:
        return
    if not isinstance(sub, dict):
        raise k._err(parent, "expected a mapping (a sub-config)")
    k.used.add(parent)
    for child, value in sub.items():
        k.data[f"{parent}.{child}"] = value
        if child in NESTED_HARMLESS:
            k.used.add(f"{parent}.{child}")


def _agree(k: _Keys, canon: str, dotted: str) -> None:
    """A top-level key and its sub-config's copy (both given) must be the same value."""
    k.used.add(dotted)
    top = k.name(canon)
    if k.data.get(top) is not None and k.data[top] != k.data[dotted]:
        raise k._err(canon, f"{k.data[top]!r:.40} disagrees with {k.where}{dotted} "
                     f"({k.data[dotted]!r:.40})")  # fmt: skip


def _mlp_params(fam: Family, k: _Keys, hidden: int, inter: int) -> int:
    bias = k.flag(fam.mlp_bias_key, fam.mlp_bias_default)
    if fam.gated:
        return 3 * hidden * inter + (2 * inter + hidden if bias else 0)
    return 2 * hidden * inter + (inter + hidden if bias else 0)


def _dense_inter(k: _Keys, fam: Family, hidden: int) -> int:
    if not fam.gated and k.get("intermediate_size") is None:  # GPT-2's n_inner null, Falcon
        return 4 * hidden
    if k.get("model_type") == "granitemoehybrid":  # Granite 4 without experts: its shared MLP
        k.get("intermediate_size")  # the experts' width
        return k.int("shared_intermediate_size")
    if k.get("model_type") == "lfm2":  # LFM2: 2/3 of it, scaled, up to a multiple (Llama's)
        inter = k.int("intermediate_size")
        if k.flag("block_auto_adjust_ff_dim", True):
            inter = int(2 * inter / 3)
            mult = k.get("block_ffn_dim_multiplier", 1.0)
            if mult is not None:
                number = isinstance(mult, int | float) and not isinstance(mult, bool)
                if not number or not 0 < mult <= 64:
                    raise k._err("block_ffn_dim_multiplier", f"expected a number in (0, 64] "
                                 f"(got {mult!r:.40})")  # fmt: skip
                of = k.int("block_multiple_of", 256)
                inter = of * ((int(mult * inter) + of - 1) // of)
        return inter
    if k.get("prefix_dense_intermediate_size"):  # Cohere 2 MoE: the dense prefix's width
        k.get("intermediate_size")
        return k.int("prefix_dense_intermediate_size")
    if k.get("intermediate_size_mlp"):  # Llama 4: the dense layers' own width
        return k.int("intermediate_size_mlp")
    return k.int("intermediate_size")


def _moe_layout(k: _Keys, mtype: str, fam: Family, layers: int) -> dict:
    """Which layers are MoE, and the size of a routed and a shared expert."""
    experts = 0
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        if k.get(key):
            experts = k.int(key)
            break
    if experts == 0:
        k.get("num_experts_per_tok")  # of no experts (a dense Granite 4)
        return {"experts": 0, "per_token": 0, "moe_idx": [], "router": lambda h: 0,
                "expert": lambda h: 0, "shared": lambda h: 0}  # fmt: skip
    per_token = k.int("num_experts_per_tok")
    if per_token > experts:
        raise k._err("num_experts_per_tok", f"{per_token} exceeds the {experts} experts")
    inter = k.int("moe_intermediate_size", k.get("intermediate_size"))
    moe_idx = _moe_layers(k, mtype, layers)
    shared = k.opt_int("n_shared_experts", low=0) if k.get("n_shared_experts") is not None \
        else fam.shared_experts
    shared_inter = shared * inter
    gate = 0
    if k.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one gated shared expert
        shared_inter, gate = k.int("shared_expert_intermediate_size"), 1
    elif k.get("shared_intermediate_size"):  # Granite-MoE-shared: one ungated shared MLP
        shared_inter = k.int("shared_intermediate_size")
    # DeepSeek's and ERNIE 4.5's expert-score correction bias
    bias = 1 if k.get("topk_method") == "noaux_tc" or mtype == "ernie4_5_moe" else 0
    oss = mtype == "gpt_oss"  # biases on every expert's gate_up and down, and on the router
    return {
        "experts": experts,
        "per_token": per_token,
        "moe_idx": moe_idx,
        "router": lambda h: experts * h + (experts if oss else 0),
        "expert": lambda h: 3 * h * inter + ((2 * inter + h) if oss else 0),
        "shared": lambda h: 3 * h * shared_inter + gate * h + bias * experts,
    }


def _moe_layers(k: _Keys, mtype: str, layers: int) -> list[int]:
    types = k.get("mlp_layer_types")
    if types is not None:  # transformers 5: "dense" or "sparse" a layer, over any other key
        if not isinstance(types, list) or len(types) != layers or not set(types) <= {"dense",
                                                                                      "sparse"}:
            raise k._err("mlp_layer_types", f"expected a list of {layers} \"dense\" or "
                         "\"sparse\" (one a layer)")  # fmt: skip
        k.used.update(("first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step"))
        return [i for i, t in enumerate(types) if t == "sparse"]
    if k.get("interleave_moe_layer_step"):  # Llama 4
        k.get("intermediate_size_mlp")  # the dense layers' width (none when every layer is MoE)
        listed = k.get("moe_layers")
        if listed is not None:
            return sorted(k.layer_list("moe_layers", layers))
        step = k.int("interleave_moe_layer_step")
        return list(range(step - 1, layers, step))
    if mtype == "jamba":
        period = k.int("expert_layer_period", 2)
        offset = k.int("expert_layer_offset", 1, low=0)
        return [i for i in range(layers) if i % period == offset]
    if mtype == "lfm2_moe":  # LFM2-MoE: the first num_dense_layers stay dense
        first = k.int("num_dense_layers", 2, low=0)
        return list(range(min(first, layers), layers))
    if mtype == "ernie4_5_moe":  # from a start index to an end index (-1: the last layer)
        start = k.int("moe_layer_start_index", 1, low=0)
        end = k.get("moe_layer_end_index", -1)
        end = layers - 1 if end == -1 else k.int("moe_layer_end_index", low=0)
        every = k.int("moe_layer_interval", 1)
        return [i for i in range(layers) if (i + 1) % every == 0 and start <= i <= end]
    if "first_k_dense_replace" in k.data:  # DeepSeek: the first k layers stay dense
        first = k.int("first_k_dense_replace", 0, low=0)
        freq = k.int("moe_layer_freq", 1)
        return [i for i in range(layers) if i >= first and i % freq == 0]
    # Qwen-MoE: every decoder_sparse_step-th layer, except mlp_only_layers
    step = k.int("decoder_sparse_step", 1)
    only = k.layer_list("mlp_only_layers", layers)
    return [i for i in range(layers) if i not in only and (i + 1) % step == 0]


# Mamba (Jamba) -------------------------------------------------------------------------------


Mixer = tuple[int, int, int]
"""(parameters, state elements per sequence, how many of those vLLM keeps in float32) of one
linear-attention / state-space layer."""


def _mamba(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one Jamba Mamba layer: in_proj (x and the
    gate), the depthwise conv1d, x_proj (dt, B, C), dt_proj, A_log, D, out_proj and the dt/B/C
    RMSNorms; its state is the convolution's last d_conv-1 inputs and the d_state SSM state."""
    ds, dc, expand = k.int("mamba_d_state", 16), k.int("mamba_d_conv", 4), k.int("mamba_expand", 2)
    di = expand * hidden
    rank = k.get("mamba_dt_rank", "auto")
    dtr = math.ceil(hidden / 16) if rank == "auto" else k.int("mamba_dt_rank")
    proj_bias, conv_bias = k.flag("mamba_proj_bias", False), k.flag("mamba_conv_bias", True)
    params = (
        hidden * 2 * di + (2 * di if proj_bias else 0)  # in_proj
        + di * dc + (di if conv_bias else 0)  # conv1d
        + di * (dtr + 2 * ds)  # x_proj
        + dtr * di + di  # dt_proj
        + di * ds + di  # A_log, D
        + di * hidden + (hidden if proj_bias else 0)  # out_proj
        + dtr + 2 * ds  # dt, B, C layernorms
    )  # fmt: skip
    return params, di * (dc - 1) + di * ds, 0


def _first(k: _Keys, names: tuple[str, ...], default: Any) -> tuple[str, Any]:
    """(the key, its value) of the first of ``names`` a config sets (families name one width
    differently: Nemotron-H's ``mamba_num_heads`` is Bamba's ``mamba_n_heads``)."""
    for name in names:
        if k.get(name) is not None:
            return name, k.get(name)
    return names[0], default


def _mamba2(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one Mamba-2 mixer (Bamba, Granite 4,
    Nemotron-H): in_proj (x, the gate, B and C of ``n_groups`` groups, dt a head), the depthwise
    conv1d over x, B and C, dt_bias, A_log and D a head, the gated RMSNorm and out_proj; its
    state is the convolution's last d_conv-1 inputs and heads x head_dim x d_state."""
    hk, heads = _first(k, ("mamba_n_heads", "mamba_num_heads"), 128)
    heads = k.int(hk, heads)
    expand_key, expand = _first(k, ("mamba_expand", "expand"), 2)
    dk, head_dim = _first(k, ("mamba_d_head", "mamba_head_dim"), "auto")
    falcon = k.get("model_type") == "falcon_h1"  # its norm optional, out_proj's own bias key
    d_ssm = k.opt_int("mamba_d_ssm") if falcon else 0  # Falcon-H1: the width itself
    if head_dim == "auto":
        inner = d_ssm or k.int(expand_key, expand) * hidden
        if inner % heads:
            raise k._err(hk, f"{heads} heads must divide the {inner}-wide Mamba-2 mixer")
        head_dim = inner // heads
    else:
        head_dim = k.int(dk, head_dim)
        k.get(expand_key)  # the width heads x head_dim already states
    inner = heads * head_dim
    if d_ssm and d_ssm != inner:
        raise k._err("mamba_d_ssm", f"{d_ssm} is not mamba_n_heads x mamba_d_head ({inner})")
    # vLLM keeps the SSM state in mamba_ssm_cache_dtype; for Nemotron-H float32 unless the
    # config says (vllm/model_executor/models/config.py, DEFAULT_MAMBA_SSM_CACHE_DTYPE)
    nemotron = k.get("model_type") == "nemotron_h"
    cache_dtype = _ssm_dtype(k, "float32" if nemotron else None)
    gk, groups = _first(k, ("mamba_n_groups", "n_groups"), 1)
    sk, d_state = _first(k, ("mamba_d_state", "ssm_state_size"), 128)
    ck, d_conv = _first(k, ("mamba_d_conv", "conv_kernel"), 4)
    groups, d_state, d_conv = k.int(gk, groups), k.int(sk, d_state), k.int(ck, d_conv)
    if heads % groups:
        raise k._err(gk, f"{groups} groups must divide the {heads} Mamba-2 heads")
    cb_key, conv_bias = _first(k, ("mamba_conv_bias", "use_conv_bias"), True)
    pb_key, proj_bias = _first(k, ("mamba_proj_bias", "use_bias"), False)
    k.get("use_conv_bias"), k.get("use_bias")  # a second name of the same flag (Nemotron-H)
    conv_bias, proj_bias = k.flag(cb_key, bool(conv_bias)), k.flag(pb_key, bool(proj_bias))
    norm = k.flag("mamba_rms_norm", False) if falcon else True
    out_bias = k.flag("projectors_bias", False) if falcon else proj_bias
    conv_dim = inner + 2 * groups * d_state
    projected = inner + conv_dim + heads
    params = (
        hidden * projected + (projected if proj_bias else 0)  # in_proj
        + conv_dim * d_conv + (conv_dim if conv_bias else 0)  # conv1d
        + 3 * heads  # dt_bias, A_log, D
        + (inner if norm else 0)  # the gated RMSNorm
        + inner * hidden + (hidden if out_bias else 0)  # out_proj
    )  # fmt: skip
    ssm = heads * head_dim * d_state
    return params, conv_dim * (d_conv - 1) + ssm, ssm if cache_dtype == "float32" else 0


def _ssm_dtype(k: _Keys, default: str | None) -> str | None:
    """The dtype vLLM keeps a recurrent (SSM / delta-rule) state in: the config's
    ``mamba_ssm_cache_dtype`` (Nemotron-H) or ``mamba_ssm_dtype`` (Qwen3.5), else ``default``
    (None: the model's dtype)."""
    key, value = _first(k, ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"), default)
    if value not in (None, "auto", "float32", "bfloat16", "float16"):
        raise k._err(key, f"{value!r:.20}: auto, float32, bfloat16 or float16")
    return value


def _gated_deltanet(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one Gated DeltaNet layer (Qwen3-Next,
    Qwen3.5): the q, k, v and output-gate projections, b and a a value head, the depthwise
    conv1d over q, k and v, dt_bias and A_log a value head, the gated RMSNorm over a head and
    out_proj; its state is the convolution's last kernel-1 inputs and a key x value matrix a
    value head (in float32 where ``mamba_ssm_dtype`` says, as vLLM keeps it)."""
    nv, nk = k.int("linear_num_value_heads"), k.int("linear_num_key_heads")
    dk, dv = k.int("linear_key_head_dim"), k.int("linear_value_head_dim")
    kernel = k.int("linear_conv_kernel_dim", 4)
    if nv % nk:
        raise k._err("linear_num_key_heads", f"{nk} must divide linear_num_value_heads ({nv})")
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    params = (
        hidden * (2 * key_dim + 2 * value_dim)  # q, k, v and z
        + hidden * 2 * nv  # b and a
        + conv_dim * kernel  # conv1d, no bias
        + 2 * nv  # dt_bias, A_log
        + dv  # the gated RMSNorm over one head
        + value_dim * hidden  # out_proj
    )  # fmt: skip
    delta = nv * dk * dv  # Qwen3.5's config asks vLLM for it in float32 (mamba_ssm_dtype)
    return params, conv_dim * (kernel - 1) + delta, delta if _ssm_dtype(k, None) == "float32" else 0


def _lightning(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one MiniMax lightning-attention layer:
    qkv_proj and the output gate (heads x head_dim each), the RMSNorm over them and out_proj;
    its state is a head_dim x head_dim matrix a head (vLLM's linear_attention_state_shape)."""
    heads = k.int("num_attention_heads")
    head_dim = k.int("head_dim") if k.get("head_dim") else hidden // heads
    width = heads * head_dim
    return 3 * hidden * width + hidden * width + width + width * hidden, heads * head_dim**2, 0


def _kda(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one Kimi Delta Attention layer: q, k and v
    projections, their depthwise conv1d, the low-rank forget gate (f_a, f_b, dt_bias, A_log),
    b_proj, the low-rank output gate (g_a, g_b), the gated RMSNorm over a head and o_proj; its
    state is the q/k/v convolution's last kernel-1 inputs and a head_dim x head_dim matrix a
    head (vLLM's kda_state_shape)."""
    heads = _kimi_dim(k, "linear_num_heads", "num_heads", 32)
    dim = _kimi_dim(k, "linear_head_dim", "head_dim", 128)
    kernel = _kimi_dim(k, "linear_conv_kernel_dim", "short_conv_kernel_size", 4)
    width = heads * dim
    params = (
        3 * hidden * width  # q, k, v
        + 3 * width * kernel  # their conv1d, no bias
        + hidden * dim + dim * width + width + heads  # forget gate: f_a, f_b, dt_bias, A_log
        + hidden * heads  # b_proj
        + hidden * dim + dim * width  # output gate: g_a, g_b
        + dim  # the gated RMSNorm over one head
        + width * hidden  # o_proj
    )  # fmt: skip
    return params, 3 * width * (kernel - 1) + heads * dim * dim, 0


def _kimi_dim(k: _Keys, top: str, inner: str, default: int) -> int:
    """A KDA width: transformers' top-level key, else the checkpoint's ``linear_attn_config``."""
    if k.get(top) is not None:
        return k.int(top)
    v = _linear_attn_config(k).get(inner, default)
    high = MAX_DIMS[top]
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= high:
        raise k._err(f"linear_attn_config.{inner}", f"expected a whole number 1..{high:,} "
                     f"(got {v!r:.40})")  # fmt: skip
    return v


def _short_conv(k: _Keys, hidden: int) -> Mixer:
    """The :data:`Mixer` of one LFM2 short-convolution layer: in_proj
    (three gates), the depthwise conv1d of conv_L_cache taps and out_proj; its state is the
    convolution's last conv_L_cache-1 inputs (vLLM's short_conv_state_shape)."""
    taps = k.int("conv_L_cache", 3)
    bias = k.flag("conv_bias", False)
    params = hidden * 3 * hidden + hidden * taps + hidden * hidden + (5 * hidden if bias else 0)
    return params, hidden * (taps - 1), 0


_MIXERS = {"shortconv": _short_conv, "kda": _kda, "mamba": _mamba, "mamba2": _mamba2,
           "gdn": _gated_deltanet, "lightning": _lightning}  # fmt: skip


# Quantization ----------------------------------------------------------------------------------

_INT_METHODS = ("awq", "gptq", "awq_marlin", "gptq_marlin")
_NVFP4 = {"quant_method": "nvfp4", "quant_bytes": (4 + 8 / 16) / 8}
"""NVFP4: 4-bit values and an FP8 scale a block of 16 (the tensor's one FP32 scale aside);
served weight-only here (16-bit matmuls, as on Hopper; Blackwell's FP4 tensor cores would
compute faster, but a decode step is bound by the bytes it reads)."""


def _quantization(k: _Keys, outer: dict[str, Any], is_moe: bool) -> dict[str, Any]:
    """``quant_method``/``quant_bytes``/``quant_experts_only`` of the checkpoint's
    ``quantization_config`` (empty when it has none)."""
    key = "quantization_config"
    q = k.get(key)
    if q is None:
        q = outer.get(key)
    if q is None:
        return {}
    if not isinstance(q, dict):
        raise k._err(key, "expected a mapping")
    qm = q.get("quant_method")
    if qm in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        scale = 0.0
        if isinstance(block, list) and len(block) == 2 and all(_pos_int(b) for b in block):
            scale = 4.0 / (block[0] * block[1])  # one fp32 scale a block
        return {"quant_method": "fp8", "quant_bytes": 1.0 + scale}
    if qm == "mxfp4":  # 4-bit values, one 8-bit scale per 32; gpt-oss quantizes its experts
        return {"quant_method": "mxfp4", "quant_bytes": (4 + 8 / 32) / 8,
                "quant_experts_only": is_moe}  # fmt: skip
    if qm == "modelopt":  # NVIDIA ModelOpt checkpoints: FP8, or NVFP4 (Blackwell's FP4)
        algo = q.get("quant_algo")
        if algo == "FP8":
            return {"quant_method": "fp8", "quant_bytes": 1.0}
        if algo == "NVFP4":
            return _NVFP4
        raise k._err(f"{key}.quant_algo", f"{algo!r:.40} is not sized by Laminar (ModelOpt FP8 "
                     "and NVFP4 are)")  # fmt: skip
    if qm in _INT_METHODS:
        group = q.get("group_size", q.get("q_group_size"))
        return _int_quant(k, q.get("bits", q.get("w_bit")), group)
    if qm == "compressed-tensors":
        return _compressed_tensors(k, q)
    raise k._err(
        f"{key}.quant_method",
        f"{qm!r:.40} is not sized by Laminar (fp8, mxfp4, ModelOpt fp8/nvfp4, awq/gptq "
        "int4/int8 and compressed-tensors fp8/nvfp4/int4/int8 are); remove quantization_config "
        "to size the "
        "unquantized model, with model.rollout_quant for FP8",
    )


def _pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 1 << 20


def _int_quant(k: _Keys, bits: Any, group: Any) -> dict[str, Any]:
    if bits not in (4, 8) or isinstance(bits, bool):
        raise k._err("quantization_config.bits", f"{bits!r:.40}: 4 or 8 bits are sized")
    per_group = 0.0
    if _pos_int(group):  # an fp16 scale and a packed zero point a group (per-channel: ~0)
        per_group = (2 + bits / 8) / group
    return {"quant_method": f"int{bits}", "quant_bytes": bits / 8 + per_group}


def _compressed_tensors(k: _Keys, q: dict[str, Any]) -> dict[str, Any]:
    groups = q.get("config_groups")
    weights = [g.get("weights") for g in groups.values()] if isinstance(groups, dict) else []
    w = weights[0] if weights and all(x == weights[0] for x in weights) else None
    if not isinstance(w, dict):
        raise k._err("quantization_config.config_groups", "expected one weights scheme to size")
    if w.get("type") == "float" and w.get("num_bits") == 8:
        return {"quant_method": "fp8", "quant_bytes": 1.0}
    if w.get("type") == "float" and w.get("num_bits") == 4 and w.get("group_size") == 16:
        return _NVFP4  # compressed-tensors' nvfp4-pack-quantized
    if w.get("type") == "int":
        return _int_quant(k, w.get("num_bits"), w.get("group_size"))
    raise k._err("quantization_config.config_groups", f"weights {w.get('type')!r:.20} "
                 f"{w.get('num_bits')!r:.10}-bit are not sized (fp8, nvfp4, int4, int8 "
                 "are)")  # fmt: skip


# The whole model -------------------------------------------------------------------------------


def from_hf_config(data: dict[str, Any], *, name: str, source: str, where: str = "") -> ModelSpec:
    """The :class:`ModelSpec` of a Hugging Face ``config.json`` mapping (see module doc).

    ``source`` and ``where`` (a key prefix such as ``model.spec.``) go into error messages."""
    if not isinstance(data, dict):
        raise ConfigError(source, where.rstrip("."), "expected a mapping (a config.json object)")
    whole, top = data, where
    data, where, outer, notes = _text_model(data, source, where)
    k = _Keys(data, source, where)
    mtype, fam = _family(k, outer)  # an architecture not sized is named before any value
    _lift_nested(k, mtype)
    check_finite(whole, source, top)
    if not fam.known:
        notes.append("no model_type: sized as a Llama-style decoder (gated MLP, RMSNorm, no "
                     "biases)")  # fmt: skip
    spec = _size(k, mtype, fam, outer, notes)
    _warn(k, source, notes)
    return replace(spec, name=name, notes=tuple(notes))


def _size(k: _Keys, mtype: str, fam: Family, outer: dict, notes: list[str]) -> ModelSpec:
    if fam.blocks:
        return _size_blocks(k, fam, outer, notes)
    hidden, layers, vocab = k.int("hidden_size"), k.int("num_hidden_layers"), k.int("vocab_size")
    heads = k.int("num_attention_heads")
    if k.get("kv_lora_rank"):
        attn, dims = _mla_attention(k, hidden, heads)
    else:
        attn, dims = _gqa_attention(k, fam, hidden, heads)
    index_params, index_dims = _indexer(k, hidden)
    attn += index_params
    kinds = _layer_kinds(k, mtype, fam, layers)
    moe = _moe_layout(k, mtype, fam, layers)
    n_moe = len(moe["moe_idx"])
    dense_mlp = _mlp_params(fam, k, hidden, _dense_inter(k, fam, hidden)) if n_moe < layers else 0
    moe_layer = 0
    if n_moe:
        moe_layer = moe["router"](hidden) + moe["experts"] * moe["expert"](hidden)
        moe_layer += moe["shared"](hidden)
    norm = 2 * hidden if fam.layer_norm else hidden
    norms = fam.norms
    if mtype == "falcon":  # Falcon-40B's two LayerNorms; Falcon-7B's one before parallel attention
        parallel = k.flag("parallel_attn", True) and not k.flag("new_decoder_architecture", False)
        norms = 1 if parallel else 2
    if fam.parallel:  # every layer both: its attention below, its state mixer beside it
        kinds = ["state"] * layers
    n_state = kinds.count("state")
    if n_state == layers and not fam.parallel:
        _no_attention(k)
    if not n_state and fam.mixer == "shortconv":
        k.get("conv_L_cache"), k.get("conv_bias")  # of no convolution layers
    mixer = _MIXERS[fam.mixer](k, hidden) if n_state else (0, 0, 0)
    embed = vocab * hidden + (k.int("n_positions", k.get("max_position_embeddings")) * hidden
                              if fam.positions_key else 0)  # fmt: skip
    head = 0 if _tied(k, fam, outer, notes) else vocab * hidden + (vocab if fam.head_bias else 0)
    total = (
        embed
        + head
        + norm  # final norm
        + (layers if fam.parallel else layers - n_state) * attn
        + n_state * mixer[0]
        + layers * norms * norm
        + (layers - n_moe) * dense_mlp
        + n_moe * moe_layer
    )
    windowed = kinds.count("sliding")
    return _spec(
        k, outer, (n_state, mixer),
        layers=layers,
        hidden=hidden,
        vocab=vocab,
        q_heads=heads,
        total_params=total,
        embedding_params=embed,
        head_params=head,
        experts=moe["experts"],
        experts_per_token=moe["per_token"],
        moe_layers=n_moe,
        expert_params=moe["expert"](hidden) if moe["experts"] else 0,
        window_layers=windowed,
        window=_window(k) if windowed else 0,
        state_beside_attention=fam.parallel,
        **index_dims,
        **dims,
    )  # fmt: skip


def _spec(k: _Keys, outer: dict, state: tuple[int, Mixer], **fields: Any) -> ModelSpec:
    """The :class:`ModelSpec` of ``fields``, with ``state``'s (state layers, one layer's
    :data:`Mixer`) state and the checkpoint's quantization."""
    layers, (_, elements, f32) = state
    return ModelSpec(
        name="",
        source=k.source,
        state_layers=layers,
        state_elements=layers * elements,
        state_f32_elements=layers * f32,
        **_quantization(k, outer, fields["experts"] > 0),
        **fields,
    )


_BLOCKS = {"M": "state", "*": "full", "-": "mlp", "E": "moe"}
_BLOCK_NAMES = {"linear_attention": "state", "mamba": "state", "full_attention": "full",
                "attention": "full", "mlp": "mlp", "moe": "moe"}  # fmt: skip


def _no_attention(k: _Keys) -> None:
    key = next((n for n in ("hybrid_override_pattern", "layers_block_type", "layer_types",
                            "attn_layer_indices", "attn_type_list") if k.get(n) is not None),
               "model_type")  # fmt: skip
    raise k._err(key, "no attention layer: a model of state-space / linear-attention layers only "
                 "is not sized by Laminar (its hybrids with attention layers are)")  # fmt: skip


def _block_kinds(k: _Keys) -> list[str]:
    """Nemotron-H's blocks: ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP, E MoE),
    else ``layers_block_type``/``layer_types``; ``num_hidden_layers``, where given, agrees."""
    pattern = k.get("hybrid_override_pattern")
    if pattern is not None:
        key = "hybrid_override_pattern"
        if not isinstance(pattern, str) or not pattern or set(pattern) - set(_BLOCKS):
            raise k._err(key, "expected a string of M (Mamba-2), * (attention), - (MLP) and E "
                         "(MoE), one a block")  # fmt: skip
        kinds = [_BLOCKS[c] for c in pattern]
    else:
        key = "layers_block_type" if k.get("layers_block_type") is not None else "layer_types"
        types = k.get(key)
        if not isinstance(types, list) or not types or any(
                not isinstance(t, str) or t not in _BLOCK_NAMES for t in types):  # fmt: skip
            raise k._err(key, "expected a list of linear_attention, full_attention, mlp and moe "
                         "blocks (or hybrid_override_pattern)")  # fmt: skip
        kinds = [_BLOCK_NAMES[t] for t in types]
    if len(kinds) > MAX_DIMS["num_hidden_layers"]:
        raise k._err(key, f"more than {MAX_DIMS['num_hidden_layers']:,} blocks")
    if k.get("num_hidden_layers") is not None and k.int("num_hidden_layers") != len(kinds):
        raise k._err("num_hidden_layers", f"{k.int('num_hidden_layers')} disagrees with the "
                     f"{len(kinds)} blocks of {key}")  # fmt: skip
    return kinds


def _size_blocks(k: _Keys, fam: Family, outer: dict, notes: list[str]) -> ModelSpec:
    """A model whose every layer is one block (Nemotron-H): Mamba-2 and attention blocks are its
    token-mixing layers (``ModelSpec.layers``; the Mamba-2 ones its state layers), MLP and MoE
    blocks add their parameters; one RMSNorm a block."""
    hidden, vocab = k.int("hidden_size"), k.int("vocab_size")
    kinds = _block_kinds(k)
    if k.get("sliding_window"):
        raise k._err("sliding_window", "sliding-window attention blocks are not sized by Laminar")
    if k.get("head_dim") is None and k.get("attention_head_dim") is not None:
        k.alias["head_dim"] = "attention_head_dim"  # Nemotron-H's earlier name
    n = {kind: kinds.count(kind) for kind in ("state", "full", "mlp", "moe")}
    if not n["full"]:
        _no_attention(k)
    attn, dims = (0, dict(kv_heads=1, qk_head_dim=1, v_head_dim=1, kv_lora_rank=0,
                          qk_rope_head_dim=0))  # fmt: skip
    heads = 1
    if n["full"]:
        heads = k.int("num_attention_heads")
        attn, dims = _gqa_attention(k, fam, hidden, heads)
    mixer = _mamba2(k, hidden) if n["state"] else (0, 0, 0)
    bias = k.flag("mlp_bias", False)
    mlp = 0
    k.get("intermediate_size")  # the MLP blocks' width (none without them)
    if n["mlp"]:
        inter = k.int("intermediate_size")
        mlp = 2 * hidden * inter + (inter + hidden if bias else 0)
    experts = per_token = expert = moe = 0
    if n["moe"]:
        _, experts = _first(k, ("n_routed_experts", "num_local_experts", "num_experts"), None)
        experts = k.int("n_routed_experts", experts)
        per_token = k.int("num_experts_per_tok")
        if per_token > experts:
            raise k._err("num_experts_per_tok", f"{per_token} exceeds the {experts} experts")
        inter = k.int("moe_intermediate_size")
        latent = k.opt_int("moe_latent_size")
        width = latent or hidden
        expert = 2 * width * inter
        shared = k.opt_int("moe_shared_expert_intermediate_size", low=0)
        moe = (experts * hidden  # the router
               + experts * expert
               + 2 * hidden * shared + ((shared + hidden) if bias and shared else 0)
               + (2 * hidden * latent + ((latent + hidden) if bias else 0) if latent else 0))
        k.get("n_shared_experts")  # one shared MLP of moe_shared_expert_intermediate_size
    embed = vocab * hidden
    head = 0 if _tied(k, fam, outer, notes) else vocab * hidden
    total = (embed + head + hidden * (1 + len(kinds)) + n["full"] * attn
             + n["state"] * mixer[0] + n["mlp"] * mlp + n["moe"] * moe)  # fmt: skip
    return _spec(
        k, outer, (n["state"], mixer),
        layers=n["state"] + n["full"],
        hidden=hidden,
        vocab=vocab,
        q_heads=heads,
        total_params=total,
        embedding_params=embed,
        head_params=head,
        experts=experts,
        experts_per_token=per_token,
        moe_layers=n["moe"],
        expert_params=expert,
        **dims,
    )  # fmt: skip


def _warn(k: _Keys, source: str, notes: list[str]) -> None:
    """One warning with what the sizing left out (a vision tower, an assumed default) and the
    keys nothing read."""
    ignored = sorted(
        key for key in k.data
        if key not in k.used and key not in HARMLESS and key not in WRAPPERS
        and k.data[key] is not None and not key.startswith(("_", "output_", "use_"))
    )  # fmt: skip
    said = list(notes)
    if ignored:
        more = f" and {len(ignored) - 12} more" if len(ignored) > 12 else ""
        said.append(f"{k.where}keys Laminar does not read (a size they change is not counted): "
                    f"{', '.join(ignored[:12])}{more}")  # fmt: skip
    if said:
        warnings.warn(LaminarWarning(f"{source}: " + "; ".join(said)), stacklevel=3)
