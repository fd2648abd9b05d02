"""Each baseline's defining behaviour (issue 5, "Done when"), on the small shared config."""

from __future__ import annotations

import pytest

from laminar.sim import simulate
from laminar.sim.registry import all_systems, resolve_systems

from .conftest import small_config

SYSTEMS = ["laminar", "verl", "one-step", "stream", "partial"]


@pytest.fixture(scope="module")
def run():
    return simulate(small_config(f"sim.systems=[{', '.join(SYSTEMS)}]", "workload.steps=6"))


def _of(frame, system):
    return frame[frame["system"] == system]


def _consumed(run, system):
    t = _of(run.trajectories, system)
    return t[t["consumed_version"] >= 0]


def test_all_names_every_system():
    assert [s.name for s in resolve_systems(["all"])] == SYSTEMS
    assert set(all_systems()) == set(SYSTEMS)


def test_every_system_trains_every_step_on_whole_batches(run):
    w = run.config.workload
    per_step = w.prompts_per_step * w.samples_per_prompt
    for system in SYSTEMS:
        c = _consumed(run, system)
        assert c["traj_id"].is_unique
        assert (c.groupby("consumed_version")["traj_id"].count() == per_step).all(), system
        assert len(_of(run.steps, system)) == w.steps
        assert (c["consumed_s"] >= c["gen_end_s"]).all()


def test_laminar_generates_every_trajectory_with_one_version(run):
    t = _of(run.trajectories, "laminar")
    assert not t["weight_versions"].str.contains(";").any()


def test_verl_steps_are_gated_by_their_longest_trajectory(run):
    steps = _of(run.steps, "verl").set_index("version")
    c = _consumed(run, "verl")
    for version, batch in c.groupby("consumed_version"):
        step = steps.loc[version + 1]
        # Training starts the moment the batch's slowest trajectory is done ...
        assert step["start_s"] == pytest.approx(batch["gen_end_s"].max())
        assert (batch["staleness"] == 0).all()
        # ... and the next batch starts only after training and the weight update.
        later = c[c["consumed_version"] == version + 1]
        if len(later):
            assert later["gen_start_s"].min() >= step["end_s"] - 1e-9
    row = _of(run.summary, "verl").iloc[0]
    assert row["trainer_gpus"] == row["rollout_gpus"] == run.config.cluster.gpus  # colocated


def test_one_step_staleness_is_exactly_one(run):
    c = _consumed(run, "one-step")
    assert (c.loc[c["consumed_version"] == 0, "staleness"] == 0).all()
    assert (c.loc[c["consumed_version"] >= 1, "staleness"] == 1).all()
    # Batch i+1 is generated while the trainer trains on batch i.
    steps = _of(run.steps, "one-step").set_index("step")
    nxt = c[c["consumed_version"] == 1]
    assert nxt["gen_start_s"].min() < steps.loc[0, "start_s"] + steps.loc[0, "train_s"]


def test_stream_trains_during_the_generation_tail_on_policy(run):
    c = _consumed(run, "stream")
    assert (c["staleness"] == 0).all()
    steps = _of(run.steps, "stream")
    # Part of each step's training happened before its last group was complete.
    busy = steps["end_s"] - steps["actor_stall_s"] - steps["start_s"]
    assert (busy < steps["train_s"] - 1e-9).any()


@pytest.mark.parametrize("eta", [0, 1, 2])
def test_partial_rollout_bounds_staleness_and_mixes_versions(eta):
    r = simulate(small_config("sim.systems=[partial]", "workload.steps=6",
                              f"baselines.partial_eta={eta}"))  # fmt: skip
    t = r.trajectories
    c = t[t["consumed_version"] >= 0]
    assert c["staleness"].max() <= eta
    mixed = c[c["weight_versions"].str.contains(";")]
    if eta == 0:  # the bound binds: only groups the current version consumes may start
        assert len(mixed) == 0
        return
    assert c["staleness"].max() == 1  # this workload never needs more than one version back
    assert len(mixed) > 0  # some trajectories span two (or more) versions
    for versions, oldest in zip(mixed["weight_versions"], mixed["weight_version"], strict=True):
        vs = [int(v) for v in versions.split(";")]
        assert vs == sorted(set(vs)) and vs[0] == oldest
    assert r.summary.iloc[0]["reprefill_tokens"] > 0  # interrupted KV is rebuilt


def test_baselines_load_weights_globally_and_never_repack(run):
    for system in SYSTEMS[1:]:
        row = _of(run.summary, system).iloc[0]
        assert row["repack_moves"] == 0
        reps = _of(run.replicas, system)
        # A global sync: at any moment every replica holds the same version or is one behind
        # while the sync propagates; never two versions apart.
        spread = reps.groupby("t_s")["weight_version"].agg(lambda v: v.max() - v.min())
        assert spread.max() <= 1, system


def test_same_workload_for_every_system(run):
    keys = ["step", "prompt_id", "sample_index"]
    lengths = [_of(run.trajectories, s).set_index(keys)["response_len"] for s in SYSTEMS]
    for other in lengths[1:]:
        common = lengths[0].index.intersection(other.index)
        assert len(common) > 0
        assert (lengths[0].loc[common] == other.loc[common]).all()


def _groups(t):
    """Each prompt group's replica, start (its trajectories are handed out together) and end
    (its last trajectory's; never, if it did not finish)."""
    g = t.groupby("group_id").agg(replica=("replica_id", "first"), start=("gen_start_s", "min"),
                                  end=("gen_end_s", "max"))  # fmt: skip
    return g.fillna({"end": float("inf")})


def _most_in_flight(g) -> int:
    """Most groups started and not complete at one moment (an end before a start at a tie)."""
    events = sorted([(s, 1) for s in g["start"]] + [(e, -1) for e in g["end"]])
    now = most = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most


@pytest.mark.parametrize("cap", [0, 3, 12])
def test_partial_keeps_its_groups_in_flight_within_the_cap(cap):
    """AReaL's max_concurrent_rollouts (default: its consumer batch) and NeMo RL's collector
    (prompts_per_step x max age): at most ``cap`` groups generate at once, and the cap binds."""
    r = simulate(small_config("sim.systems=[partial]", "workload.steps=6", "sim.max_batch=64",
                              f"baselines.partial_inflight_prompts={cap}"))  # fmt: skip
    limit = cap or r.config.workload.prompts_per_step
    assert _most_in_flight(_groups(r.trajectories)) == limit


def test_partial_tops_up_a_busy_replica_instead_of_letting_it_drain():
    """A replica takes new groups as its groups finish, while others still run on it (the
    engine admits queued sequences whenever one finishes), not only once it is empty."""
    r = simulate(small_config("sim.systems=[partial]", "workload.steps=6", "sim.max_batch=64",
                              "baselines.partial_inflight_prompts=12"))  # fmt: skip
    t = r.trajectories
    g = _groups(t)
    topped = 0
    for gid, row in g.iterrows():
        mine = t[(t["replica_id"] == row["replica"]) & (t["group_id"] != gid)]
        if ((mine["gen_start_s"] < row["start"]) & (mine["gen_end_s"] > row["start"])).any():
            topped += 1
    assert topped > len(g) // 4
    # and a replica never holds more than sim.max_batch sequences by taking them
    reps = r.replicas
    assert (reps["running"] <= 64).all()
