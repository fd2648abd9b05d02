"""model.rollout_quant and model.rollout_ep reach the engine or are refused at start, naming the
field (issue 28, item 3): a user who planned an FP8 or expert-parallel rollout never gets a
different run than the one simulated."""

from __future__ import annotations

import json

import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.runtime.cluster.replicas import replica_devices, replica_gpus, replica_span
from laminar.runtime.rollout.serving import Serving, model_has_experts, serving

DENSE = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "vocab_size": 512}  # fmt: skip
MOE = {**DENSE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2,
       "moe_intermediate_size": 32, "head_dim": 16}  # fmt: skip


def _cfg(*sets: str):
    return load_config(overrides=list(sets))


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["model.rollout_quant=fp8"], "model.rollout_quant"),
        (["model.rollout_ep=2"], "model.rollout_ep"),
    ],
)
def test_cpu_refuses_what_vllm_cpu_cannot_serve(sets, field):
    with pytest.raises(ConfigError) as e:
        serving(_cfg("runtime.device=cpu", *sets), None)
    assert e.value.key_path == field and "runtime.device=cpu" in str(e.value)


def test_a_train_run_refuses_fp8_on_cpu_before_it_writes_anything(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--no-progress", "--out", str(out), "--set", "model.rollout_quant=fp8"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "model.rollout_quant" in err and "fp8" in err
    assert not out.exists()


def test_fp8_on_cuda_is_vllm_online_fp8():
    s = serving(_cfg("runtime.device=cuda", "model.rollout_quant=fp8"), DENSE)
    assert s == Serving("fp8", 1) and s.engine_args() == {"quantization": "fp8"}


def test_expert_parallel_needs_routed_experts():
    assert model_has_experts(MOE) is True and model_has_experts(DENSE) is False
    # an architecture the simulator refuses to size still says whether it routes to experts
    assert model_has_experts({**MOE, "model_type": "brand_new_moe"}) is True
    assert model_has_experts({**DENSE, "model_type": "brand_new"}) is False
    cuda_ep = ("runtime.device=cuda", "model.rollout_ep=2")
    for hf in (DENSE, None, {"model_type": "mystery"}):
        with pytest.raises(ConfigError) as e:
            serving(_cfg(*cuda_ep), hf)
        assert e.value.key_path == "model.rollout_ep" and "MoE" in str(e.value)
    s = serving(_cfg(*cuda_ep), MOE)
    assert s.engine_args() == {"enable_expert_parallel": True, "data_parallel_size": 2}


def test_an_expert_parallel_replica_holds_tp_times_ep_gpus_of_one_machine():
    cfg = _cfg("runtime.device=cuda", "model.rollout_tp=2", "model.rollout_ep=2",
               "cluster.gpus_per_machine=8")  # fmt: skip
    assert (replica_span(cfg), replica_devices(cfg), replica_gpus(cfg)) == (4, 2, 4.0)
    wide = _cfg("runtime.device=cuda", "model.rollout_tp=2", "model.rollout_ep=3",
                "cluster.gpus_per_machine=8")  # fmt: skip
    with pytest.raises(ConfigError) as e:
        replica_span(wide)
    assert e.value.key_path == "model.rollout_ep" and "6 GPUs" in str(e.value)


def test_vllm_takes_the_arguments_by_these_names():
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    # Field names only: constructing AsyncEngineArgs resolves the model name (a hub lookup).
    names = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    passed = {**Serving("fp8", 2).engine_args(), **Serving(None, 2).engine_args()}
    assert set(passed) <= names, sorted(set(passed) - names)
    assert {"quantization", "enable_expert_parallel", "data_parallel_size"} <= set(passed)


def test_the_pretrained_policys_config_is_what_is_read(tmp_path):
    from laminar.runtime.rollout.serving import read_model_config

    (tmp_path / "config.json").write_text(json.dumps(MOE))
    cfg = _cfg("runtime.model.type=pretrained", f"runtime.model.path={tmp_path}")
    assert read_model_config(cfg) == MOE
    assert read_model_config(_cfg()) is None  # the tiny model: written at start, dense
