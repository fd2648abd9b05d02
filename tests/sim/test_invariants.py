"""Invariants of a simulated Laminar run (issue 4, "Done when")."""

from __future__ import annotations

import numpy as np
import pytest

from laminar.policy.staleness import staleness
from laminar.sim import simulate

from .conftest import small_config


@pytest.fixture(scope="module")
def tight_run(tmp_path_factory):
    from .conftest import write_cost_file

    path = write_cost_file(tmp_path_factory.mktemp("c") / "tight.json", kv_capacity_tokens=6000)
    cfg = small_config(f"sim.cost_file={path}", "sim.max_batch=8", "sim.rollout_batch_prompts=3")
    return simulate(cfg)


@pytest.fixture(scope="module")
def roomy_run():
    return simulate(small_config("workload.steps=6"))


@pytest.fixture(params=["tight", "roomy"])
def run(request, tight_run, roomy_run):
    return tight_run if request.param == "tight" else roomy_run


def test_the_tight_run_exercises_preemption_and_repack(tight_run):
    row = tight_run.summary.iloc[0]
    assert row["preemptions"] > 0 and row["repack_moves"] > 0 and row["reprefill_tokens"] > 0
    assert (tight_run.replicas["running"] <= 8).all()  # sim.max_batch


def test_every_trajectory_generated_exactly_once(run):
    t = run.trajectories
    assert t["traj_id"].is_unique
    assert not t.duplicated(["epoch", "step", "prompt_id", "sample_index"]).any()
    done = t["gen_end_s"].notna()
    assert (t.loc[done, "generated_tokens"] == t.loc[done, "response_len"]).all()
    assert (t.loc[~done, "generated_tokens"] < t.loc[~done, "response_len"]).all()
    assert (t.loc[done, "gen_end_s"] >= t.loc[done, "gen_start_s"]).all()
    # Tokens are conserved: every decoded token belongs to exactly one trajectory.
    assert t["generated_tokens"].sum() == run.summary.iloc[0]["decoded_tokens"]


def test_every_trajectory_consumed_at_most_once_in_whole_groups(run):
    cfg = run.config.workload
    t = run.trajectories
    consumed = t[t["consumed_version"] >= 0]
    assert len(consumed) == cfg.steps * cfg.prompts_per_step * cfg.samples_per_prompt
    assert consumed["gen_end_s"].notna().all()
    assert (consumed["consumed_s"] >= consumed["gen_end_s"]).all()
    per_step = consumed.groupby("consumed_version")["traj_id"].count()
    assert (per_step == cfg.prompts_per_step * cfg.samples_per_prompt).all()
    assert (consumed.groupby("group_id")["consumed_version"].nunique() == 1).all()
    assert (t.groupby("group_id")["traj_id"].count() == cfg.samples_per_prompt).all()


def test_staleness_is_consumer_minus_generation_version(run):
    t = run.trajectories
    consumed = t[t["consumed_version"] >= 0]
    pairs = zip(consumed["consumed_version"], consumed["weight_version"], strict=True)
    expected = [staleness(c, v) for c, v in pairs]
    assert consumed["staleness"].tolist() == expected
    assert (t.loc[t["consumed_version"] < 0, "staleness"] == -1).all()
    # Laminar: one version per trajectory (§6).
    assert (t["weight_versions"] == t["weight_version"].astype(str)).all()
    row = run.summary.iloc[0]
    # The summary counts the steps after the warm-up; step k trains at version k.
    window = consumed[consumed["consumed_version"] >= row["warmup_steps"]]
    assert row["staleness_max"] == window["staleness"].max()
    assert row["staleness_mean"] == pytest.approx(window["staleness"].mean())


def test_no_weights_from_the_future(run):
    # A trajectory's version was published (a trainer step ended) before it started.
    ends = run.steps.sort_values("version")["end_s"].to_numpy()
    t = run.trajectories
    v = t["weight_version"].to_numpy()
    published = np.where(v > 0, ends[np.maximum(v - 1, 0)], 0.0)
    assert (t["gen_start_s"].to_numpy() >= published).all()


def test_kv_never_over_capacity(run):
    r = run.replicas
    assert (r["kv_tokens"] <= r["kv_capacity_tokens"]).all()
    assert (r["kv_peak_tokens"] <= r["kv_capacity_tokens"]).all()
    busy = r["running"] > 0
    assert (r.loc[busy, "kv_peak_tokens"] > r.loc[busy, "kv_tokens"]).all()
    assert 0 < run.summary.iloc[0]["mean_kv_util"] <= 1


def test_steps_table(run):
    s = run.steps
    assert s["step"].tolist() == list(range(run.config.workload.steps))
    assert (s["end_s"].diff().dropna() > 0).all()
    assert (s["train_s"] > 0).all() and (s["actor_stall_s"] > 0).all()
