"""§8.4 in the simulator: snapshots carry the cost model's decode-step cost and the configured
``repack.max_step_slowdown``, every plan it carries out honours the bound, and the runtime's
snapshot builder reads the same step cost from the same cost file."""

from __future__ import annotations

import math

import pytest

import laminar.sim.manager as manager_mod
from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.policy.repack import StepCost
from laminar.runtime.data.manager import replica_state, step_cost_from_file
from laminar.sim import simulate
from laminar.sim.costdata import cost_model_for

from .conftest import small_config, write_cost_file


def _plans(monkeypatch):
    plans = []
    real = manager_mod.plan_repack

    def spy(states):
        moves = real(states)
        plans.append((states, moves))
        return moves

    monkeypatch.setattr(manager_mod, "plan_repack", spy)
    return plans


@pytest.mark.parametrize("slowdown", [1.02, 1.5])
def test_sim_plans_honour_the_step_bound(monkeypatch, tight_kv_cost, slowdown):
    plans = _plans(monkeypatch)
    cfg = small_config(
        f"sim.cost_file={tight_kv_cost}", "sim.rollout_batch_prompts=2",
        f"repack.max_step_slowdown={slowdown}",
    )  # fmt: skip
    simulate(cfg)
    cost = cost_model_for(cfg)
    expected = StepCost(cost.decode_base_s, cost.decode_per_seq_s, cost.decode_per_kv_token_s)
    assert plans
    for states, moves in plans:
        by_id = {s.replica_id: s for s in states}
        assert all(s.step_cost == expected and s.max_step_slowdown == slowdown for s in states)
        load = {s.replica_id: s.kv_used_tokens for s in states}
        count = {s.replica_id: len(s.trajectories) for s in states}
        for m in moves:
            src = by_id[m.src]
            load[m.dst] += src.footprint_tokens
            count[m.dst] += len(src.trajectories)
            step = cost.decode_step_s(count[m.dst], load[m.dst])
            assert step <= slowdown * cost.decode_step_s(1, 0) * (1 + 1e-12)


def test_a_tighter_bound_moves_less(monkeypatch, tight_kv_cost):
    # a bound that a destination holding half the replica's KV (3 of ~6 trajectories) reaches,
    # relative to the cost file's own step so that it binds whatever its coefficients
    cost = cost_model_for(small_config(f"sim.cost_file={tight_kv_cost}"))
    tight = cost.decode_step_s(3, 3000) / cost.decode_step_s(1, 0)
    moved = {}
    for slowdown in (0, tight):
        cfg = small_config(
            f"sim.cost_file={tight_kv_cost}", "sim.rollout_batch_prompts=2",
            f"repack.max_step_slowdown={slowdown}",
        )  # fmt: skip
        moved[slowdown] = simulate(cfg).summary.iloc[0]["moved_trajectories"]
    assert moved[0] > moved[tight]


def test_unbounded_config_means_no_step_bound():
    assert load_config(overrides=["repack.max_step_slowdown=0"]).repack.max_step_slowdown == 0
    with pytest.raises(ConfigError, match="max_step_slowdown"):
        load_config(overrides=["repack.max_step_slowdown=0.5"])


def test_runtime_snapshot_reads_the_same_step_cost(tmp_path):
    path = write_cost_file(tmp_path / "c.json")
    cfg = small_config(f"sim.cost_file={path}")
    cost = cost_model_for(cfg)
    step = step_cost_from_file(path)
    assert step == StepCost(cost.decode_base_s, cost.decode_per_seq_s, cost.decode_per_kv_token_s)
    assert step_cost_from_file("") is None
    snap = {"replica_id": "r0", "version": 3, "kv_capacity_tokens": 100, "max_batch": 4,
            "trajectories": [("a", 10), ("b", 20)]}  # fmt: skip
    st = replica_state(snap, 40, step, 1.2)
    assert (st.kv_used_tokens, st.step_cost, st.max_step_slowdown) == (30, step, 1.2)
    assert replica_state(snap, None).max_step_s == math.inf


def test_runtime_cost_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"coefficients": {"decode_base_s": {"value": 1}}}')
    with pytest.raises(ConfigError, match=r"bad\.json"):
        step_cost_from_file(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        step_cost_from_file(str(tmp_path / "missing.json"))
