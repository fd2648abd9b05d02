"""Every causal-LM architecture the installed transformers knows, as its default config (the
keys ``save_pretrained`` writes), is sized within 3% of the parameters its modeling code builds
on the meta device, or refused naming the model_type or the key (issue 30, item 1).

The exact count is transformers' own (``AutoModelForCausalLM.from_config`` on the meta device:
no memory, nothing downloaded), so no figure here is written by hand; vision and audio towers,
which Laminar does not size and says so, are left out of it by module name.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import pytest

from laminar.errors import ConfigError, LaminarWarning
from laminar.specs.hfconfig import FAMILIES, from_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # noqa: E402

TYPES = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
TOWERS = re.compile(r"vision|visual|audio|multi_modal_projector|vqmodel|image|mm_proj|speech")

# Defaults transformers itself cannot build a model from (a null a real config.json fills in),
# and layouts the defaults leave untested.
PATCH = {
    "dots1": dict(n_routed_experts=128, n_shared_experts=2, num_experts_per_tok=6),
    "deepseek_v2": dict(num_experts_per_tok=6),
    "nemotron": dict(num_key_value_heads=8),
    # DBRX's attention reads attn_config.rope_theta, which the default leaves out (DBRX's own
    # config.json states it); 4 KV heads of 16 for a GQA layout
    "dbrx": dict(attn_config={"kv_n_heads": 4, "rope_theta": 10000.0}),
    "hunyuan_v1_dense": dict(head_dim=128),
    "ministral": dict(head_dim=128),
    "glm4_moe": dict(head_dim=128),  # GLM-4.5's config.json states it (hidden 5120, 96 heads)
    # a shared expert, which the defaults leave out (0)
    "granitemoeshared": dict(shared_intermediate_size=1024),
    "granitemoe_swa": dict(shared_intermediate_size=1024),
    # Maverick's layout: MoE every other layer, the rest dense of intermediate_size_mlp
    "llama4_text": dict(interleave_moe_layer_step=2, num_local_experts=128),
    # LFM2's layout: short convolutions, attention on a few layers
    "lfm2": dict(num_hidden_layers=6, full_attn_idxs=[2, 5]),
    "lfm2_moe": dict(num_hidden_layers=6, num_dense_layers=1,
                     layer_types=["conv", "conv", "full_attention"] * 2),  # none by default
    # dense prefix layers of their own width before the experts
    "cohere2_moe": dict(first_k_dense_replace=2, prefix_dense_intermediate_size=4096),
    # hybrids whose defaults have no attention layer (or no MoE): the layouts real ones have
    "bamba": dict(num_hidden_layers=8, attn_layer_indices=[3, 7]),
    "granitemoehybrid": dict(num_hidden_layers=8,
                             layer_types=["mamba"] * 3 + ["attention"] + ["mamba"] * 3
                             + ["attention"]),
    "nemotron_h": dict(layers_block_type=["linear_attention", "moe", "linear_attention", "mlp",
                                          "full_attention", "moe", "linear_attention", "moe"],
                       moe_latent_size=512),  # Nemotron 3 Super's latent experts
}


def _config(mt: str):
    try:
        return AutoConfig.for_model(mt, **PATCH.get(mt, {}))
    except Exception as e:  # e.g. musicgen: a composite config with required sub-configs
        pytest.skip(f"{mt}: transformers builds no default config ({type(e).__name__})")


def _exact(cfg) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for n, p in model.named_parameters() if not TOWERS.search(n))


@pytest.mark.parametrize("mt", TYPES)
def test_sized_within_3_percent_or_refused_by_name(mt):
    cfg = _config(mt)
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LaminarWarning)
            spec = from_hf_config(data, name=mt, source=f"{mt}/config.json")
    except ConfigError as e:
        assert mt not in FAMILIES, f"{mt} is a family Laminar sizes, but: {e}"
        assert str(e).startswith(f"{mt}/config.json: "), e
        named = str(e).split(": ", 2)[1]
        assert named and " " not in named, f"the refusal names no key: {e}"
        return
    exact = _exact(cfg)
    assert spec.total_params == pytest.approx(exact, rel=0.03), (mt, spec.total_params, exact)


def test_an_architecture_not_sized_is_refused_before_its_values():
    # Mamba-2 hybrids hold an infinite time_step_limit (unread by Laminar): the refusal names
    # the architecture, not the number.
    data = dict(AutoConfig.for_model("mamba2").to_diff_dict(), time_step_limit=[0.0, float("inf")])
    with pytest.raises(ConfigError, match=r"model_type: 'mamba2' has Mamba-2 state-space"):
        from_hf_config(data, name="m", source="m.json")


KV_TYPES = sorted(t for t in FAMILIES if t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


@pytest.mark.parametrize("mt", KV_TYPES)
def test_kv_cache_per_sequence_is_the_cache_transformers_fills(mt):
    """The KV elements of one sequence of T tokens (past every sliding window the default
    config has) against the cache a meta-device forward of T tokens leaves; MLA (transformers
    caches decompressed heads, vLLM the latent) and state-space layers are not comparable."""
    cfg = _config(mt)
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaminarWarning)
        spec = from_hf_config(data, name=mt, source=mt)
    if spec.is_mla or spec.state_layers:
        pytest.skip(f"{mt}: MLA or state-space layers")
    text = cfg.get_text_config()
    limit = getattr(text, "max_position_embeddings", None) or getattr(text, "n_positions", None)
    tokens = min(2 * spec.window + 8 if spec.window else 1024, limit or 1 << 30)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    try:
        with torch.no_grad():
            out = model(input_ids=torch.zeros((1, tokens), dtype=torch.long), use_cache=True)
        cache = out.past_key_values
    except Exception as e:  # a kernel with no meta implementation: not ours
        pytest.skip(f"{mt}: no meta-device forward ({type(e).__name__})")
    filled = sum(t.shape[1] * t.shape[2] * t.shape[3]
                 for layer in cache.layers for t in (layer.keys, layer.values))  # fmt: skip
    # transformers keeps window - 1 past tokens in a sliding layer, vLLM (and Laminar) the window
    # (at least 128 tokens here): within 1%
    assert spec.kv_bytes_per_token(1, tokens) * tokens == pytest.approx(filled, rel=0.01)


@pytest.mark.parametrize("mt", ["deepseek_v32", "glm_moe_dsa"])
def test_sparse_attention_indexer_is_sized_cached_and_costed(mt):
    """DeepSeek sparse attention (DSA): the indexer's weights are counted (as transformers builds
    them, with or without transformers 5's layer_types / mlp_layer_types, which the published
    DeepSeek-V3.2 config.json predates); its FP8 keys join every token's cached latent; a decode
    step past the top k reads k latents and every indexer key; attention FLOPs are the top k's
    plus the indexer's quadratic scoring."""
    cfg = _config(mt)
    exact = _exact(cfg)
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    older = {k: v for k, v in data.items() if k not in ("layer_types", "mlp_layer_types")}
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaminarWarning)  # nothing left unread
        spec = from_hf_config(data, name=mt, source=mt)
        assert from_hf_config(older, name=mt, source=mt).total_params == spec.total_params
    assert spec.total_params == exact
    plain = from_hf_config({k: v for k, v in older.items() if not k.startswith("index_")},
                           name=mt, source=mt)  # fmt: skip
    layers, k, d, h = spec.layers, spec.index_topk, spec.index_head_dim, spec.index_n_heads
    assert (k, d) == (2048, 128) and spec.total_params > plain.total_params
    assert spec.kv_bytes_per_token(2) == plain.kv_bytes_per_token(2) + layers * (d + 4)
    n = 8 * k  # the latents a step reads fall to k / n, the indexer keys do not
    latent = plain.kv_bytes_per_token(2)
    assert spec.kv_read_bytes_per_token(2, n) == pytest.approx(latent / 8 + layers * (d + 4))
    assert spec.kv_read_bytes_per_token(2, k // 2) == spec.kv_bytes_per_token(2)
    full = plain.attn_flop_sq(n)
    assert spec.attn_flop_sq(n) == pytest.approx(full * (2 * k * n - k * k) / n**2 + layers * h * d)
    assert spec.attn_flop_sq(k) == pytest.approx(full + layers * h * d)
    with pytest.raises(ConfigError, match=r"indexer_types: .*shared"):
        from_hf_config(dict(data, indexer_types=["shared"] * layers), name=mt, source=mt)
    with pytest.raises(ConfigError, match=r"layer_types: indexed_attention layers need"):
        from_hf_config({k: v for k, v in data.items() if k != "index_topk"}, name=mt, source=mt)


@pytest.mark.parametrize("mt, patch", [("glm4v", {}), ("glm46v", {}),
                                       ("glm4v_moe", {"head_dim": 128})])  # fmt: skip
def test_a_multimodal_config_sizes_its_language_model(mt, patch):
    """The language model (and its head) of a vision-language config, against transformers'."""
    from transformers import AutoModelForImageTextToText

    cfg = _config(mt)
    for key, value in patch.items():
        setattr(cfg.get_text_config(), key, value)
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(cfg)
    exact = sum(p.numel() for p in model.model.language_model.parameters())
    if model.get_output_embeddings().weight is not model.get_input_embeddings().weight:
        exact += model.get_output_embeddings().weight.numel()
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    with pytest.warns(LaminarWarning, match="vision tower"):
        spec = from_hf_config(data, name=mt, source=mt)
    assert spec.total_params == exact


STATE_TYPES = ["bamba", "falcon_h1", "granitemoehybrid", "jamba", "kimi_linear", "lfm2",
               "lfm2_moe", "minimax", "nemotron_h", "qwen3_5", "qwen3_5_moe", "qwen3_next"]


@pytest.mark.parametrize("mt", STATE_TYPES)
def test_state_per_sequence_is_the_state_vllm_allocates(mt):
    """A linear/state-space layer's state a sequence against vLLM's own shapes
    (``MambaStateShapeCalculator``: the convolution's last kernel-1 inputs and the SSM or
    delta-rule state), over every state layer, at TP 1 and TP 2 on one GPU; the KV test above
    skips these models (a meta-device cache of state layers is not vLLM's)."""
    mamba_utils = pytest.importorskip("vllm.model_executor.layers.mamba.mamba_utils")
    calc = mamba_utils.MambaStateShapeCalculator
    cfg = _config(mt)
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaminarWarning)
        spec = from_hf_config(data, name=mt, source=mt)
    t = cfg.get_text_config()
    for tp in (1, 2):
        if t.model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
            shapes = calc.gated_delta_net_state_shape(
                tp, t.linear_num_key_heads, t.linear_num_value_heads, t.linear_key_head_dim,
                t.linear_value_head_dim, t.linear_conv_kernel_dim)  # fmt: skip
        elif t.model_type in ("lfm2", "lfm2_moe"):
            shapes = calc.short_conv_state_shape(tp, t.hidden_size, t.conv_L_cache)
        elif t.model_type == "kimi_linear":
            shapes = calc.kda_state_shape(tp, t.linear_num_heads, t.linear_head_dim,
                                          conv_kernel_size=t.linear_conv_kernel_dim)
        elif t.model_type == "minimax":
            dim = t.head_dim or t.hidden_size // t.num_attention_heads
            shapes = calc.linear_attention_state_shape(t.num_attention_heads, tp, dim)
        elif t.model_type == "jamba":
            shapes = calc.mamba1_state_shape(tp, t.mamba_expand * t.hidden_size, t.mamba_d_state,
                                             t.mamba_d_conv)  # fmt: skip
        elif t.model_type == "nemotron_h":
            shapes = calc.mamba2_state_shape(
                tp, t.mamba_num_heads * t.mamba_head_dim, t.n_groups, t.mamba_num_heads,
                t.mamba_head_dim, t.ssm_state_size, t.conv_kernel)  # fmt: skip
        elif t.model_type == "falcon_h1":
            shapes = calc.mamba2_state_shape(
                tp, t.mamba_d_ssm or t.mamba_expand * t.hidden_size, t.mamba_n_groups,
                t.mamba_n_heads, t.mamba_d_head, t.mamba_d_state, t.mamba_d_conv)  # fmt: skip
        else:
            shapes = calc.mamba2_state_shape(
                tp, t.mamba_expand * t.hidden_size, t.mamba_n_groups, t.mamba_n_heads,
                t.mamba_d_head, t.mamba_d_state, t.mamba_d_conv)  # fmt: skip
        per_layer = sum(math.prod(s) for s in shapes)
        assert spec.state_layers > 0
        # one byte an element, no float32 part: elements (the state split over tp on a GPU)
        plain = dataclasses.replace(spec, state_f32_elements=0)
        on_gpu = plain.kv_bytes_per_token_per_gpu(1, 1, tp) - (
            plain.kv_bytes_per_token(1, 1) - plain.state_bytes_per_sequence(1)
        ) / plain.kv_shards(tp)  # fmt: skip
        # at TP 2 vLLM repeats a Mamba-2 B/C group a shard lacks (n_groups 1): within 1%
        exact = spec.state_layers * per_layer
        assert on_gpu == pytest.approx(exact, rel=1e-9 if tp == 1 else 0.01), (mt, tp)


def test_a_parallel_hybrid_holds_a_kv_cache_and_a_state_in_every_layer():
    """Falcon-H1 runs attention and a Mamba-2 mixer side by side in each layer: its KV cache
    is every layer's (the cache transformers fills), and every layer holds a state."""
    cfg = _config("falcon_h1")
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaminarWarning)
        spec = from_hf_config(data, name="f", source="f")
    layers = cfg.num_hidden_layers
    assert spec.attention_layers == spec.state_layers == layers
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    assert spec.kv_bytes_per_token(1) == layers * 2 * cfg.num_key_value_heads * head_dim
    assert spec.total_params == _exact(cfg)


def test_kimi_linear_reads_its_checkpoints_linear_attn_config():
    """Kimi Linear's checkpoint names its KDA and MLA layers 1-indexed in linear_attn_config
    (transformers turns them into layer_types): both forms size the same model."""
    cfg = _config("kimi_linear")
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    types = data.pop("layer_types")
    for key in ("linear_head_dim", "linear_num_heads", "linear_conv_kernel_dim"):
        data.pop(key, None)
    data["linear_attn_config"] = {
        "head_dim": cfg.linear_head_dim, "num_heads": cfg.linear_num_heads,
        "short_conv_kernel_size": cfg.linear_conv_kernel_dim,
        "full_attn_layers": [i + 1 for i, t in enumerate(types) if t == "full_attention"],
        "kda_layers": [i + 1 for i, t in enumerate(types) if t != "full_attention"],
    }  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", LaminarWarning)  # every key read
        spec = from_hf_config(data, name="k", source="k")
    assert spec.total_params == _exact(cfg)
    assert spec.attention_layers == types.count("full_attention") and spec.is_mla
    bad = dict(data, linear_attn_config=dict(data["linear_attn_config"], kda_layers=[0]))
    with pytest.raises(ConfigError, match=r"linear_attn_config\.kda_layers: expected a list"):
        from_hf_config(bad, name="k", source="k")
    short = dict(data, linear_attn_config=dict(data["linear_attn_config"], kda_layers=[1]))
    with pytest.raises(ConfigError, match=r"linear_attn_config: layer \d+ is in neither"):
        from_hf_config(short, name="k", source="k")


@pytest.mark.parametrize("mt", STATE_TYPES)
def test_a_hybrids_kv_cache_is_its_attention_layers_cache(mt):
    """A hybrid's KV bytes a sequence less its state are the keys and values transformers
    caches for its attention layers (a meta-device forward of 64 tokens; the state layers'
    caches are the state test's)."""
    cfg = _config(mt)
    data = json.loads(json.dumps(cfg.to_diff_dict(), default=str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LaminarWarning)
        spec = from_hf_config(data, name=mt, source=mt)
    tokens = 64
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    try:
        with torch.no_grad():
            out = model(input_ids=torch.zeros((1, tokens), dtype=torch.long), use_cache=True)
    except Exception as e:  # a kernel with no meta implementation: not ours
        pytest.skip(f"{mt}: no meta-device forward ({type(e).__name__})")
    filled = sum(t.shape[1] * t.shape[2] * t.shape[3]
                 for layer in out.past_key_values.layers
                 if isinstance(getattr(layer, "keys", None), torch.Tensor) and layer.keys.dim() == 4
                 for t in (layer.keys, layer.values))  # fmt: skip
    kv = spec.kv_bytes_per_token(1, tokens) * tokens - spec.state_bytes_per_sequence(1)
    assert filled > 0 and kv == pytest.approx(filled, rel=1e-9)
