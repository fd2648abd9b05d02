"""Response lengths in users' terms: a mean (and a p99) solved into the generator's parameters.

``workload.response_len_mean`` and ``workload.response_len_p99`` state the run's response
lengths as a user knows them from a past run's logs: over every response of the run's
``workload.steps`` global batches, after truncation at ``workload.max_response_len``. They map
onto the synthetic generator's family (``laminar.traces.synth``, every preset: ``dapo-math``,
``tool-calling``): a log-normal body, median m·exp(drift·step) and log-sd σ, clipped to
[min_response_tokens, max_response_len], plus a ``runaway_frac`` q of responses at the max.
Over steps s = 0..S-1 (L = max, a = min_response_tokens, Φ the standard normal CDF):

    mean = q·L + (1 − q)·avg_s E[clip(X_s, a, L)],  X_s ~ LogNormal(log m + drift·s, σ)
    P(length ≤ x) = (1 − q)·avg_s Φ((log x − log m − drift·s) / σ)   for a ≤ x < L

(the clipped log-normal's mean in closed form; the integer rounding, under half a token, is
left out). A mean alone moves the median m and keeps the preset's σ (its tail shape); a p99
alone does the same; both solve m and σ: for each σ, m puts the p99 in place, and σ is the
smallest that brings the mean down to the one asked (a wider body at the same p99 has a smaller
mean, down to about 0.07 x the p99). The preset's ``drift_per_step``, ``runaway_frac`` and
``min_response_tokens`` stay as they are (set them in ``workload.source.params``).

What is refused (``ConfigError`` naming the key, exit 2): a p99 at or below the mean, or at or
beyond ``max_response_len``; a mean at or beyond ``max_response_len``; a p99 when
``runaway_frac`` already puts 1% or more of the responses at the max; a mean too far below its
p99 for a log-normal body, or one the median's range (1..1,048,576 tokens) cannot reach; a key
together with the generator parameter it sets (``response_median_tokens``, and with a p99
given as well ``response_sigma``).

Precedence: a trace (``workload.source: {type: trace}``, ``laminar replay``) replays its
recorded lengths and overrides both keys; they are then ignored with a warning (not an error,
so one config serves ``laminar simulate`` and ``laminar replay`` alike). The runtime job's
workload (``sim.setting: runtime``) takes its lengths from ``runtime.task`` and refuses them.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import TYPE_CHECKING

import numpy as np

from laminar.errors import ConfigError, LaminarWarning
from laminar.traces.presets import PARAM_BOUNDS, SynthParams

if TYPE_CHECKING:
    from laminar.config import LaminarConfig

MEAN_KEY, P99_KEY = "workload.response_len_mean", "workload.response_len_p99"
STEP_POINTS = 256  # the drift's average over steps: every step up to this many, else midpoints
SIGMA_LOW, SIGMA_GRID = 1e-3, 120  # the σ scan of a mean + p99 solve (log-spaced to the max)
_MU_LOW, _MU_HIGH = (math.log(b) for b in PARAM_BOUNDS["response_median_tokens"])


@dataclasses.dataclass(frozen=True)
class LengthModel:
    """The response-length distribution of a run: the generator's family over ``steps``."""

    params: SynthParams
    steps: int
    max_len: int

    def _offsets(self) -> np.ndarray:
        """drift·s over the run's steps (midpoints of equal shares past STEP_POINTS steps)."""
        n = self.steps
        s = np.arange(n, dtype=float) if n <= STEP_POINTS else (
            (np.arange(STEP_POINTS) + 0.5) * n / STEP_POINTS - 0.5
        )  # fmt: skip
        return self.params.drift_per_step * s

    def mean(self, mu: float, sigma: float) -> float:
        """Mean length (tokens) with log-median ``mu`` and log-sd ``sigma``."""
        from scipy.special import ndtr  # SciPy only when a run asks for a mean or a p99

        p, big = self.params, float(self.max_len)
        floor = float(min(p.min_response_tokens, self.max_len))
        m = mu + self._offsets()
        if sigma <= 0:
            body = np.clip(np.exp(m), floor, big)
        else:
            beta = (math.log(big) - m) / sigma
            alpha = (math.log(floor) - m) / sigma if floor > 0 else np.full_like(m, -np.inf)
            inside = np.exp(m + sigma**2 / 2) * (ndtr(beta - sigma) - ndtr(alpha - sigma))
            body = floor * ndtr(alpha) + inside + big * (1.0 - ndtr(beta))
        q = p.runaway_frac
        return q * big + (1.0 - q) * float(np.mean(body))

    def truncated(self, mu: float, sigma: float) -> float:
        """Share of responses at the max (runaways, and the body's tail past it)."""
        top = self.max_len - 0.5  # the generator rounds: what rounds to the max is at the max
        if sigma <= 0:
            body = float(np.mean(np.exp(mu + self._offsets()) >= top))
        else:
            body = 1.0 - self.below(top, mu, sigma) / (1.0 - self.params.runaway_frac)
        return self.params.runaway_frac + (1.0 - self.params.runaway_frac) * body

    def below(self, x: float, mu: float, sigma: float) -> float:
        """P(length ≤ ``x``) for min_response_tokens ≤ ``x`` < max_response_len."""
        from scipy.special import ndtr

        m = mu + self._offsets()
        return (1.0 - self.params.runaway_frac) * float(np.mean(ndtr((math.log(x) - m) / sigma)))


def _root(f, low: float, high: float, key: str, what: str) -> float:
    """The root of increasing-or-decreasing ``f`` in [low, high], or a ConfigError."""
    from scipy.optimize import brentq

    f_low, f_high = f(low), f(high)
    if f_low == 0:
        return low
    if f_high == 0:
        return high
    if (f_low > 0) == (f_high > 0):
        raise ConfigError("config", key, what)
    return float(brentq(f, low, high, xtol=1e-12, rtol=1e-12, maxiter=200))


def _median_range(model: LengthModel, sigma: float) -> str:
    low, high = model.mean(_MU_LOW, sigma), model.mean(_MU_HIGH, sigma)
    return f"{low:,.0f}..{high:,.0f} tokens"


def solve_mean(model: LengthModel, mean: float, sigma: float) -> float:
    """The log-median whose lengths have this ``mean`` at log-sd ``sigma``."""
    return _root(
        lambda mu: model.mean(mu, sigma) - mean, _MU_LOW, _MU_HIGH, MEAN_KEY,
        f"{mean:g} tokens is out of reach of the generator (log-sd {sigma:.3g}, runaway "
        f"{model.params.runaway_frac:g}, min {model.params.min_response_tokens}, max "
        f"{model.max_len}): its mean can be {_median_range(model, sigma)}",
    )  # fmt: skip


def solve_p99(model: LengthModel, p99: float, sigma: float) -> float:
    """The log-median whose lengths have this 99th percentile at log-sd ``sigma``."""
    if sigma <= 0:
        raise ConfigError(
            "config", P99_KEY, "a p99 needs a spread body (response_sigma > 0 in the preset)"
        )
    return _root(
        lambda mu: model.below(p99, mu, sigma) - 0.99, _MU_LOW, _MU_HIGH, P99_KEY,
        f"{p99:g} tokens is out of reach of the generator at log-sd {sigma:.3g} (the median "
        "would leave 1..1,048,576 tokens)",
    )  # fmt: skip


def solve_both(model: LengthModel, mean: float, p99: float) -> tuple[float, float]:
    """(log-median, log-sd) with this mean and this p99: the smallest σ whose mean, with
    the p99 held in place, comes down to ``mean`` (module docstring)."""
    from scipy.optimize import brentq

    high = PARAM_BOUNDS["response_sigma"][1]
    grid = np.geomspace(SIGMA_LOW, high, SIGMA_GRID)

    def excess(sigma: float) -> float:
        return model.mean(solve_p99(model, p99, sigma), sigma) - mean

    lowest, prev = math.inf, None
    for sigma in grid:
        try:
            e = excess(float(sigma))
        except ConfigError:  # no median puts the p99 there at this σ
            continue
        if e <= 0 and prev is None:
            raise ConfigError(
                "config", MEAN_KEY, f"{mean:g} tokens is too close to the p99 ({p99:g}) for the "
                f"generator: its narrowest body already has a mean of {e + mean:,.0f} tokens "
                "(the preset's drift over the steps spreads the lengths; lower the mean, raise "
                "the p99, or set workload.source.params.drift_per_step)"
            )  # fmt: skip
        if e <= 0:
            sigma_star = float(sigma) if e == 0 else float(
                brentq(excess, prev, float(sigma), xtol=1e-12, rtol=1e-12, maxiter=200)
            )  # fmt: skip
            return solve_p99(model, p99, sigma_star), sigma_star
        prev, lowest = float(sigma), min(lowest, e + mean)
    floor = f"{lowest:,.0f}" if math.isfinite(lowest) else "no value"
    raise ConfigError(
        "config",
        MEAN_KEY,
        f"{mean:g} tokens is too far below the p99 ({p99:g}) for the generator's log-normal "
        f"body (with that p99 its mean goes down to {floor} tokens; raise the mean or lower "
        "the p99)",
    )


def _check_keys(
    params_given: dict, mean: float | None, p99: float | None, q: float, floor: int
) -> None:
    """Refuse a key next to the generator parameter it sets, a p99 at or below the shortest
    response, and a p99 the runaways pin to the max."""
    given = "response_median_tokens" in params_given
    if given and (mean is not None or p99 is not None):
        key = MEAN_KEY if mean is not None else P99_KEY
        raise ConfigError(
            "config", key, "sets the median that workload.source.params.response_median_tokens "
            "also sets: give one of them"
        )  # fmt: skip
    if mean is not None and p99 is not None and "response_sigma" in params_given:
        raise ConfigError(
            "config", P99_KEY, "with response_len_mean, sets the spread that "
            "workload.source.params.response_sigma also sets: give one of them"
        )  # fmt: skip
    if p99 is not None and p99 <= floor:
        raise ConfigError(
            "config", P99_KEY, f"{p99:g} tokens is not above the generator's shortest response "
            f"(min_response_tokens {floor})"
        )  # fmt: skip
    if p99 is not None and q >= 0.01:
        raise ConfigError(
            "config", P99_KEY, f"runaway_frac {q:g} already puts 1% or more of the responses "
            "at max_response_len, so the p99 is the max: lower runaway_frac or drop the p99"
        )  # fmt: skip


def response_params(
    params: SynthParams,
    params_given: dict,
    *,
    steps: int,
    max_len: int,
    mean: float | None,
    p99: float | None,
) -> dict[str, float]:
    """The generator parameters that give the run's lengths ``mean`` and/or ``p99`` (name ->
    value, to put over ``params``; empty when neither is given). ``params_given``: the
    overrides the user wrote (``workload.source.params``)."""
    if mean is None and p99 is None:
        return {}
    floor = min(params.min_response_tokens, max_len)
    _check_keys(params_given, mean, p99, params.runaway_frac, floor)
    model = LengthModel(params, steps, max_len)
    sigma = params.response_sigma
    if mean is not None and p99 is not None:
        mu, sigma = solve_both(model, mean, p99)
    else:
        mu = solve_mean(model, mean, sigma) if mean is not None else solve_p99(model, p99, sigma)
    _warn_truncation(model, mu, sigma)
    if mean is not None and p99 is not None:
        return {"response_median_tokens": math.exp(mu), "response_sigma": sigma}
    return {"response_median_tokens": math.exp(mu)}


TRUNCATION_WARN = 0.05  # above this share of responses at the max, the solve says so


def _warn_truncation(model: LengthModel, mu: float, sigma: float) -> None:
    share = model.truncated(mu, sigma)
    if share > TRUNCATION_WARN:
        warnings.warn(
            LaminarWarning(
                f"the response lengths asked put {100 * share:.0f}% of the responses at "
                f"max_response_len ({model.max_len}); give workload.response_len_p99 (a "
                "narrower tail) or raise workload.max_response_len if that is not meant"
            ),
            stacklevel=4,
        )


def resolve_lengths(cfg: LaminarConfig) -> LaminarConfig:
    """``cfg`` with ``response_len_mean`` / ``response_len_p99`` solved into
    ``workload.source.params`` and cleared (unchanged when neither is set, or when the source
    is a trace: it overrides them, with a warning)."""
    from laminar.traces.synth import preset_params

    w = cfg.workload
    if w.response_len_mean is None and w.response_len_p99 is None:
        return cfg
    cleared = {"response_len_mean": None, "response_len_p99": None}
    if w.source.type != "synthetic":
        warn_trace_overrides(cfg)
        return cfg.model_copy(update={"workload": w.model_copy(update=cleared)})
    try:
        params = preset_params(w.source.preset, w.source.params)
    except Exception as e:  # an unknown preset or parameter: named by load_workload
        raise ConfigError("config", "workload.source", str(e)) from None
    solved = response_params(
        params, dict(w.source.params), steps=w.steps, max_len=w.max_response_len,
        mean=w.response_len_mean, p99=w.response_len_p99,
    )  # fmt: skip
    source = w.source.model_copy(update={"params": {**w.source.params, **solved}})
    update = {"source": source, **cleared}
    return cfg.model_copy(update={"workload": w.model_copy(update=update)})


def warn_trace_overrides(cfg: LaminarConfig) -> None:
    """The one warning that a trace's recorded lengths win over the workload's length keys."""
    w = cfg.workload
    keys = [k for k, v in ((MEAN_KEY, w.response_len_mean), (P99_KEY, w.response_len_p99))
            if v is not None]  # fmt: skip
    if keys:
        warnings.warn(
            LaminarWarning(
                f"{' and '.join(keys)} ignored: workload.source is a trace, whose recorded "
                "lengths are replayed as they are (a trace overrides them)"
            ),
            stacklevel=3,
        )
