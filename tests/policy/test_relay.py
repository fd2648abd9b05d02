"""laminar.policy.relay: the App. D broadcast model and chain rebuilding (§4.3)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laminar.policy.relay import (
    Chain,
    broadcast_time,
    choose_master,
    optimal_chunks,
    plan_chain,
    rebuild_chain,
)


def test_broadcast_time_formula():
    # p=4, k=2: (4 + 2 - 2) * (1 + 0.5 * 100 / 2) = 4 * 26
    assert broadcast_time(4, 2, 100, 1.0, 0.5) == pytest.approx(104.0)
    assert broadcast_time(1, 3, 100, 1.0, 0.5) == 0.0
    with pytest.raises(ValueError):
        broadcast_time(0, 1, 1, 1, 1)


@settings(max_examples=300, deadline=None)
@given(
    p=st.integers(1, 200),
    nbytes=st.integers(0, 10**6),
    alpha=st.floats(1e-7, 1e-2),
    beta=st.floats(1e-11, 1e-7),
)
def test_optimal_chunks_equals_brute_force(p, nbytes, alpha, beta):
    k = optimal_chunks(p, nbytes, alpha, beta, max_chunks=4000)
    times = [broadcast_time(p, j, nbytes, alpha, beta) for j in range(1, 4001)]
    best = min(times)
    assert broadcast_time(p, k, nbytes, alpha, beta) <= best * (1 + 1e-12)


def test_optimal_chunks_near_sqrt_rule():
    p, m, a, b = 128, 140e9, 5e-6, 1 / 50e9
    k = optimal_chunks(p, m, a, b)
    assert abs(k - math.sqrt((p - 2) * b * m / a)) <= 1


def test_two_nodes_or_free_startup():
    assert optimal_chunks(2, 1e9, 1e-5, 1e-9) == 1
    assert optimal_chunks(8, 1000, 0.0, 1e-9) == 1000


def test_plan_chain_is_deterministic_and_natural_ordered():
    ids = ["relay-10", "relay-2", "relay-1", "relay-3"]
    c = plan_chain(ids, "relay-3")
    assert c == Chain("relay-3", ("relay-1", "relay-2", "relay-10"))
    assert plan_chain(reversed(ids), "relay-3") == c
    assert c.p == 4 and c.upstream("relay-2") == "relay-1" and c.downstream("relay-10") is None
    with pytest.raises(ValueError):
        plan_chain(ids, "relay-9")


def test_rebuild_drops_failed_and_keeps_order():
    c = plan_chain([f"r{i}" for i in range(6)], "r0")
    assert rebuild_chain(c, {"r2", "r4"}) == Chain("r0", ("r1", "r3", "r5"))


def test_rebuild_elects_next_downstream_as_master():
    c = plan_chain([f"r{i}" for i in range(4)], "r0")
    assert rebuild_chain(c, {"r0", "r1"}) == Chain("r2", ("r3",))
    with pytest.raises(ValueError):
        rebuild_chain(c, set(c.nodes))


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 40), min_size=1), st.data())
def test_rebuild_invariants(ids, data):
    names = [f"n{i}" for i in sorted(ids)]
    chain = plan_chain(names, names[0])
    failed = set(data.draw(st.sets(st.sampled_from(names))))
    if failed == set(names):
        return
    new = rebuild_chain(chain, failed)
    assert set(new.nodes) == set(names) - failed
    # relative order of survivors is preserved
    assert list(new.nodes) == [n for n in chain.nodes if n not in failed]


def test_choose_master_prefers_the_trainers_machine():
    machines = {"relay-10": "m1", "relay-2": "m1", "relay-3": "m0"}
    assert choose_master(machines, "m1") == "relay-2"  # natural order among local relays
    assert choose_master(machines, "m0") == "relay-3"
    assert choose_master(machines, "elsewhere") == "relay-2"
    with pytest.raises(ValueError):
        choose_master({}, "m0")
