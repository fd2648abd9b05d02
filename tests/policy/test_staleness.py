"""laminar.policy.staleness (paper §6)."""

from __future__ import annotations

import pytest

from laminar.policy.staleness import StalenessBound, StalenessTracker, staleness


def test_staleness_uses_oldest_version():
    assert staleness(5, 3) == 2
    assert staleness(5, [4, 3, 5]) == 2
    with pytest.raises(ValueError):
        staleness(2, 3)
    with pytest.raises(ValueError):
        staleness(2, [])


def test_tracker_histogram_mean_max():
    t = StalenessTracker()
    for consumer, gen in [(3, 3), (3, 2), (4, 2), (4, [1, 3])]:
        t.record(consumer, gen)
    assert t.histogram() == {0: 1, 1: 1, 2: 1, 3: 1}
    assert t.mean() == pytest.approx(1.5)
    assert t.max() == 3 and t.n == 4
    assert StalenessTracker().mean() == 0.0


def test_bound():
    b = StalenessBound(1)
    assert b.admits(4, 3) and not b.admits(4, [2, 4])
    assert b.may_generate(5, 4) and not b.may_generate(5, 3)
    assert StalenessBound(None).admits(100, 0)


def test_record_all_matches_record_one_by_one():
    gens = [4, [2, 4], 3, 4, [1]]
    one, many = StalenessTracker(), StalenessTracker()
    assert [one.record(4, g) for g in gens] == many.record_all(4, gens) == [0, 2, 1, 0, 3]
    assert one.histogram() == many.histogram()
    with pytest.raises(ValueError):
        many.record_all(2, [1, 3])
