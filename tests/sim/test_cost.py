"""The cost model: named coefficients with units and sources, derived or read from JSON."""

from __future__ import annotations

import json

import pytest

from laminar.errors import ConfigError
from laminar.sim.cost import COEFFICIENT_UNITS, OPTIONAL_UNITS, load_cost_file
from laminar.sim.costdata import derive, hardware_names, model_names

# DESIGN.md's table: KV bytes per token in bf16 = 2 x layers x kv_heads x head_dim x 2.
KV_BYTES = {"qwen2.5-7b": 57_344, "qwen2.5-32b": 262_144, "qwen2.5-72b": 327_680}


@pytest.mark.parametrize("model, tp", [("qwen2.5-7b", 1), ("qwen2.5-32b", 2), ("qwen2.5-72b", 4)])
def test_presets_derive_every_coefficient_with_unit_and_source(model, tp):
    m = derive("h800", model, tp=tp)
    assert set(m.coefficients) == set(COEFFICIENT_UNITS) | set(OPTIONAL_UNITS)
    for name, c in m.coefficients.items():
        assert c.unit == COEFFICIENT_UNITS.get(name) or c.unit == OPTIONAL_UNITS[name][0]
        assert len(c.source) > 10, name
    # Decode reads the weights once per step and the KV of every cached token.
    assert m.decode_step_s(1, 0) >= m.weight_bytes / tp / 3.35e12
    per_token = m.decode_step_s(1, 1001) - m.decode_step_s(1, 1)
    assert per_token == pytest.approx(1000 * m.decode_per_kv_token_s)
    assert m.decode_per_kv_token_s * 3.35e12 >= KV_BYTES[model] / tp
    # The KV cache is what the memory leaves after the weights.
    assert 0 < m.kv_capacity_tokens * KV_BYTES[model] < tp * 0.9 * 85.6e9 - m.weight_bytes


def test_bigger_models_cost_more_per_token():
    small = derive("h800", "qwen2.5-7b", tp=1)
    big = derive("h800", "qwen2.5-72b", tp=1 * 8)
    assert big.train_s([4096] * 64, 8) > 5 * small.train_s([4096] * 64, 8)
    sync = small.train_sync_s(8)
    assert small.train_s([8192], 8) - sync > 2 * (small.train_s([4096], 8) - sync)  # attention
    assert small.train_s([4096], 8, old_logprob=False) < small.train_s([4096], 8)
    assert small.prefill_s([]) == 0.0
    assert small.prefill_s([100, 100]) < small.prefill_s([200, 200])


def test_links():
    m = derive("h800", "qwen2.5-7b", tp=1)
    gb = 1e9
    assert m.transfer_s(gb, "nvlink") < m.transfer_s(gb, "pcie")
    assert m.transfer_s(0, "rdma") == m.rdma_startup_s
    with pytest.raises(ValueError, match="unknown link"):
        m.transfer_s(gb, "carrier-pigeon")


def test_json_round_trip(tmp_path):
    m = derive("h800", "qwen2.5-32b", tp=2)
    path = tmp_path / "c.json"
    path.write_text(m.to_json())
    back = load_cost_file(path)
    assert back.coefficients == m.coefficients
    assert back.decode_step_s(7, 12345) == m.decode_step_s(7, 12345)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda d: d["coefficients"].pop("decode_base_s"), "coefficients.decode_base_s"),
        (lambda d: d["coefficients"]["pcie_bytes_per_s"].update(value=0), "out of range"),
        (lambda d: d["coefficients"]["decode_base_s"].update(value="x"), "expected a number"),
        (lambda d: d["coefficients"]["decode_base_s"].update(unit="ms"), "unit must be 's'"),
        (lambda d: d["coefficients"].update(warp_factor={"value": 9}), "unknown coefficient"),
    ],
)
def test_bad_cost_files_name_file_and_coefficient(tmp_path, change, match):
    data = json.loads(derive("h800", "qwen2.5-7b", tp=1).to_json())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match) as e:
        load_cost_file(path)
    assert str(path) in str(e.value)


def test_unknown_presets_and_unreadable_files(tmp_path):
    assert "h800" in hardware_names() and "qwen2.5-72b" in model_names()
    with pytest.raises(ConfigError, match=r"cluster\.hardware"):
        derive("tpu-v9", "qwen2.5-7b", tp=1)
    with pytest.raises(ConfigError, match=r"model\.name"):
        derive("h800", "gpt-17", tp=1)
    with pytest.raises(ConfigError, match="no room"):
        derive("h800", "qwen2.5-72b", tp=1)
    with pytest.raises(ConfigError, match="cannot read"):
        load_cost_file(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_cost_file(tmp_path / "x.json")
