"""The trainer's parallel layout (issue 30, item 2; ``laminar.sim.layout``)."""

from __future__ import annotations

import random

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.sim.costdata import derive
from laminar.sim.layout import TrainerLayout, grad_sync_s, step_time
from laminar.specs.layoutfit import Layout
from laminar.specs.trainer import train_mfu

from .conftest import small_config


@pytest.fixture(scope="module")
def dense():
    return derive("h100-sxm", "qwen2.5-7b", tp=1)


@pytest.fixture(scope="module")
def moe():
    return derive("h100-sxm", "qwen3-30b-a3b", tp=2)


def _lens(n=256, seed=0):
    rng = random.Random(seed)
    return [rng.randint(200, 9000) for _ in range(n)]


@pytest.mark.parametrize("old_logprob", [True, False])
def test_plain_layout_is_the_cost_models_own(dense, old_logprob):
    lens = _lens()
    for gpus in (1, 8, 64):
        t = step_time(dense, TrainerLayout(), lens, gpus, old_logprob=old_logprob)
        assert t.total_s == dense.train_s(lens, gpus, old_logprob=old_logprob)  # bit for bit
        assert t.logprob_s == (dense.logprob_s(lens, gpus) if old_logprob else 0.0)


def test_general_path_agrees_with_the_plain_one(dense):
    """The layout path at degrees 1 (forced by a second update) is the plain step plus one more
    gradient sync: the two formulas agree where they overlap."""
    lens, gpus = _lens(), 16
    plain = dense.train_s(lens, gpus)
    two = step_time(dense, TrainerLayout(mini_batches=2), lens, gpus, old_logprob=True)
    assert two.total_s == pytest.approx(plain + dense.train_sync_s(gpus), rel=1e-12)


def test_tensor_parallel_all_reduces_cost_more_across_machines(dense):
    lens = _lens()
    base = step_time(dense, TrainerLayout(mini_batches=2), lens, 64, old_logprob=True).total_s
    tp2 = step_time(dense, TrainerLayout(tp=2, mini_batches=2), lens, 64, old_logprob=True)
    tp16 = step_time(dense, TrainerLayout(tp=16, mini_batches=2), lens, 64, old_logprob=True)
    # TP shrinks the gradient shard but adds per-layer all-reduces; over NICs they dominate.
    assert tp16.total_s > tp2.total_s
    comm2 = (
        tp2.total_s
        - base
        + (dense.train_sync_s(64) - grad_sync_s(dense, TrainerLayout(tp=2), 64)) * 2
    )
    assert comm2 > 0


def test_pipeline_bubble_shrinks_with_more_micro_batches(dense):
    lens = _lens()
    few = TrainerLayout(pp=4, micro_batch_tokens=400_000)
    many = TrainerLayout(pp=4, micro_batch_tokens=4_000)
    t_few = step_time(dense, few, lens, 16, old_logprob=False).total_s
    t_many = step_time(dense, many, lens, 16, old_logprob=False).total_s
    assert t_few > t_many
    # One micro-batch a pipeline: the compute is stretched by pp (1 + (pp - 1) / 1).
    compute = sum(n * dense.train_flop_per_token + n * n * dense.train_flop_per_token_sq
                  for n in lens) / (16 * dense.train_flop_per_s_per_gpu)  # fmt: skip
    sync = grad_sync_s(dense, few, 16)
    assert t_few == pytest.approx(4 * compute + sync, rel=1e-9)


def test_expert_parallelism_syncs_what_each_group_holds(moe):
    gpus = 64
    plain = grad_sync_s(moe, TrainerLayout(), gpus)
    ep8 = grad_sync_s(moe, TrainerLayout(ep=8), gpus)
    assert plain == pytest.approx(moe.train_sync_s(gpus))
    routed_share = moe.train_sync_routed_bytes / moe.train_sync_bytes
    assert routed_share > 0.9  # Qwen3-30B-A3B: nearly all parameters are routed experts
    assert ep8 < plain * (1 - routed_share + routed_share / 4)
    # ... but its tokens cross GPUs twice a layer each way.
    lens = _lens()
    t1 = step_time(moe, TrainerLayout(mini_batches=2), lens, gpus, old_logprob=False)
    t8 = step_time(moe, TrainerLayout(ep=8, mini_batches=2), lens, gpus, old_logprob=False)
    a2a = t8.total_s - t1.total_s + 2 * (plain - ep8)
    assert a2a > 0


def test_moe_training_efficiency_is_sourced_apart_from_dense():
    dense, moe = train_mfu("hopper", 14e9), train_mfu("hopper", 14e9, moe=True)
    assert dense.value != moe.value
    assert "MoE" in moe.where and "MoE" not in dense.where
    assert train_mfu("hopper", 39e9, moe=True).value > moe.value  # interpolated in log params


def test_the_layout_is_the_specs_one():
    """tp/pp/ep/cp are defined once (``laminar.specs.layoutfit.Layout``); the simulator's layout
    adds a step's updates."""
    layout = TrainerLayout.of(load_config(overrides=["trainer.tp=2", "trainer.pp=4"]))
    assert isinstance(layout, Layout) and layout.model_parallel == 8
    assert (layout.tp, layout.pp, layout.ep, layout.cp) == (2, 4, 1, 1) and not layout.plain


def test_config_keys_are_bounded():
    with pytest.raises(ConfigError):
        load_config(overrides=["trainer.tp=0"])
    with pytest.raises(ConfigError):
        load_config(overrides=["trainer.old_logprob=sometimes"])


@pytest.fixture(scope="module")
def runs():
    base = ["sim.systems=[verl, laminar]", "workload.steps=4"]
    return {
        "plain": simulate(small_config(*base)),
        "rollout": simulate(small_config(*base, "trainer.old_logprob=rollout")),
        "ref": simulate(small_config(*base, "trainer.reference=true")),
        "tp2": simulate(small_config(*base, "trainer.tp=2")),
    }


def _steps(run, system="verl"):
    return run.steps[run.steps["system"] == system].reset_index(drop=True)


def test_reusing_the_rollouts_log_probs_skips_the_forward(runs):
    plain, reuse = _steps(runs["plain"]), _steps(runs["rollout"])
    assert (reuse["old_logprob_s"] == 0).all() and (plain["old_logprob_s"] > 0).all()
    assert (reuse["train_s"] < plain["train_s"]).all()


def test_a_reference_pass_is_one_more_forward(runs):
    plain, ref = _steps(runs["plain"]), _steps(runs["ref"])
    assert (ref["ref_s"] > 0).all()
    assert ref["ref_s"].tolist() == pytest.approx(ref["old_logprob_s"].tolist())
    assert (ref["train_s"] > plain["train_s"]).all()


def test_tensor_parallel_trainer_is_simulated(runs):
    plain, tp2 = _steps(runs["plain"]), _steps(runs["tp2"])
    assert (tp2["train_s"] != plain["train_s"]).all()


def test_the_simulator_refuses_a_layout_that_does_not_divide_its_gpus():
    with pytest.raises(ConfigError) as e:
        simulate(small_config("sim.systems=[laminar]", "trainer.tp=4"))  # 2 trainer GPUs
    assert e.value.key_path == "trainer.tp"
