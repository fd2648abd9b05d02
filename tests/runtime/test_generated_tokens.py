"""summary.json's generated tokens count the rollouts that died during the run."""

from laminar.runtime.run.outputs import generated_tokens


def _result(polled, final):
    return {"manager": {"kv_series": polled}, "rollout_stats": final}


def test_a_dead_rollouts_tokens_come_from_its_last_poll():
    polled = [
        {"replica_id": "r0", "gen_tokens": 100},
        {"replica_id": "r0", "gen_tokens": 250},  # r0's last poll before it died
        {"replica_id": "r1", "gen_tokens": 40},
        {"replica_id": "r2", "gen_tokens": 5},
    ]
    final = [{"replica_id": "r1", "gen_tokens": 90}, {"replica_id": "r2", "gen_tokens": 0}]
    # r0 dead: 250 polled; r1 live: its own count at the end; r2: the larger of the two
    assert generated_tokens(_result(polled, final)) == 250 + 90 + 5


def test_every_rollout_dead_before_the_end_still_counts():
    """The flaky end-to-end failure: all trajectories generated before r0 and r1 died, their
    replacements generated nothing; the summary said 0 tokens generated."""
    polled = [{"replica_id": "r0", "gen_tokens": 700}, {"replica_id": "r1", "gen_tokens": 650}]
    final = [{"replica_id": "r2", "gen_tokens": 0}, {"replica_id": "r3", "gen_tokens": 0}]
    assert generated_tokens(_result(polled, final)) == 1350


def test_no_poll_recorded_uses_the_live_counts():
    final = [{"replica_id": "r0", "gen_tokens": 12}, {"replica_id": "r1", "gen_tokens": 30}]
    assert generated_tokens({"manager": {}, "rollout_stats": final}) == 42


def test_counts_without_a_replica_id_are_not_merged():
    final = [{"gen_tokens": 12}, {"gen_tokens": 30}]
    assert generated_tokens({"manager": {}, "rollout_stats": final}) == 42
