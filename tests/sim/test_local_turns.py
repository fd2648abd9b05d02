"""Multi-turn trajectories in the runtime setting (``laminar/sim/local.py``): a run's trace with
``turns`` and ``tool_latency_s`` replayed as ``laminar train`` would generate it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import simpy

from laminar.sim import simulate
from laminar.sim.cluster import Cluster
from laminar.sim.costdata import cost_model_for
from laminar.sim.local import RUNTIME_SYSTEMS, placed_cost, runtime_config
from laminar.sim.local_workload import _issue_order, runtime_workload

from .test_local import job
from .test_turns import assert_same_as_single_turn

# Four rollouts on four cores, 4 groups of 8 each: one slow conversation holds one rollout.
FOUR = ["runtime.rollouts=4", 'runtime.cpu_binds=["1", "2", "3", "4"]', "runtime.max_batch=32"]


def _trace(tmp_path, latency_s: float, *, slow_frac: float = 1.0, name: str = "") -> str:
    """The tiny job's prompts with lengths of up to 120 tokens over 1-4 turns; a ``slow_frac``
    of the trajectories call an environment of ``latency_s`` seconds, the others one of 0 s
    (written as a run's trace; returns the config override that replays it)."""
    w = runtime_workload(job(tmp_path))
    rng = np.random.default_rng(0)
    tr = w.assign(response_len=rng.integers(8, 120, len(w)), finish_reason="stop")
    tr["turns"] = rng.integers(1, 5, len(tr))
    slow = rng.random(len(tr)) < slow_frac
    tr["tool_latency_s"] = np.where(slow, latency_s, 0.0)
    path = tmp_path / f"trace-{latency_s}-{slow_frac}{name}.parquet"
    tr.to_parquet(path, index=False)
    return f"workload.source={{type: trace, path: {path}}}"


def _tput(result) -> float:
    return float(result.summary.iloc[0]["train_tokens_per_s"])


def test_the_issue_order_keeps_the_tool_columns_with_their_rows():
    trace = pd.DataFrame({
        "step": [1, 1, 0, 0], "prompt_id": [7, 7, 3, 3], "sample_index": [1, 0, 0, 1],
        "prompt_len": [5, 5, 6, 6], "response_len": [10, 11, 12, 13],
        "finish_reason": ["stop"] * 4, "turns": [2, 3, 4, 5],
        "tool_latency_s": [0.5, 1.5, 2.5, 3.5],
    })  # fmt: skip
    out = _issue_order(trace, prompts_per_step=1)
    assert out["prompt_id"].tolist() == [0, 0, 1, 1]  # prompt 3, then 7
    assert out["response_len"].tolist() == [12, 13, 11, 10]
    assert out["turns"].tolist() == [4, 5, 3, 2]
    assert out["tool_latency_s"].tolist() == [2.5, 3.5, 1.5, 0.5]
    plain = _issue_order(trace.drop(columns=["turns", "tool_latency_s"]), prompts_per_step=1)
    assert "turns" not in plain and "tool_latency_s" not in plain  # single-turn, as before


@pytest.mark.parametrize("mode", ["laminar", "sync"])
def test_a_single_turn_trace_replays_as_before(tmp_path, mode):
    """``turns`` 1 everywhere (latencies or not) gives the tables of a trace without the
    columns, the replica series included (the code before multi-turn replay gave the same:
    ``benchmarks/sim_identity.py``-style comparison in the commit message)."""
    w = runtime_workload(job(tmp_path))
    plain = w.assign(response_len=np.random.default_rng(1).integers(4, 120, len(w)))
    ones = plain.assign(turns=1, tool_latency_s=3.0)
    runs = []
    for name, df in (("plain", plain), ("ones", ones)):
        path = tmp_path / f"{name}.parquet"
        df.to_parquet(path, index=False)
        cfg = job(tmp_path, f"runtime.mode={mode}", "sim.replica_series=true",
                  f"workload.source={{type: trace, path: {path}}}")  # fmt: skip
        runs.append(simulate(cfg))
    assert_same_as_single_turn(*runs, replicas=True)


@pytest.mark.parametrize("mode", ["laminar", "sync"])
def test_every_trajectory_waits_its_calls_on_one_version(tmp_path, mode):
    """Each consumed trajectory was generated whole, waited (turns - 1) x tool_latency_s on
    its environment, and on the one weight version it started with."""
    r = simulate(job(tmp_path, f"runtime.mode={mode}", _trace(tmp_path, 2.0)))
    tr = r.trajectories
    cfg = job(tmp_path)
    w = cfg.workload
    done = tr[tr["consumed_version"] >= 0]
    assert len(done) == w.steps * w.prompts_per_step * w.samples_per_prompt
    assert (done["turns"] > 1).mean() > 0.5
    expect = (done["turns"] - 1) * done["tool_latency_s"]
    np.testing.assert_allclose(done["env_wait_s"], expect, rtol=0, atol=1e-9)
    assert (done["generated_tokens"] == done["response_len"]).all()
    assert (done["gen_end_s"] - done["gen_start_s"] >= expect - 1e-9).all()
    assert not tr["weight_versions"].astype(str).str.contains(";").any()
    rest = tr[tr["consumed_version"] < 0]  # in flight at the end: within their budgets
    assert (rest["generated_tokens"] <= rest["response_len"]).all()
    assert (rest["env_wait_s"] <= (rest["turns"] - 1) * rest["tool_latency_s"] + 1e-9).all()


@pytest.mark.parametrize("mode", ["laminar", "sync"])
@pytest.mark.timeout(60)
def test_no_trajectory_is_lost_and_the_replay_is_bounded(tmp_path, mode, monkeypatch):
    """Both rollouts on one core (the preset's placement, where a replica waiting on its
    environment used to be woken back and forth by its core-mate at one instant, forever):
    the replay ends in a bounded number of events, and every trajectory handed out is
    finished or held by exactly one replica (running, queued or away on its environment)."""
    cfg = job(tmp_path, f"runtime.mode={mode}", "sim.replica_series=true",
              _trace(tmp_path, 1.0))  # fmt: skip
    events = 0
    step = simpy.Environment.step

    def counted(env):
        nonlocal events
        events += 1
        if events > 500_000:
            raise RuntimeError("the replay runs away")
        step(env)

    monkeypatch.setattr(simpy.Environment, "step", counted)
    run_cfg = runtime_config(cfg)
    system = RUNTIME_SYSTEMS[mode](run_cfg)
    cost = placed_cost(cfg, cost_model_for(cfg))
    cluster = Cluster(run_cfg, system, cost, runtime_workload(cfg).reset_index(drop=True))
    most = 0

    def watch():  # a rollout holds at most B, those away on their environment included
        nonlocal most
        while True:
            yield cluster.env.timeout(0.01)
            for r in cluster.replicas:
                most = max(most, len(r.running) + len(r.waiting) + len(r.away))

    cluster.env.process(watch())
    cluster.run()
    assert 0 < most <= cfg.runtime.max_batch
    assert cluster.trainer.steps_done == cfg.workload.steps
    assert 0 < events < 100_000
    held: dict[int, int] = {}
    for r in cluster.replicas:
        for t in r.trajectories():
            held[t.tid] = held.get(t.tid, 0) + 1
        assert r.kv == sum(t.prompt_len + r.generated_now(t, r.steps) for t in r.running.values())
    assert all(n == 1 for n in held.values())
    for t in cluster.prompts.trajectories:
        if math.isnan(t.gen_start_s):
            continue  # taken, still on its way to the engine (the refill latency)
        finished = t.generated == t.response_len and not math.isnan(t.gen_end_s)
        assert finished != (t.tid in held), t.tid


def test_a_sync_step_waits_for_its_slowest_conversation(tmp_path):
    """With 5% of the trajectories calling a 10 s environment (up to three calls each), every
    sync step lasts about its slowest conversation's waits longer than without them."""
    fast = simulate(job(tmp_path, "runtime.mode=sync", *FOUR, _trace(tmp_path, 0.0)))
    slow = simulate(
        job(tmp_path, "runtime.mode=sync", *FOUR, _trace(tmp_path, 10.0, slow_frac=0.05))
    )
    tr = slow.trajectories
    waits = tr[tr["consumed_version"] >= 0].groupby("consumed_version")["env_wait_s"].max()
    base = fast.steps["step_time_s"].to_numpy()
    longer = slow.steps["step_time_s"].to_numpy() - base
    assert (waits.to_numpy() >= 10.0).all()  # each step holds a slow conversation
    assert (longer >= 0.9 * waits.to_numpy()).all()
    assert (longer <= waits.to_numpy() + base).all()


def test_laminar_keeps_more_of_its_throughput_than_sync_as_latency_grows(tmp_path):
    """A slow conversation holds only its own rollout in laminar mode (the others reload and
    go on; repack can consolidate it); in sync mode it holds the whole step."""
    ratios, kept = [], {}
    for latency in (0.0, 2.0, 10.0):
        override = _trace(tmp_path, latency, slow_frac=0.05)
        lam = simulate(job(tmp_path, "runtime.mode=laminar", *FOUR, override))
        sync = simulate(job(tmp_path, "runtime.mode=sync", *FOUR, override))
        ratios.append(_tput(lam) / _tput(sync))
        kept[latency] = (_tput(lam), _tput(sync))
    assert ratios[0] < ratios[1] < ratios[2]
    lam_kept = kept[10.0][0] / kept[0.0][0]
    sync_kept = kept[10.0][1] / kept[0.0][1]
    assert lam_kept > 3 * sync_kept
