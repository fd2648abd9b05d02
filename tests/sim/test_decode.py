"""The closed-form segment sums equal step-by-step sums (the event-skipping model is exact)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from laminar.sim.decode import kv_integral, segment_time_s, steps_within

a_s = st.floats(1e-4, 5e-2)
c_s = st.floats(0.0, 1e-5)
n_steps = st.integers(0, 3000)


def _brute(n, a, c, kv0, b):
    t = kv = 0.0
    for j in range(n):
        step = a + c * j
        t += step
        kv += step * (kv0 + b * j)
    return t, kv


@given(n_steps, a_s, c_s, st.integers(0, 10**6), st.integers(1, 512))
def test_closed_forms_equal_the_sums(n, a, c, kv0, b):
    t, kv = _brute(n, a, c, kv0, b)
    assert abs(segment_time_s(n, a, c) - t) <= 1e-9 * max(1.0, t)
    assert abs(kv_integral(n, a, c, kv0, b) - kv) <= 1e-9 * max(1.0, kv)


@given(n_steps, a_s, c_s, st.floats(0.0, 0.999))
def test_steps_within_inverts_segment_time(n, a, c, frac):
    # Exactly at the end of step n, and anywhere inside step n + 1, n whole steps are done.
    end_n = segment_time_s(n, a, c)
    assert steps_within(end_n, a, c) == n
    inside = end_n + frac * (a + c * n)
    assert steps_within(inside, a, c) == n
    assert steps_within(segment_time_s(n + 1, a, c), a, c) == n + 1


def test_no_time_no_steps():
    assert steps_within(0.0, 0.01, 1e-6) == 0
    assert steps_within(-1.0, 0.01, 0.0) == 0
