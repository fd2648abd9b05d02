"""Per-stage seconds in steps.csv and summary.csv (issue 30, item 4; ``laminar.sim.stages``)."""

from __future__ import annotations

import pytest

from laminar.sim import simulate
from laminar.sim.baselines import OneStep
from laminar.sim.stages import STAGES
from laminar.sim.systems import Laminar

from .conftest import small_config
from .test_local import job

SYSTEMS = ["laminar", "verl", "one-step", "stream", "partial"]


@pytest.fixture(scope="module")
def run():
    return simulate(small_config(f"sim.systems=[{', '.join(SYSTEMS)}]", "workload.steps=6"))


def _of(frame, system):
    return frame[frame["system"] == system].reset_index(drop=True)


@pytest.mark.parametrize("system", SYSTEMS)
def test_stages_add_up_to_the_step(run, system):
    s = _of(run.steps, system)
    assert (s[list(STAGES)] >= 0).all().all()
    # The step runs from the previous step's end (0 for the first) to its own end.
    previous_end = s["end_s"].shift(fill_value=0.0)
    assert s["step_time_s"].tolist() == pytest.approx((s["end_s"] - previous_end).tolist())
    assert s[list(STAGES)].sum(axis=1).tolist() == pytest.approx(s["step_time_s"].tolist())
    # Training is the three compute stages; every system recomputes the old log-probs.
    compute = s["old_logprob_s"] + s["ref_s"] + s["update_s"]
    assert compute.tolist() == pytest.approx(s["train_s"].tolist())
    assert (s["old_logprob_s"] > 0).all() and (s["ref_s"] == 0).all()
    row = _of(run.summary, system).iloc[0]
    means = sum(row[f"{stage}_mean"] for stage in STAGES)
    assert means == pytest.approx(row["step_time_s_mean"])


def test_synchronous_generation_is_the_batch_generation(run):
    """verl: nothing overlaps, so gen_s is the batch's generation, launch to last finish."""
    s, t = _of(run.steps, "verl"), _of(run.trajectories, "verl")
    launched = s["end_s"].shift(fill_value=0.0)
    for i, step in s.iterrows():
        batch = t[t["consumed_version"] == step["step"]]
        assert step["gen_s"] == pytest.approx(batch["gen_end_s"].max() - launched[i])
        assert step["gen_s"] == step["data_wait_s"]
        assert step["weight_sync_s"] == pytest.approx(step["actor_stall_s"])
        assert step["weight_sync_s"] > 0


def test_laminar_weight_sync_is_the_actor_stall(run):
    s = _of(run.steps, "laminar")
    assert s["weight_sync_s"].tolist() == pytest.approx(s["actor_stall_s"].tolist())
    assert (s["gen_s"] == s["data_wait_s"]).all()


def test_one_step_waits_for_the_next_batch_as_generation(run):
    s = _of(run.steps, "one-step")
    syncing = s[s["weight_sync_s"] > 0]
    assert len(syncing) >= len(s) - 1
    # One sync's seconds each time; the rest of the stall waited for the rollouts.
    assert syncing["weight_sync_s"].tolist() == pytest.approx(
        [syncing["weight_sync_s"][0]] * len(syncing)
    )
    waited = syncing["actor_stall_s"] - syncing["weight_sync_s"]
    assert (syncing["gen_s"] - syncing["data_wait_s"]).tolist() == pytest.approx(waited.tolist())


def test_stream_counts_only_the_idle_wait_as_generation(run):
    """Mini-batches train while the tail generates: part of data_wait_s is training."""
    s = _of(run.steps, "stream")
    assert (s["gen_s"] <= s["data_wait_s"] + 1e-9).all()
    assert (s["gen_s"] < s["data_wait_s"] - 1e-9).any()


def test_no_recompute_no_old_logprob_stage(monkeypatch):
    monkeypatch.setattr(Laminar, "recomputes_old_logprob", False)
    s = simulate(small_config("sim.systems=[laminar]", "workload.steps=3")).steps
    assert (s["old_logprob_s"] == 0).all()
    assert (s["update_s"] == s["train_s"]).all()


def test_one_step_trainer_waits_split():
    system = OneStep(small_config())

    class Cluster:  # only what ``sync_s`` reads (the small config is one machine: NVLink)
        class cost:
            weight_bytes, rdma_startup_s, rdma_beta_s_per_byte = 1e9, 1e-5, 1e-10
            nvlink_gpus = 0

            @staticmethod
            def transfer_s(nbytes, link):
                assert link == "nvlink"
                return nbytes / 1e11

        class split:
            rollout_machines = (1, 2)

    sync_s = system.sync_s(Cluster)
    assert system.trainer_waits(Cluster, 1.0, 5.0) == (1.0 + 5.0 - sync_s, sync_s)
    assert system.trainer_waits(Cluster, 1.0, 0.0) == (1.0, 0.0)  # no sync in publish


@pytest.mark.parametrize("mode", ["laminar", "sync"])
def test_runtime_setting_stages_add_up(tmp_path, mode):
    s = simulate(job(tmp_path, f"runtime.mode={mode}")).steps
    assert s[list(STAGES)].sum(axis=1).tolist() == pytest.approx(s["step_time_s"].tolist())
