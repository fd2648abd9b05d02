"""Closed-form sums over decode steps while a replica's batch is constant.

Between two events (an admission, a completion, a KV-full preemption, a repack move) a replica
decodes the same b sequences. Step j of such a segment (j = 0, 1, ...) starts with
kv_j = kv_0 + j·b cached tokens and, with the linear step cost of ``laminar.sim.cost``, takes

    t_j = A + C·j,   A = base + b·per_seq + kv_0·per_kv,   C = b·per_kv.

So n steps take T(n) = n·A + C·n(n−1)/2, the number of whole steps that fit in Δ seconds is the
root of a quadratic, and the KV-time integral Σ t_j·kv_j is a sum of powers of j. A segment
therefore costs O(1) however many tokens it decodes: that is the event-skipping model. The
reference stepper in ``laminar.sim.replica`` calls the same functions with n = 1.
"""

from __future__ import annotations

import math

# Relative slack when asking which step a moment falls in: the moment a segment's timeout
# fires, recomputed as t0 + T(n) - t0, may differ from T(n) by a rounding error.
_REL_EPS = 1e-9


def segment_time_s(n: int, a_s: float, c_s: float) -> float:
    """Seconds for ``n`` steps whose j-th step takes ``a_s + c_s·j``."""
    return n * a_s + c_s * (n * (n - 1) / 2)


def steps_within(dt_s: float, a_s: float, c_s: float) -> int:
    """Whole steps completed ``dt_s`` seconds into a segment (largest n with T(n) <= dt_s)."""
    if dt_s <= 0:
        return 0
    slack = dt_s * (1 + _REL_EPS)
    if c_s == 0:
        n = int(slack / a_s)
    else:
        half = a_s - c_s / 2
        n = int((-half + math.sqrt(half * half + 2 * c_s * slack)) / c_s)
    # Correct the root's rounding; T(n) = segment_time_s, inlined (called at every repack
    # check for every replica): the same arithmetic, so the same answer.
    while n > 0 and n * a_s + c_s * (n * (n - 1) / 2) > slack:
        n -= 1
    m = n + 1
    while m * a_s + c_s * (m * (m - 1) / 2) <= slack:
        n = m
        m += 1
    return n


def kv_integral(n: int, a_s: float, c_s: float, kv0_tokens: int, batch: int) -> float:
    """Σ_{j<n} (a_s + c_s·j)·(kv0 + batch·j): token-seconds of KV held over ``n`` steps."""
    s1 = n * (n - 1) / 2
    s2 = (n - 1) * n * (2 * n - 1) / 6
    return a_s * kv0_tokens * n + (a_s * batch + c_s * kv0_tokens) * s1 + c_s * batch * s2
