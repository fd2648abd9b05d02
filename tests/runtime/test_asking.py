"""``AskAgain``: after empty answers a rollout asks the prompt pool less and less often, and at
once when a newer weight version is published (the budget opens after each trainer step)."""

from __future__ import annotations

import pytest

from laminar.runtime.rollout.asking import AskAgain


def test_empty_answers_double_the_wait_up_to_the_cap():
    a = AskAgain(1.0, 4.0)  # whole seconds: exact sums
    assert a.may_ask(0.0, 0)
    a.answered(0.0, 0)
    assert not a.may_ask(0.5, 0) and a.may_ask(1.0, 0)
    a.answered(1.0, 0)  # second empty answer: wait 2
    assert not a.may_ask(2.5, 0) and a.may_ask(3.0, 0)
    a.answered(3.0, 0)  # 4
    a.answered(7.0, 0)  # capped at 4
    assert not a.may_ask(10.5, 0) and a.may_ask(11.0, 0)


def test_a_newer_version_or_groups_reset_the_wait():
    a = AskAgain(1.0, 100.0)
    a.may_ask(0.0, 3)
    for t in (0.0, 1.0, 3.0, 7.0):
        a.answered(t, 0)
    assert not a.may_ask(10.0, 3)  # waiting 8 s, until 15
    assert a.may_ask(10.0, 4)  # step ended: ask at once
    a.answered(10.0, 0)  # the budget had not opened yet: one poll, not the old wait
    assert not a.may_ask(10.5, 4) and a.may_ask(11.0, 4)
    a.answered(11.0, 2)
    assert a.may_ask(11.0, 4)  # groups came: ask whenever there is room


def test_bad_waits_are_refused():
    with pytest.raises(ValueError):
        AskAgain(0.0, 1.0)
    with pytest.raises(ValueError):
        AskAgain(0.1, 0.01)
