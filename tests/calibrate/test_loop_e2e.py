"""A miniature calibrate -> simulate -> compare loop on a short real run (CPU, one engine).

``laminar train`` writes ``profile/``; ``laminar calibrate`` fits a cost file from it;
``laminar simulate`` of the run's own ``config.yaml`` with ``--cost`` (replaying its response
lengths) predicts the run. On a busy 2-core machine a run this short is noisy (its steps take
0.05-0.5 s each, and other processes take their share of the cores), so the bound is loose: the
mean step time and the train tokens/s within a factor 2 of the measured ones. A broken model
(a unit, a missing term, no samples) misses by far more.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config
from tests.runtime.test_train_e2e import warmup_sets

pytestmark = pytest.mark.slow


def test_calibrate_simulate_compare(tmp_path, capsys):
    run = tmp_path / "run"
    sets = ["workload.prompts_per_step=4", "workload.samples_per_prompt=4", "runtime.max_batch=16",
            "runtime.rollouts=1", "runtime.eval_prompts=0", *warmup_sets(tmp_path)]  # fmt: skip
    args = ["train", "--preset", "tiny-cpu", "--steps", "16", "--no-progress", "--out", str(run)]
    assert main([*args, *(x for kv in sets for x in ("--set", kv))]) == 0
    for name in ("engine_steps.csv", "trainer_steps.csv", "weight_loads.csv", "machine.json"):
        assert (run / "profile" / name).is_file(), name
    probe = pd.read_csv(run / "profile" / "speed_probe.csv")  # one sample a second beside it
    assert len(probe) >= 3 and (probe["matmul_s"] > 0).all() and (probe["python_s"] > 0).all()
    steps = pd.read_csv(run / "profile" / "engine_steps.csv")
    assert len(steps) > 20 and (steps["step_s"] > 0).all() and steps["decode_seqs"].max() > 1

    cost = tmp_path / "cost.json"
    assert main(["calibrate", str(run), "-o", str(cost), "--at-speed-of", str(run)]) == 0
    assert "engine step" in capsys.readouterr().out
    content = json.loads(cost.read_text())
    assert content["runtime"]["speed_reference"]["runs"] == 1
    assert content["runtime"]["speed_scaled_by"] == pytest.approx(1.0)  # its own speed
    assert content["runtime"]["placements"] == [{"mode": "laminar", "rollouts": 1}]

    sim = tmp_path / "sim"
    trace = f"workload.source={{type: trace, path: {run / 'trajectories.parquet'}}}"
    rc = main(["simulate", str(run / "config.yaml"), "--cost", str(cost), "--set", trace,
               "--set", "sim.warmup_steps=1", "--out", str(sim)])  # fmt: skip
    assert rc == 0
    # no cost file in the run: repack ran without a step bound, and was simulated so
    assert load_config(run / "config.yaml").repack.max_step_slowdown == 0
    assert load_config(sim / "config.yaml").repack.max_step_slowdown == 0
    predicted = pd.read_csv(sim / "summary.csv").iloc[0]
    assert predicted["replicas"] == 1 and predicted["steps"] == 16
    tr = pd.read_csv(run / "profile" / "trainer_steps.csv")
    window = tr[tr["step"] >= 1]
    took = window["wait_s"] + window["train_s"] + window["publish_s"]
    for name, pred, meas in (
        ("step time", predicted["step_time_s_mean"], took.mean()),
        ("train tokens/s", predicted["train_tokens_per_s"], window["tokens"].sum() / took.sum()),
    ):
        assert abs(math.log(pred / meas)) < math.log(2.0), (name, pred, meas)
