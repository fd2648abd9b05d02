"""Components against the policy layer: relay arrival times, repack plans carried out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import simpy

import laminar.sim.manager as manager_mod
from laminar.policy.relay import broadcast_time, optimal_chunks
from laminar.sim import simulate
from laminar.sim.costdata import derive
from laminar.sim.relay import RelayChain

from .conftest import small_config


def _chain(machines, chunks=0):
    env = simpy.Environment()
    cost = derive("h800", "qwen2.5-72b", tp=4)
    cfg = SimpleNamespace(relay=SimpleNamespace(chunks=chunks))
    return env, cost, RelayChain(SimpleNamespace(env=env, cost=cost, cfg=cfg), machines)


def test_relay_positions_receive_at_the_policy_broadcast_time():
    env, cost, relay = _chain(list(range(3, 131)))  # 128 rollout machines
    p, m, alpha, beta = 128, cost.weight_bytes, cost.rdma_startup_s, 1 / cost.rdma_bytes_per_s
    k = optimal_chunks(p, m, alpha, beta)
    assert relay.k == k and relay.position_of(3) == 0 and relay.position_of(130) == 127
    env.run(until=10.0)
    relay.publish(1)
    assert relay.version_at(0) == 1  # the master holds it at once
    for pos in (1, 64, 127):
        arrive = 10.0 + broadcast_time(pos + 1, k, m, alpha, beta)
        env.run(until=arrive - 1e-6)
        assert relay.version_at(pos) == 0
        env.run(until=arrive + 1e-9)
        assert relay.version_at(pos) == 1
        assert relay.ready_s(pos, 1) == pytest.approx(arrive)
    # Paper §4.2: 72B to 127 relays in under 1.6 s.
    assert relay.broadcast_s < 1.6


def test_a_version_published_mid_broadcast_waits_and_only_the_newest_goes():
    env, _, relay = _chain(list(range(16)), chunks=4)
    relay.publish(1)
    env.run(until=relay.broadcast_s / 2)
    relay.publish(2)
    relay.publish(3)
    env.run(until=3 * relay.broadcast_s)
    assert [v for v, _ in relay.broadcasts] == [0, 1, 3]
    assert relay.broadcasts[2][1] == pytest.approx(relay.broadcast_s)
    assert relay.version_at(15) == 3


def test_a_rebuilt_chain_relinks_positions():
    from laminar.policy.relay import rebuild_chain

    _, _, relay = _chain(list(range(8)))
    before = relay.broadcast_s
    relay.set_chain(rebuild_chain(relay.chain, {"relay-0", "relay-3"}))
    assert relay.chain.master == "relay-1" and relay.position_of(1) == 0
    assert relay.position_of(4) == 2 and 3 not in relay.position
    assert relay.broadcast_s < before


def test_manager_carries_out_exactly_the_policy_plan(monkeypatch):
    plans = []
    real = manager_mod.plan_repack

    def spy(states):
        moves = real(states)
        plans.append((states, moves))
        return moves

    monkeypatch.setattr(manager_mod, "plan_repack", spy)
    result = simulate(small_config("sim.rollout_batch_prompts=2"))
    moves = [m for _, ms in plans for m in ms]
    assert plans and moves
    assert result.summary.iloc[0]["repack_moves"] == len(moves)
    assert result.trajectories["moves"].sum() == sum(len(m.traj_ids) for m in moves)
    for states, ms in plans:
        version = {s.replica_id: s.weight_version for s in states}
        for m in ms:  # never across versions (§5.1), and the source is emptied whole
            assert version[m.src] == version[m.dst]
            src = next(s for s in states if s.replica_id == m.src)
            assert sorted(m.traj_ids) == sorted(t.traj_id for t in src.trajectories)


def test_a_system_is_a_policy_over_the_same_mechanism(monkeypatch):
    """A partial-rollout-like system in a few lines: interrupt in-flight trajectories at each
    update, reload weights, re-prefill, record mixed versions (issue 5 builds on this)."""
    from laminar.sim import systems

    class Interrupting(systems.System):
        name = "interrupting"
        interrupt_on_update = True

        def after_update(self, cluster, version):
            for r in cluster.replicas:
                r.requeue_running()
                for t in r.waiting:  # every in-flight trajectory continues under `version`
                    t.versions = (*(t.versions or (t.version,)), version)
                r.version = version
                r.wake()

    monkeypatch.setitem(systems.SYSTEMS, "interrupting", Interrupting)
    res = simulate(small_config("sim.systems=[laminar, interrupting]"))
    s = res.summary.set_index("system")
    assert s.loc["interrupting", "reprefill_tokens"] > s.loc["laminar", "reprefill_tokens"]
    t = res.trajectories[res.trajectories["system"] == "interrupting"]
    mixed = t[t["weight_versions"].str.contains(";")]
    assert len(mixed) > 0
    assert (
        mixed["weight_version"] == mixed["weight_versions"].str.split(";").str[0].astype(int)
    ).all()
    # Tokens are still conserved: re-prefill recomputes KV, it does not decode again.
    assert t["generated_tokens"].sum() == s.loc["interrupting", "decoded_tokens"]
    consumed = t[t["consumed_version"] >= 0]
    assert (
        consumed["staleness"] == consumed["consumed_version"] - consumed["weight_version"]
    ).all()
