"""Invariants of laminar.policy.repack (paper §5.2), as stated at the top of that module."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laminar.policy.repack import (
    Move,
    ReplicaState,
    StepCost,
    TrajectoryState,
    is_candidate,
    kv_falling,
    plan_repack,
)


def rep(rid, version=0, cap=1000, used=None, prev=None, batch=8, lens=(), cost=None, slow=math.inf):
    trajs = tuple(TrajectoryState(f"{rid}/t{i}", n) for i, n in enumerate(lens))
    used = sum(lens) if used is None else used
    prev = used + 1 if prev is None else prev
    return ReplicaState(rid, version, cap, used, prev, batch, trajs, cost, slow)


@st.composite
def step_bounds(draw):
    """No step model (capacity and B only), or a linear one with a slowdown bound."""
    if draw(st.booleans()):
        return None, math.inf
    base, per_seq = draw(st.floats(0.0, 10.0)), draw(st.floats(0.0, 2.0))
    if base + per_seq <= 0:
        base = 1.0  # a step takes time
    cost = StepCost(base, per_seq, draw(st.floats(0.0, 0.1)))
    return cost, draw(st.one_of(st.just(math.inf), st.floats(1.0, 6.0)))


@st.composite
def replicas(draw):
    n = draw(st.integers(0, 12))
    out = []
    for i in range(n):
        cap = draw(st.integers(50, 400))
        lens = draw(st.lists(st.integers(1, 120), max_size=6))
        used = min(cap, sum(lens))
        prev = draw(st.one_of(st.just(used + 10), st.integers(0, cap + 50)))
        cost, slow = draw(step_bounds())
        out.append(
            rep(
                f"r{i}",
                version=draw(st.integers(0, 2)),
                cap=cap,
                used=used,
                prev=prev,
                batch=draw(st.integers(1, 8)),
                lens=lens,
                cost=cost,
                slow=slow,
            )
        )
    return out


def step_ok(d: ReplicaState, load: int, count: int) -> bool:
    """§8.4 bound, written out: the merged step within max_step_slowdown x the fastest step."""
    c = d.step_cost
    if c is None:
        return True
    merged = c.base_s + count * c.per_seq_s + load * c.per_kv_token_s
    return merged <= d.max_step_slowdown * (c.base_s + c.per_seq_s)


def test_candidate_needs_falling_kv_and_room_in_batch():
    assert is_candidate(rep("a", used=10, prev=20, lens=(10,)))
    assert not is_candidate(rep("a", used=10, prev=10, lens=(10,)))  # flat: still busy
    assert not is_candidate(rep("a", used=30, prev=20, lens=(30,)))  # rising: waiting queue
    assert not is_candidate(rep("a", cap=10, used=10, prev=20, lens=(10,)))  # at capacity
    assert not is_candidate(rep("a", batch=2, used=2, prev=9, lens=(1, 1)))  # B trajectories


@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 50), st.integers(0, 4))
def test_kv_falling_is_the_kv_half_of_is_candidate(used, prev, cap, n_trajs):
    # The simulator's manager asks kv_falling on replicas holding fewer than B trajectories
    # before it builds a full snapshot: the two must agree there.
    r = rep("a", cap=cap, used=used, prev=prev, batch=5, lens=(1,) * n_trajs)
    assert kv_falling(used, prev, cap) == is_candidate(r)


def test_smallest_source_goes_to_the_fullest_destination_that_fits():
    rs = [
        rep("small", lens=(50,)),
        rep("mid", lens=(300, 100)),
        rep("full", lens=(900,)),  # 900 + 50 fits, + 400 does not
    ]
    moves = plan_repack(rs)
    assert moves[0] == Move("small", "full", ("small/t0",))
    # "mid" (400) can go nowhere now: "full" holds 950 and "small" was emptied.
    assert len(moves) == 1


def test_receiver_is_not_a_source_afterwards_and_dst_can_take_several():
    rs = [rep("a", lens=(10,)), rep("b", lens=(20,)), rep("c", lens=(500,))]
    moves = plan_repack(rs)
    assert [(m.src, m.dst) for m in moves] == [("a", "c"), ("b", "c")]


def test_never_across_versions():
    rs = [rep("a", version=1, lens=(10,)), rep("b", version=2, lens=(20,))]
    assert plan_repack(rs) == []


def test_capacity_pruned_destination_can_still_be_a_source():
    # "x" is too full for "y" (pruned as a destination) but later moves whole to "z".
    rs = [
        rep("y", cap=1000, lens=(100,)),
        rep("x", cap=950, lens=(150, 100)),
        rep("z", cap=2000, lens=(1000,)),
    ]
    moves = plan_repack(rs)
    assert [(m.src, m.dst) for m in moves] == [("y", "z"), ("x", "z")]


@settings(max_examples=400, deadline=None)
@given(replicas())
def test_invariants(rs):
    moves = plan_repack(rs)
    by_id = {r.replica_id: r for r in rs}
    load = {r.replica_id: r.kv_used_tokens for r in rs}
    count = {r.replica_id: len(r.trajectories) for r in rs}
    moved_ids: list[str] = []
    srcs, dsts = set(), set()
    for m in moves:
        s, d = by_id[m.src], by_id[m.dst]
        assert is_candidate(s) and is_candidate(d), "non-candidates are untouched"
        assert s.weight_version == d.weight_version, "never across versions"
        assert m.traj_ids == tuple(t.traj_id for t in s.trajectories), "source moves whole"
        assert m.src not in srcs and m.src not in dsts, "a receiver is not a source afterwards"
        assert m.dst not in srcs, "an emptied replica receives nothing"
        srcs.add(m.src)
        dsts.add(m.dst)
        moved_ids += m.traj_ids
        load[m.dst] += s.footprint_tokens
        count[m.dst] += len(s.trajectories)
        assert load[m.dst] <= d.kv_capacity_tokens, "never over KV capacity"
        assert count[m.dst] <= d.max_batch, "never over the batch bound"
        assert step_ok(d, load[m.dst], count[m.dst]), "the step bound is honoured (§8.4)"
    assert len(moved_ids) == len(set(moved_ids)), "no trajectory moves twice"
    assert plan_repack(rs) == moves, "same input, same plan"
    assert plan_repack(list(reversed(rs))) == moves, "input order does not matter"


def brute_force_dst(rs, src, taken_load, taken_count, emptied):
    """Reference best fit for one source: scan all, fullest after the merge, ties by id."""
    best = None
    for d in rs:
        if d.replica_id in emptied or d.replica_id == src.replica_id:
            continue
        if d.weight_version != src.weight_version or not is_candidate(d) or not d.trajectories:
            continue
        after = taken_load[d.replica_id] + src.footprint_tokens
        if after > d.kv_capacity_tokens:
            continue
        if taken_count[d.replica_id] + len(src.trajectories) > d.max_batch:
            continue
        if not step_ok(d, after, taken_count[d.replica_id] + len(src.trajectories)):
            continue
        key = (-after, d.replica_id)
        if best is None or key < best[0]:
            best = (key, d.replica_id)
    return None if best is None else best[1]


@settings(max_examples=300, deadline=None)
@given(replicas())
def test_matches_the_quadratic_reference(rs):
    """The sorted, pruned search picks the same destinations as the plain O(|S|^2) best fit."""
    expected: list[tuple[str, str]] = []
    load = {r.replica_id: r.kv_used_tokens for r in rs}
    count = {r.replica_id: len(r.trajectories) for r in rs}
    received, emptied = set(), set()
    cands = [r for r in rs if r.trajectories and is_candidate(r)]
    for s in sorted(cands, key=lambda r: (r.weight_version, r.footprint_tokens, r.replica_id)):
        if s.replica_id in received:
            continue
        d = brute_force_dst(rs, s, load, count, emptied)
        if d is None:
            continue
        expected.append((s.replica_id, d))
        emptied.add(s.replica_id)
        received.add(d)
        load[d] += s.footprint_tokens
        count[d] += len(s.trajectories)
    assert [(m.src, m.dst) for m in plan_repack(rs)] == expected


def test_step_bound_sends_a_source_to_a_destination_that_stays_fast():
    # One second per step plus 0.01 s per cached token: "full" would step at 10.5 s after the
    # merge (> 2 x 1 s), "light" at 2.5 s; best fit alone would pick "full".
    cost = StepCost(1.0, 0.0, 0.01)
    rs = [
        rep("src", lens=(50,), cost=cost, slow=3.0),
        rep("light", lens=(100,), cost=cost, slow=3.0),
        rep("full", lens=(900,), cost=cost, slow=3.0),
    ]
    assert plan_repack(rs) == [Move("src", "light", ("src/t0",))]
    unbounded = [rep(r.replica_id, lens=[t.kv_tokens for t in r.trajectories]) for r in rs]
    assert plan_repack(unbounded)[0] == Move("src", "full", ("src/t0",))


def test_step_bound_counts_sequences_too():
    # Per-sequence cost only: a destination may hold at most 3 sequences (3 s <= 3 x 1 s).
    cost = StepCost(0.0, 1.0, 0.0)
    rs = [rep("a", lens=(5, 5), cost=cost, slow=3.0), rep("b", lens=(5,), cost=cost, slow=3.0)]
    assert [(m.src, m.dst) for m in plan_repack(rs)] == [("b", "a")]
    rs = [rep("a", lens=(5, 5), cost=cost, slow=3.0), rep("b", lens=(5, 5), cost=cost, slow=3.0)]
    assert plan_repack(rs) == []


def test_bad_bounds_are_rejected():
    with pytest.raises(ValueError, match="max_step_slowdown"):
        rep("a", slow=0.5)
    with pytest.raises(ValueError, match="step cost"):
        StepCost(0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="step cost"):
        StepCost(-1.0, 1.0, 0.0)
