"""Multi-turn trajectories (``laminar.sim.turns``): turns, waits, single-turn identity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.sim import simulate
from laminar.sim.turns import turn_end
from laminar.traces import load_workload

from .conftest import small_config

# The small machine with tool-calling lengths: 24 trajectories a step, up to 8 turns each.
TOOLS = [
    "workload.source.preset=tool-calling",
    "workload.max_response_len=4096",
    "workload.steps=6",
    "sim.warmup_steps=2",
]


def _run(systems: str, workload: pd.DataFrame | None = None, *extra: str):
    cfg = small_config(*TOOLS, f"sim.systems=[{systems}]", *extra)
    if workload is None:
        workload = load_workload(cfg)
    return simulate(cfg, workload=workload)


def _tools(scale: float = 1.0) -> pd.DataFrame:
    """The tool-calling workload with its per-call latencies multiplied by ``scale``."""
    df = load_workload(small_config(*TOOLS)).copy()
    df["tool_latency_s"] = df["tool_latency_s"] * scale
    return df


def _tput(result, system: str) -> float:
    s = result.summary.set_index("system")
    return float(s.loc[system, "train_tokens_per_s"])


def test_turn_ends_split_the_response_evenly():
    assert [turn_end(k, 4, 10) for k in range(4)] == [2, 5, 7, 10]
    assert [turn_end(k, 1, 10) for k in range(1)] == [10]
    assert [turn_end(k, 3, 2) for k in range(3)] == [0, 1, 2]  # an empty first turn


def test_single_turn_traces_run_as_before():
    """turns == 1 everywhere (with latencies) gives the tables of a trace without the columns."""
    cfg = small_config(*TOOLS, "sim.systems=[laminar,verl,partial]")
    plain = load_workload(cfg).drop(columns=["turns", "tool_latency_s"])
    ones = plain.assign(turns=1, tool_latency_s=5.0)
    assert_same_as_single_turn(simulate(cfg, workload=plain), simulate(cfg, workload=ones))


def assert_same_as_single_turn(plain, ones, *, replicas: bool = False) -> None:
    """``ones`` (a trace with ``turns`` 1 everywhere) gave exactly ``plain``'s tables (the
    trace without the tool columns): summary, steps, trajectories (less those columns, and no
    environment wait), and with ``replicas`` the replica series."""
    for table in ("summary", "steps", *(("replicas",) if replicas else ())):
        pd.testing.assert_frame_equal(getattr(plain, table), getattr(ones, table),
                                      check_exact=True)  # fmt: skip
    pd.testing.assert_frame_equal(
        plain.trajectories, ones.trajectories.drop(columns=["turns", "tool_latency_s"]),
        check_exact=True,
    )
    assert "env_wait_s" not in ones.trajectories


@pytest.mark.parametrize("systems", ["laminar,verl,partial", "one-step,stream"])
def test_each_trajectory_waits_its_calls(systems):
    """A finished trajectory waited (turns - 1) x tool_latency_s on its environment, and was
    generated on one weight version unless the system mixes them (partial)."""
    r = _run(systems)
    tr = r.trajectories
    done = tr[tr["gen_end_s"].notna()]
    assert (done["turns"] > 1).mean() > 0.3  # the preset makes calls
    expect = (done["turns"] - 1) * done["tool_latency_s"]
    np.testing.assert_allclose(done["env_wait_s"], expect, rtol=0, atol=1e-6)
    assert (done["generated_tokens"] == done["response_len"]).all()
    # a trajectory spends at least its waits between its start and its end
    assert (done["gen_end_s"] - done["gen_start_s"] >= expect - 1e-6).all()
    single = done[done["system"] != "partial"]
    assert not single["weight_versions"].str.contains(";").any()


def test_latency_lengthens_synchronous_steps():
    r0, r1 = _run("verl", _tools(0.0)), _run("verl", _tools(1.0))
    t0 = r0.steps["step_time_s"].mean()
    t1 = r1.steps["step_time_s"].mean()
    assert t1 > t0 * 1.05
    assert r1.trajectories["env_wait_s"].sum() > 0 == r0.trajectories["env_wait_s"].sum()


def test_laminar_gains_over_verl_grow_with_environment_latency():
    """Paper §2.2, §8.1: unpredictable environment latency is where trajectory-level
    asynchrony pays; a synchronous step waits for its slowest conversation."""
    ratios = []
    for scale in (0.0, 1.0, 4.0):
        r = _run("laminar,verl", _tools(scale))
        ratios.append(_tput(r, "laminar") / _tput(r, "verl"))
    assert ratios[0] < ratios[1] < ratios[2]


def test_waiting_replica_holds_its_trajectories_through_repack_and_faults():
    """Repack checks every second and a rollout machine dies mid-run: every trajectory still
    finishes, with its tokens, and no replica refilled while holding one away."""
    fault = "{type: rollout_machine, at_s: 20.0, machine: 0, recover_s: 15.0}"
    cfg = small_config(*TOOLS, "sim.systems=[laminar]", "cluster.gpus=16",
                       "repack.interval_s=1.0", f"faults.events=[{fault}]")  # fmt: skip
    r = simulate(cfg)
    tr = r.trajectories
    assert len(r.steps) == 6
    done = tr[tr["consumed_version"] >= 0]
    assert (done["generated_tokens"] == done["response_len"]).all()
    assert (done["env_wait_s"] <= (done["turns"] - 1) * done["tool_latency_s"] + 1e-6).all()
