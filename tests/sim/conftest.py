"""Small simulator configs and workloads shared by the simulator tests."""

from __future__ import annotations

import json

import pytest

from laminar.config import LaminarConfig, load_config
from laminar.sim.costdata import derive

# One 8-GPU machine: 2 trainer GPUs, 6 replicas; short responses so the reference stepper
# (one event per decode step) stays fast.
SMALL = [
    "cluster.gpus=8",
    "cluster.trainer_fraction=0.25",
    "workload.prompts_per_step=6",
    "workload.samples_per_prompt=4",
    "workload.max_prompt_len=256",
    "workload.max_response_len=1024",
    "workload.steps=5",
    "repack.interval_s=2.0",
]


def small_config(*overrides: str) -> LaminarConfig:
    """The small config with ``overrides`` applied after it."""
    return load_config(overrides=[*SMALL, *overrides])


def write_cost_file(path, **changes) -> str:
    """A cost file of the 7B preset with some coefficients replaced; returns its path."""
    model = derive("h800", "qwen2.5-7b", tp=1)
    data = json.loads(model.to_json())
    for name, value in changes.items():
        data["coefficients"][name]["value"] = value
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def tight_kv_cost(tmp_path) -> str:
    """A cost file whose replicas hold ~6 trajectories' KV: preemption and repack both happen."""
    return write_cost_file(tmp_path / "tight.json", kv_capacity_tokens=6000)
