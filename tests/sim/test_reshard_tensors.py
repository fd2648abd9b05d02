"""verl's colocated hand-over moves the weights a tensor at a time (``Verl.sync_s``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from laminar.config import load_config
from laminar.policy.relay import broadcast_time, optimal_chunks
from laminar.sim.baselines import Verl
from laminar.sim.costdata import cost_model_for
from laminar.specs.model import catalog_spec
from laminar.specs.tensors import tensor_count

DSV3 = ["model.name=deepseek-v3", "model.rollout_tp=32", "cluster.hardware=h100-sxm",
        "trainer.pp=16", "trainer.ep=16", "workload.max_prompt_len=512",
        "workload.max_response_len=1024"]  # fmt: skip


def _sync(overrides: list[str]) -> tuple[float, float]:
    """(the hand-over's seconds, one bulk transfer of a machine's copies over its NICs)."""
    cfg = load_config(overrides=[*overrides, "sim.systems=[verl]"])
    cost = cost_model_for(cfg)
    gpm = min(cfg.cluster.gpus_per_machine, cfg.cluster.gpus)
    bulk = cost.transfer_s(gpm * cost.weight_bytes, "rdma")
    return Verl(cfg).sync_s(SimpleNamespace(cost=cost)), bulk


def test_tens_of_thousands_of_tensors_over_many_machines_pay_the_chain_fill():
    sync, bulk = _sync([*DSV3, "cluster.gpus=256"])
    # DeepSeek-V3: ~45,000 tensors, each a pipelined broadcast over 32 machines
    assert tensor_count(catalog_spec("deepseek-v3")) > 40_000
    assert 1.5 * bulk < sync < 4 * bulk


def test_the_chain_spans_one_copy_of_the_model_not_every_machine():
    """Megatron's data-parallel replicas export their copies side by side: 512 GPUs of PP 16 x
    EP 16 hand over as fast as 256; a trainer without model parallelism (FSDP) spans them all."""
    at256, _ = _sync([*DSV3, "cluster.gpus=256"])
    at512, _ = _sync([*DSV3, "cluster.gpus=512"])
    assert at512 == pytest.approx(at256, rel=1e-12)
    dense = ["model.name=qwen2.5-7b", "cluster.hardware=h100-sxm"]
    small, small_bulk = _sync([*dense, "cluster.gpus=32"])
    large, large_bulk = _sync([*dense, "cluster.gpus=256"])
    assert small_bulk == pytest.approx(large_bulk)  # a machine's NICs carry the same bytes
    assert small < large  # but the chain over 32 machines fills longer than over 4


def test_two_machines_have_no_chain_to_fill_and_one_machine_stays_on_nvlink():
    cfg_over = ["model.name=qwen2.5-7b", "cluster.hardware=h100-sxm"]
    two, bulk = _sync([*cfg_over, "cluster.gpus=16"])
    cfg = load_config(overrides=[*cfg_over, "cluster.gpus=16", "sim.systems=[verl]"])
    a = cost_model_for(cfg).rdma_startup_s
    n = tensor_count(catalog_spec("qwen2.5-7b"))
    assert two == pytest.approx(bulk + (n - 1) * a, rel=1e-9)  # a start-up a tensor, no fill
    cfg = load_config(overrides=[*cfg_over, "cluster.gpus=8", "sim.systems=[verl]"])
    cost = cost_model_for(cfg)
    one = Verl(cfg).sync_s(SimpleNamespace(cost=cost))
    assert one == pytest.approx(cost.transfer_s(cost.weight_bytes, "nvlink"))


def test_a_copy_inside_one_machine_hands_over_on_nvlink_whatever_the_job_spans():
    """Megatron EP 8 on 8-GPU machines: each data-parallel replica exports inside its machine."""
    moe = ["model.name=qwen3-30b-a3b", "model.rollout_tp=2", "cluster.hardware=h100-sxm",
           "trainer.ep=8", "cluster.gpus=32"]  # fmt: skip
    cfg = load_config(overrides=[*moe, "sim.systems=[verl]"])
    cost = cost_model_for(cfg)
    sync = Verl(cfg).sync_s(SimpleNamespace(cost=cost))
    assert sync == pytest.approx(cost.transfer_s(cost.weight_bytes, "nvlink"))
    fsdp, _ = _sync([m for m in moe if m != "trainer.ep=8"])  # FSDP spans the 4 machines
    assert fsdp > 5 * sync


def test_the_planners_screen_charges_the_same_hand_over():
    """``laminar plan``'s analytic screen takes a globally syncing system's own ``sync_s``."""
    from laminar.plan.screen import _handover_s
    from laminar.sim.cluster import check_setup
    from laminar.sim.registry import resolve_systems

    dense = ["model.name=qwen2.5-7b", "cluster.hardware=h100-sxm", "cluster.gpus=32"]
    for overrides in ([*DSV3, "cluster.gpus=256", "sim.systems=[verl]"],
                      [*dense, "sim.systems=[one-step]"]):  # fmt: skip
        cfg = load_config(overrides=overrides)
        cost = cost_model_for(cfg)
        system = resolve_systems(cfg.sim.systems)[0](cfg)
        split = check_setup(cfg, system, cost)
        sim = system.sync_s(SimpleNamespace(cost=cost, split=split))
        assert _handover_s(system, split, cost) == sim > 0
        if system.colocated:  # DeepSeek-V3's tensors: well above one bulk copy
            assert sim > 1.5 * cost.transfer_s(8 * cost.weight_bytes, "rdma")


def test_a_cost_file_of_a_model_outside_the_catalog_hands_over_as_one_tensor():
    """A calibrated tiny model has its bytes, not its tensors: the sync is one chain, and
    applying the file to a cluster of many machines still simulates."""
    cost_file = Path(__file__).resolve().parents[2] / "docs" / "fidelity" / "cost.json"
    cfg = load_config(preset="tiny-cpu", overrides=[
        f"sim.cost_file={cost_file}", "sim.systems=[verl]", "sim.setting=cluster",
        "cluster.gpus=64", "cluster.gpus_per_machine=2"])  # fmt: skip
    cost = cost_model_for(cfg)
    verl = Verl(cfg)
    assert verl._tensor_shares() == ((1.0, 1),)
    m, a, b = 2 * cost.weight_bytes, cost.rdma_startup_s, cost.rdma_beta_s_per_byte
    assert verl.sync_s(SimpleNamespace(cost=cost)) == pytest.approx(
        broadcast_time(32, optimal_chunks(32, m, a, b), m, a, b))  # fmt: skip
