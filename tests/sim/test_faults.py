"""Fault injection: Laminar keeps training through a dead rollout machine, relay or trainer;
the baselines restart as one job; no trajectory is ever lost (issue 5, item 3)."""

from __future__ import annotations

import pytest

from laminar.policy.relay import rebuild_chain
from laminar.sim import simulate
from laminar.sim.cluster import Cluster
from laminar.sim.costdata import cost_model_for
from laminar.sim.systems import Laminar

from .conftest import small_config

# Four machines: one trains, three roll out (8 replicas each), so one can die.
FOUR = ["cluster.gpus=32", "workload.prompts_per_step=12", "workload.steps=8"]
KILL_S, RECOVER_S = 12.0, 20.0


def _run(fault: str, systems: str = "laminar"):
    return simulate(small_config(*FOUR, f"sim.systems=[{systems}]", f"faults.events=[{fault}]"))


def _machine_fault(machine: int = 1) -> str:
    return f"{{type: rollout_machine, at_s: {KILL_S}, machine: {machine}, recover_s: {RECOVER_S}}}"


def _assert_nothing_lost(r) -> None:
    t = r.trajectories
    w = r.config.workload
    assert t["traj_id"].is_unique
    done = t["gen_end_s"].notna()
    assert (t.loc[done, "generated_tokens"] == t.loc[done, "response_len"]).all()
    assert (t.loc[~done, "generated_tokens"] < t.loc[~done, "response_len"]).all()
    consumed = t[t["consumed_version"] >= 0]
    assert len(consumed) == w.steps * w.prompts_per_step * w.samples_per_prompt
    assert consumed["gen_end_s"].notna().all()


@pytest.fixture(scope="module")
def laminar_machine():
    return _run(_machine_fault())


def test_laminar_keeps_training_while_a_rollout_machine_is_down(laminar_machine):
    r = laminar_machine
    _assert_nothing_lost(r)
    steps = r.steps
    during = steps[(steps["end_s"] > KILL_S) & (steps["end_s"] < KILL_S + RECOVER_S)]
    assert len(during) >= 1  # training went on
    log = r.faults.iloc[0]
    assert log["fault"] == "rollout_machine" and log["t_s"] == KILL_S and log["replicas"] == 8
    assert log["redirected"] + log["restarted"] > 0


def test_the_dead_machine_generates_nothing_until_it_recovers(laminar_machine):
    reps = laminar_machine.replicas
    dead = {f"r{i}" for i in range(8, 16)}  # machine 1 of the rollout machines
    window = reps[(reps["t_s"] > KILL_S) & (reps["t_s"] < KILL_S + RECOVER_S)]
    assert (window.loc[window["replica_id"].isin(dead), "running"] == 0).all()
    later = reps[(reps["t_s"] > KILL_S + RECOVER_S) & reps["replica_id"].isin(dead)]
    assert (later["running"] > 0).any()  # back at work after the recovery


def test_redirected_trajectories_keep_one_version(laminar_machine):
    t = laminar_machine.trajectories
    assert not t["weight_versions"].str.contains(";").any()
    assert (t["moves"] > 0).any()


@pytest.mark.parametrize("system", ["verl", "one-step", "partial"])
def test_baselines_stop_as_one_job(system):
    base = simulate(small_config(*FOUR, f"sim.systems=[{system}]"))
    r = _run(_machine_fault(), system)
    _assert_nothing_lost(r)
    steps = r.steps
    # Nothing trains during the restart, and the run is longer by about the recovery time.
    assert not ((steps["end_s"] > KILL_S) & (steps["end_s"] < KILL_S + RECOVER_S)).any()
    assert r.summary.iloc[0]["sim_time_s"] > base.summary.iloc[0]["sim_time_s"] + 0.5 * RECOVER_S
    log = r.faults.iloc[0]
    assert log["replicas"] == len(r.replicas["replica_id"].unique())


def test_laminar_rollouts_keep_generating_while_the_trainer_is_down():
    r = _run(f"{{type: trainer, at_s: {KILL_S}, recover_s: {RECOVER_S}}}")
    _assert_nothing_lost(r)
    steps, t = r.steps, r.trajectories
    assert not ((steps["end_s"] > KILL_S) & (steps["end_s"] < KILL_S + RECOVER_S)).any()
    finished = t[(t["gen_end_s"] > KILL_S) & (t["gen_end_s"] < KILL_S + RECOVER_S)]
    assert len(finished) > 0


def test_a_relay_fault_leaves_training_almost_untouched():
    base = simulate(small_config(*FOUR, "sim.systems=[laminar]"))
    r = _run(f"{{type: relay, at_s: {KILL_S}, machine: 1, recover_s: {RECOVER_S}}}")
    _assert_nothing_lost(r)
    assert r.faults.iloc[0]["fault"] == "relay"
    slow = r.summary.iloc[0]["sim_time_s"] / base.summary.iloc[0]["sim_time_s"]
    assert slow < 1.1


def test_relay_readers_freeze_during_the_rebuild_then_read_upstream():
    cfg = small_config(*FOUR)
    system = Laminar(cfg)
    from laminar.sim.api import load_run_workload

    cluster = Cluster(cfg, system, cost_model_for(cfg), load_run_workload(cfg))
    env, relay = cluster.env, cluster.relay
    env.run(until=1.0)
    relay.publish(1)
    env.run(until=2.0)
    dead = relay.chain.nodes[1]
    relay.fail(dead, rebuild_chain(relay.chain, {dead}), 1.0, 10.0)
    relay.publish(2)
    env.run(until=2.5)
    assert relay.version_at(1) == 1  # frozen while the chain is rebuilt
    assert relay.version_at(2) == 1  # the broadcast waits for the rebuilt chain
    env.run(until=4.0)
    assert relay.version_at(1) == 2  # served by its upstream survivor (the master)
    assert relay.version_at(2) == 2


def test_faults_on_a_missing_machine_are_a_config_error():
    from laminar.errors import ConfigError

    with pytest.raises(ConfigError, match=r"faults\.events"):
        _run("{type: rollout_machine, at_s: 1, machine: 9}")


def test_a_run_cut_before_its_window_reports_no_rates():
    # A fault can leave a run without a step after the warm-up when it is cut by max time.
    r = simulate(small_config("sim.warmup_steps=1", "sim.max_sim_time_s=12",
                              "sim.systems=[verl]"))  # fmt: skip
    row = r.summary.iloc[0]
    assert row["steps"] == 1 and row["train_tokens_per_s"] != row["train_tokens_per_s"]  # NaN
