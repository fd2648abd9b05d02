"""``laminar train`` with ``relay.enabled``: the trainer publishes through a relay worker and
the vLLM rollouts pull every version from it while they keep generating (paper §3.2, §4)."""

from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest

from laminar.cli import main
from laminar.traces import read_trace
from tests.runtime.test_train_e2e import warmup_sets

pytestmark = pytest.mark.slow


def test_train_laminar_through_the_relay_tier(tmp_path):
    shm_before = set(os.listdir("/dev/shm"))
    args = ["train", "--preset", "tiny-cpu", "--mode", "laminar", "--steps", "3"]
    args += ["--no-progress", "--out", str(tmp_path / "run")]
    for kv in (
        "relay.enabled=true",
        "relay.transport=tcp",
        "workload.prompts_per_step=4",
        "workload.samples_per_prompt=4",
        "runtime.max_batch=16",
        *warmup_sets(tmp_path),
    ):
        args += ["--set", kv]
    assert main(args) == 0
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["trajectories_lost"] == 0 and summary["trajectories_consumed"] == 3 * 4 * 4
    assert list(pd.read_csv(run / "steps.csv")["version"]) == [1, 2, 3]
    trace = read_trace(run / "trajectories.parquet")
    # rollouts kept generating across the trainer's publishes and loaded newer versions from
    # the relay (version 0 included: every version went through it)
    assert trace["weight_version"].max() >= 1 and summary["gen_tokens_per_s"] > 0
    time.sleep(1)
    assert f"laminar-{summary['run_id']}" not in set(os.listdir("/dev/shm")) - shm_before
