"""model.rollout_eager: an engine without CUDA graphs takes at least a host-launch floor a step."""

from __future__ import annotations

import json

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.sim.cost import load_cost_file
from laminar.sim.costdata import cost_model_for
from laminar.specs.hardware import catalog_hardware
from laminar.specs.model import catalog_spec

from .conftest import small_config


def _cost(*overrides):
    return cost_model_for(load_config(overrides=list(overrides)))


def test_graphs_have_no_floor_and_eager_floors_every_layer():
    graph = _cost("model.name=qwen3-30b-a3b", "cluster.hardware=h20", "model.rollout_tp=4")
    eager = _cost(
        "model.name=qwen3-30b-a3b", "cluster.hardware=h20", "model.rollout_tp=4",
        "model.rollout_eager=true",
    )  # fmt: skip
    assert graph.decode_min_step_s == 0.0
    floor = catalog_spec("qwen3-30b-a3b").layers * catalog_hardware("h20")["decode_layer_eager_s"]
    assert eager.decode_min_step_s == pytest.approx(floor)
    assert "decode_layer_eager_s" in eager.coefficients["decode_min_step_s"].source
    # A small batch's step reads less than the host takes to launch it: the floor binds.
    assert graph.decode_fixed_s(1) < floor
    assert eager.decode_fixed_s(1) == pytest.approx(floor)
    # Every other coefficient is the graph engine's.
    for name, c in graph.coefficients.items():
        if name != "decode_min_step_s":
            assert eager.coefficients[name].value == c.value, name
    # The KV read stays on top of the floor, linear as the event model needs.
    kv = eager.decode_step_s(1, 10_000) - eager.decode_step_s(1, 0)
    assert kv == pytest.approx(10_000 * eager.decode_per_kv_token_s)


def test_a_batch_whose_gpu_time_exceeds_the_floor_is_not_charged_it():
    eager = _cost("model.rollout_eager=true", "cluster.hardware=h800")
    graph = _cost("cluster.hardware=h800")
    big = 65536  # the matmuls of this many sequences outlast any launch floor
    assert graph.decode_fixed_s(big) > eager.decode_min_step_s
    assert eager.decode_fixed_s(big) == graph.decode_fixed_s(big)
    # Monotone in the batch: never cheaper to decode more.
    steps = [eager.decode_fixed_s(b) for b in (1, 2, 8, 64, 512, 4096, big)]
    assert steps == sorted(steps)


def test_eager_generation_is_slower_and_event_skipping_still_exact():
    graph = simulate(small_config()).summary.iloc[0]
    fast = simulate(small_config("model.rollout_eager=true"))
    ref = simulate(small_config("model.rollout_eager=true", "sim.decode=reference"))
    a, b = fast.summary.iloc[0], ref.summary.iloc[0]
    assert a["gen_tokens_per_s"] < 0.9 * graph["gen_tokens_per_s"]
    for col in ("train_tokens_per_s", "gen_tokens_per_s", "sim_time_s"):
        assert a[col] == pytest.approx(b[col], rel=0.005), col
    assert a["decoded_tokens"] == b["decoded_tokens"]


def test_cost_file_carries_the_floor_and_older_files_mean_none(tmp_path):
    eager = _cost("model.rollout_eager=true")
    path = tmp_path / "eager.json"
    path.write_text(eager.to_json())
    back = load_cost_file(path)
    assert back.decode_min_step_s == eager.decode_min_step_s > 0
    assert back.decode_fixed_s(1) == eager.decode_fixed_s(1)
    data = json.loads(path.read_text())
    del data["coefficients"]["decode_min_step_s"]  # a file written before the floor existed
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert load_cost_file(old).decode_min_step_s == 0.0
    data["coefficients"]["decode_min_step_s"] = {"value": -1.0, "unit": "s", "source": "x"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_cost_file(bad)
    assert "decode_min_step_s" in str(e.value) and "bad.json" in str(e.value)


def test_the_runtime_engine_is_told_too():
    from laminar.runtime.run.driver import _engine_spec

    cfg = load_config(overrides=["model.rollout_eager=true"])
    info = {"model_dir": "/m", "eos_id": 2}
    assert _engine_spec(cfg, info, 0).eager is True
    assert _engine_spec(load_config(overrides=[]), info, 0).eager is False


def test_summary_names_the_eager_floor_only_when_it_is_charged():
    from laminar.sim.costdata import efficiency_basis

    graph = efficiency_basis(load_config(overrides=[]))
    eager = efficiency_basis(load_config(overrides=["model.rollout_eager=true"]))
    assert "decode_layer_eager_s" not in graph["calibrated"] + graph["assumed"]
    assert "decode_layer_eager_s" in eager["calibrated"].split(";")
