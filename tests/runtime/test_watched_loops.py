"""A run whose rollout manager's loop fails or ends mid-run stops with that error at the next
poll, instead of waiting out runtime.step_timeout_s with no recovery running (a manager that
raised once left a fault run waiting until the test's 900 s timeout)."""

from __future__ import annotations

import pytest
import ray

from laminar.runtime.faults.supervisor import Supervisor


class _Ref:
    def __init__(self, done: bool, error: BaseException | None = None):
        self.done, self.error = done, error


@pytest.fixture
def fake_ray(monkeypatch):
    def wait(refs, num_returns=1, timeout=None):
        done = [r for r in refs if r.done]
        return done, [r for r in refs if not r.done]

    def get(ref):
        if ref.error is not None:
            raise ref.error
        return None

    monkeypatch.setattr(ray, "wait", wait)
    monkeypatch.setattr(ray, "get", get)


def _sup() -> Supervisor:
    sup = Supervisor.__new__(Supervisor)
    sup.watched = {}
    return sup


def test_a_running_loop_passes(fake_ray):
    sup = _sup()
    sup.check_watched()  # nothing watched
    sup.watch("rollout manager", _Ref(done=False))
    sup.check_watched()


def test_a_failed_loop_raises_its_own_error(fake_ray):
    sup = _sup()
    sup.watch("rollout manager", _Ref(done=True, error=AttributeError("no turns")))
    with pytest.raises(AttributeError, match="no turns"):
        sup.check_watched()


def test_a_loop_that_ended_is_named(fake_ray):
    sup = _sup()
    sup.watch("rollout manager", _Ref(done=False))
    sup.watch("other loop", _Ref(done=True))
    with pytest.raises(RuntimeError, match="other loop stopped before the run's end"):
        sup.check_watched()
    sup.watched.clear()  # what the loops do before stopping the manager on purpose
    sup.check_watched()
