"""The one-step system's last step pays what every other step pays (issue 30, item 6).

Each one-step update waits for the batch generated meanwhile, then syncs the weights to every
rollout. The last step used to skip both (no further batch was generated), so a short run
reported the system too fast.
"""

from __future__ import annotations

import pytest

from laminar.sim import simulate

from .conftest import small_config

STEPS = 5


def _constant_trace(path) -> str:
    """Every trajectory alike: every global batch generates and trains in the same time."""
    rows = ["step,prompt_id,sample_index,prompt_len,response_len,finish_reason"]
    for step in range(2):
        for p in range(6):
            rows += [f"{step},{step * 6 + p},{i},100,600,stop" for i in range(4)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    trace = _constant_trace(tmp_path_factory.mktemp("trace") / "constant.csv")
    cfg = small_config(
        "sim.systems=[one-step]",
        f"workload.steps={STEPS}",
        "sim.warmup_steps=0",
        f"workload.source={{type: trace, path: '{trace}'}}",
    )
    return simulate(cfg)


def test_the_last_step_syncs_like_every_other(steps):
    s = steps.steps
    assert (s["actor_stall_s"] > 0).all()
    assert s["weight_sync_s"].tolist() == pytest.approx([s["weight_sync_s"][0]] * STEPS)


def test_the_last_step_takes_as_long_as_the_others(steps):
    """With identical batches, steps 1.. are identical: train, wait for the next batch, sync
    (step 0 also waits for the first batch)."""
    t = steps.steps["step_time_s"].tolist()
    assert t[-1] == pytest.approx(t[1], rel=1e-9)
    assert t[1:] == pytest.approx([t[1]] * (STEPS - 1), rel=1e-9)


def test_the_batch_after_the_last_is_generated_and_not_trained(steps):
    """The pipeline keeps its one batch of lookahead to the end, as a longer run would."""
    t, s = steps.trajectories, steps.steps
    ahead = t[t["weight_version"] == STEPS - 1]
    assert len(ahead) == 6 * 4  # one global batch, on the weights of step STEPS - 2
    assert (ahead["consumed_version"] == -1).all()
    assert ahead["gen_end_s"].max() <= s["end_s"].iloc[-1]
