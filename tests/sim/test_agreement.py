"""Event skipping is exact: it agrees with the one-step-per-event reference stepper."""

from __future__ import annotations

import pytest

from laminar.sim import simulate

from .conftest import small_config


def _completion_order(result):
    t = result.trajectories.dropna(subset=["gen_end_s"])
    return t.sort_values(["gen_end_s", "traj_id"], kind="stable")["traj_id"].tolist()


@pytest.mark.parametrize("tight", [False, True], ids=["roomy", "tight-kv"])
def test_event_skipping_matches_reference_stepper(tmp_path, tight):
    extra = []
    if tight:  # preemption and repack moves on the way
        from .conftest import write_cost_file

        path = write_cost_file(tmp_path / "c.json", kv_capacity_tokens=6000)
        extra = [f"sim.cost_file={path}", "sim.max_batch=8", "sim.rollout_batch_prompts=3"]
    fast = simulate(small_config(*extra))
    ref = simulate(small_config(*extra, "sim.decode=reference"))
    a, b = fast.summary.iloc[0], ref.summary.iloc[0]
    for col in ("train_tokens_per_s", "gen_tokens_per_s", "mean_kv_util", "sim_time_s"):
        assert a[col] == pytest.approx(b[col], rel=0.005), col
    assert _completion_order(fast) == _completion_order(ref)
    for col in ("preemptions", "repack_moves", "decoded_tokens", "staleness_max"):
        assert a[col] == b[col], col
    # The reference stepper really takes one event per step: far more segments recorded.
    assert len(ref.replicas) > 20 * len(fast.replicas)


def test_hand_made_workload_with_empty_and_one_token_responses():
    import pandas as pd

    lens = [0, 1, 7, 300, 0, 2, 50, 1000] * 6
    n = len(lens)
    workload = pd.DataFrame(
        {
            "step": [i // 16 for i in range(n)],
            "prompt_id": [i // 4 for i in range(n)],
            "sample_index": [i % 4 for i in range(n)],
            "prompt_len": [5 + i for i in range(n)],
            "response_len": lens,
            "finish_reason": ["stop"] * n,
        }
    )
    cfg = ["workload.prompts_per_step=4", "workload.steps=3"]
    fast = simulate(small_config(*cfg), workload=workload)
    ref = simulate(small_config(*cfg, "sim.decode=reference"), workload=workload)
    assert _completion_order(fast) == _completion_order(ref)
    done = fast.trajectories.dropna(subset=["gen_end_s"])
    assert (done["generated_tokens"] == done["response_len"]).all()
    assert fast.summary.iloc[0]["decoded_tokens"] == ref.summary.iloc[0]["decoded_tokens"]
