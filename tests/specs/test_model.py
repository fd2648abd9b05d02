"""Model facts derived from config.json: parameter counts against the model cards, KV bytes."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from laminar.errors import ConfigError
from laminar.specs.model import (
    catalog_entry,
    catalog_names,
    catalog_spec,
    from_hf_config,
    read_hf_config,
)

CATALOG = ["qwen2.5-7b", "qwen2.5-32b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b",
           "qwen3-30b-a3b", "qwen3-next-80b-a3b", "llama-3.1-8b", "llama-3.1-70b",
           "deepseek-v3"]  # fmt: skip


def _config(name: str) -> dict:
    text = (resources.files("laminar") / "data" / "models" / f"{name}.json").read_text()
    return json.loads(text)


def test_catalog_lists_every_model():
    assert sorted(CATALOG) == catalog_names()


@pytest.mark.parametrize("name", CATALOG)
def test_total_params_within_one_percent_of_the_model_card(name):
    card = catalog_entry(name)["card"]
    spec = catalog_spec(name)
    assert spec.total_params == pytest.approx(card["total_params"], rel=0.01)


def test_moe_active_params_match_the_cards():
    q = catalog_spec("qwen3-30b-a3b")
    # Card: "30.5B in total and 3.3B activated"; the derived 3.353B (embeddings included, as
    # Qwen counts) truncates to the card's one decimal.
    assert q.total_params == pytest.approx(30.5e9, rel=0.01)
    assert 3.3e9 <= q.active_params < 3.4e9
    d = catalog_spec("deepseek-v3")
    # Card: 671B total, 37B activated; README_WEIGHTS.md: 36.6B activated including the 0.9B
    # output head, i.e. without the input embedding (a lookup).
    assert d.total_params == pytest.approx(671e9, rel=0.01)
    assert d.active_params - d.embedding_params == pytest.approx(36.6e9, rel=0.01)
    assert round((d.active_params - d.embedding_params) / 1e9) == 37
    assert d.head_params == pytest.approx(0.9e9, rel=0.05)


@pytest.mark.parametrize("name", CATALOG)
def test_kv_bytes_per_token_is_exact(name):
    c = _config(name)
    layers = c["num_hidden_layers"]
    if "full_attention_interval" in c:  # Gated DeltaNet hybrid: every interval-th layer attends
        layers //= c["full_attention_interval"]
    if "kv_lora_rank" in c:  # MLA: the compressed latent plus the shared RoPE key
        expected = layers * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    else:  # GQA: K and V of every KV head
        head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        expected = 2 * layers * c["num_key_value_heads"] * head_dim * 2
    assert catalog_spec(name).kv_bytes_per_token(2) == expected
    assert catalog_spec(name).kv_bytes_per_token(4) == 2 * expected


def test_attention_width_is_heads_times_head_dim_not_hidden():
    q3 = catalog_spec("qwen3-32b")  # 64 heads x 128 = 8192, hidden 5120
    assert q3.attention_width == 64 * 128 != q3.hidden
    ds = catalog_spec("deepseek-v3")
    assert ds.attention_width == 128 * (128 + 64)
    assert ds.attn_flop_per_token_sq == 61 * 128 * (192 + 128)


def test_kv_split_by_tp_only_as_far_as_kv_heads_allow():
    q = catalog_spec("qwen2.5-7b")  # 4 KV heads
    assert [q.kv_shards(tp) for tp in (1, 2, 4, 8)] == [1, 2, 4, 4]
    assert catalog_spec("deepseek-v3").kv_shards(8) == 1  # MLA's latent is not split


def test_experts_touched_grow_with_batch_and_saturate():
    m = catalog_spec("qwen3-30b-a3b")
    e, k = m.experts, m.experts_per_token
    touched = [m.experts_touched(b) for b in (1, 2, 8, 64, 1024)]
    assert touched[0] == pytest.approx(k)
    assert touched == sorted(touched) and touched[-1] <= e
    assert touched[-1] == pytest.approx(e, rel=1e-3)
    assert m.experts_touched(16) == pytest.approx(e * (1 - (1 - k / e) ** 16))
    assert catalog_spec("llama-3.1-8b").experts_touched(64) == 0


def test_moe_layout_of_deepseek():
    d = catalog_spec("deepseek-v3")
    assert d.moe_layers == 61 - 3  # first_k_dense_replace dense layers
    assert d.expert_params == 3 * 7168 * 2048
    assert d.routed_params == 58 * 256 * 3 * 7168 * 2048


def test_hf_config_file_and_inline_spec_agree(tmp_path):
    path = tmp_path / "my-model" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_config("qwen3-8b")))
    from_file = read_hf_config(path)
    inline = from_hf_config(_config("qwen3-8b"), name="x", source="config")
    assert from_file.name == "my-model"
    assert from_file.total_params == inline.total_params == catalog_spec("qwen3-8b").total_params


def test_bad_configs_name_the_key(tmp_path):
    bad = dict(_config("qwen2.5-7b"), num_key_value_heads=5)
    with pytest.raises(ConfigError, match=r"model\.spec\.num_key_value_heads"):
        from_hf_config(bad, name="x", source="config", where="model.spec.")
    missing = {k: v for k, v in _config("qwen2.5-7b").items() if k != "hidden_size"}
    with pytest.raises(ConfigError, match="hidden_size"):
        from_hf_config(missing, name="x", source="config")
    with pytest.raises(ConfigError, match="cannot read"):
        read_hf_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_hf_config(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="unknown model"):
        catalog_spec("gpt-17")
