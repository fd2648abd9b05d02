"""The trainer layout's memory check (issue 30, item 2; ``laminar.specs.layoutfit``)."""

from __future__ import annotations

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.specs.hardware import hardware_spec
from laminar.specs.layoutfit import (
    Layout,
    check_layout,
    check_layout_fit,
    fit_problem,
    layouts,
    rank_bytes,
    valid,
)
from laminar.specs.model import model_spec

# A 72B trainer on 4 machines with 64K-token micro-batches: activations, not states, decide.
LONG = ["model.name=qwen2.5-72b", "model.rollout_tp=8", "cluster.gpus=64",
        "workload.max_prompt_len=2048", "workload.max_response_len=62000"]  # fmt: skip


def _cfg(*extra):
    return load_config(overrides=[*LONG, *extra])


def test_context_and_tensor_parallelism_shrink_a_rank():
    cfg = _cfg()
    spec = model_spec(cfg.model)
    plain = rank_bytes(cfg, spec, Layout(), 32)
    assert rank_bytes(cfg, spec, Layout(cp=4), 32) < plain
    assert rank_bytes(cfg, spec, Layout(tp=4), 32) < plain
    assert rank_bytes(cfg, spec, Layout(pp=2), 32) == pytest.approx(plain, rel=0.05)


def test_a_layout_that_does_not_fit_is_refused_with_the_smallest_that_would():
    cfg = _cfg("trainer.pp=2")
    with pytest.raises(ConfigError) as e:
        check_layout_fit(cfg, 32)
    assert e.value.key_path in ("trainer.cp", "trainer.tp")
    assert "the smallest layout that fits is" in str(e.value)
    best = str(e.value).rsplit("fits is ", 1)[1]
    degrees = dict(part.split("=") for part in best.split(", "))
    fixed = _cfg(*(f"trainer.{k}={v}" for k, v in degrees.items()))
    check_layout_fit(fixed, 32)  # the layout it names fits


def test_the_simulator_and_the_plan_screen_refuse_it_by_key():
    cfg = _cfg("trainer.pp=2", "sim.systems=[laminar]", "cluster.trainer_fraction=0.5",
               "workload.steps=2", "sim.warmup_steps=0")  # fmt: skip
    problem = fit_problem(cfg)
    assert problem is not None and problem.key_path.startswith("trainer.")
    with pytest.raises(ConfigError) as e:
        simulate(cfg)
    assert e.value.key_path == problem.key_path


def test_a_rollout_that_does_not_fit_is_still_named_first():
    cfg = _cfg("trainer.cp=8", "model.rollout_tp=1")
    problem = fit_problem(cfg)
    assert problem is not None and problem.key_path == "model.rollout_tp"


def test_moe_experts_are_shared_out_over_the_gpus_whatever_ep():
    cfg = load_config(overrides=["model.name=deepseek-v3", "cluster.gpus=256",
                                 "workload.max_prompt_len=512", "workload.max_response_len=1024",
                                 "cluster.hardware=h100-sxm"])  # fmt: skip
    spec = model_spec(cfg.model)
    ep16 = rank_bytes(cfg, spec, Layout(ep=16, pp=16), 256)
    # NeMo RL trains it so (EP 16, PP 16 on 256 H100): it fits.
    assert ep16 < hardware_spec(cfg.cluster)["gpu_memory_bytes"]
    assert ep16 == pytest.approx(rank_bytes(cfg, spec, Layout(ep=64, pp=4), 256), rel=0.05)


def test_layouts_are_valid_and_smallest_first():
    spec = model_spec(load_config(overrides=["model.name=qwen3-30b-a3b"]).model)
    found = layouts(spec, 32, 8)
    assert found[0] == Layout() and all(valid(x, 32, spec) for x in found)
    sizes = [x.model_parallel for x in found]
    assert sizes == sorted(sizes) and max(x.tp for x in found) <= 8
    assert any(x.ep == 32 for x in found)


@pytest.mark.parametrize(
    "layout, gpus, experts, key",
    [
        (Layout(tp=3), 8, 0, "trainer.tp"),
        (Layout(pp=3), 8, 0, "trainer.pp"),
        (Layout(cp=3), 8, 0, "trainer.cp"),
        (Layout(ep=2), 8, 0, "trainer.ep"),
        (Layout(ep=256), 512, 128, "trainer.ep"),
        (Layout(ep=16, pp=2), 16, 128, "trainer.ep"),
    ],
)
def test_a_layout_that_cannot_be_laid_is_refused_by_key(layout, gpus, experts, key):
    with pytest.raises(ConfigError) as e:
        check_layout(layout, gpus, experts=experts, layers=None)
    assert e.value.key_path == key


def test_too_many_stages_for_the_layers():
    with pytest.raises(ConfigError) as e:
        check_layout(Layout(pp=64), 64, experts=0, layers=28)
    assert e.value.key_path == "trainer.pp"
