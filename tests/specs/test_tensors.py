"""laminar.specs.tensors: a model's parameters as the tensors a weight hand-over moves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from laminar.specs.model import catalog_spec
from laminar.specs.tensors import EXPERT_TENSORS, LAYER_TENSORS, tensor_count, tensor_groups


@pytest.mark.parametrize("name", ["qwen2.5-7b", "llama-3.1-70b", "qwen3-30b-a3b", "deepseek-v3"])
def test_groups_add_up_to_the_model(name):
    spec = catalog_spec(name)
    groups = tensor_groups(spec)
    assert sum(p * n for p, n in groups) == pytest.approx(spec.total_params, rel=1e-12)
    assert all(p > 0 and n >= 1 for p, n in groups)


def test_a_moe_model_is_mostly_expert_tensors_and_a_dense_one_seven_a_layer():
    moe = catalog_spec("deepseek-v3")
    experts = moe.moe_layers * moe.experts * EXPERT_TENSORS
    heads = 1 + (moe.head_params > 0)
    assert tensor_count(moe) == experts + moe.layers * LAYER_TENSORS + heads
    assert experts > 40_000  # 58 MoE layers x 256 experts x 3
    dense = catalog_spec("qwen2.5-7b")
    assert tensor_count(dense) == dense.layers * LAYER_TENSORS + 1 + (dense.head_params > 0)


def test_a_tied_head_is_not_a_tensor_of_its_own():
    spec = catalog_spec("qwen2.5-7b")
    untied = replace(spec, head_params=spec.embedding_params,
                     total_params=spec.total_params + spec.embedding_params)  # fmt: skip
    tied = replace(spec, head_params=0)
    assert tensor_count(untied) == tensor_count(tied) + 1
