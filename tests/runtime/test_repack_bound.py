"""§8.4 in the runtime: the rollout manager's snapshots carry the step cost and
``repack.max_step_slowdown`` it was given, and the policy's bound then holds moves back."""

from __future__ import annotations

import asyncio
import math

from laminar.policy.repack import StepCost
from tests.runtime import harness
from tests.runtime.test_system import _repack_scenario, _spy


def _run(tmp_path, monkeypatch, step_cost, slowdown):
    calls = _spy(monkeypatch)
    s = harness.build(tmp_path, n=2, max_batch=8, step_s=0.002)
    s.manager.step_cost, s.manager.max_step_slowdown = step_cost, slowdown
    asyncio.run(_repack_scenario(s, calls))
    return calls


def test_snapshots_carry_the_bound_and_a_tight_one_blocks_moves(tmp_path, monkeypatch):
    # 1 s per step plus 1 s per cached token: any destination holding a trajectory already
    # steps far above 2 x its fastest step, so nothing may move there.
    tight = StepCost(1.0, 0.0, 1.0)
    calls = _run(tmp_path / "tight", monkeypatch, tight, 2.0)
    states = [st for sts, _ in calls for st in sts]
    assert states and all(st.step_cost == tight and st.max_step_slowdown == 2.0 for st in states)
    assert not [m for _, moves in calls for m in moves]


def test_without_a_step_cost_only_capacity_and_b_bound_moves(tmp_path, monkeypatch):
    calls = _run(tmp_path / "none", monkeypatch, None, math.inf)
    assert all(st.step_cost is None for states, _ in calls for st in states)
    assert [m for _, moves in calls for m in moves], "the long tails should have been repacked"


def test_a_run_records_the_bound_repack_ran_with(tmp_path):
    """Without a cost file the manager has no step model, so repack ran unbounded: the run's
    config.yaml says so (``as_ran``), and simulating it predicts that job. With one the
    configured bound stays."""
    from laminar.config import load_config, write_resolved
    from laminar.runtime.data.manager import as_ran

    cfg = load_config(preset="tiny-cpu")
    assert not cfg.sim.cost_file and cfg.repack.max_step_slowdown > 0
    write_resolved(as_ran(cfg), tmp_path)
    assert load_config(tmp_path / "config.yaml").repack.max_step_slowdown == 0
    cost = tmp_path / "cost.json"
    cost.write_text("{}")
    bounded = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}"])
    assert as_ran(bounded) is bounded
