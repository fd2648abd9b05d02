"""A globally syncing baseline broadcasts over NVLink when its trainer and engines share one
NVLink domain (``GlobalSync.sync_s``), over the machines' NICs otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from laminar.config import load_config
from laminar.sim.cluster import check_setup
from laminar.sim.costdata import cost_model_for
from laminar.sim.registry import all_systems


def _sync(system: str, *overrides: str) -> tuple[float, object]:
    cfg = load_config(overrides=[*overrides, f"sim.systems=[{system}]",
                                 "cluster.trainer_fraction=0.5"])  # fmt: skip
    cost = cost_model_for(cfg)
    sys_ = all_systems()[system](cfg)
    split = check_setup(cfg, sys_, cost)
    return sys_.sync_s(SimpleNamespace(cost=cost, split=split)), cost


@pytest.mark.parametrize("system", ["one-step", "partial", "stream"])
def test_one_machine_broadcasts_on_nvlink_two_over_the_nics(system):
    one, cost = _sync(system, "model.name=qwen2.5-7b", "cluster.hardware=h20", "cluster.gpus=8")
    assert one == pytest.approx(cost.weight_bytes / cost.nvlink_bytes_per_s)
    two, cost2 = _sync(system, "model.name=qwen2.5-7b", "cluster.hardware=h20", "cluster.gpus=16")
    assert two >= cost2.transfer_s(cost2.weight_bytes, "rdma") > one


def test_a_gb200_rack_is_one_domain_across_its_trays():
    rack, cost = _sync("partial", "model.name=qwen2.5-7b", "cluster.hardware=gb200",
                       "cluster.gpus=64")  # fmt: skip
    assert cost.machine_gpus == 4  # 16 trays
    assert rack == pytest.approx(cost.weight_bytes / cost.nvlink_bytes_per_s)
    two_racks, _ = _sync("partial", "model.name=qwen2.5-7b", "cluster.hardware=gb200",
                         "cluster.gpus=144")  # fmt: skip
    assert two_racks > rack
