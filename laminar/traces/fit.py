"""Fit the synthetic generator's parameters (``laminar.traces.presets``) to a trace.

The response-length model is fitted in two stages:

1. Marginal maximum likelihood (scipy.optimize) of (median at step 0, drift per step, sigma,
   runaway fraction): every sample's log-length is normal around the step's log-median; a
   response at the cap with ``finish_reason == "length"`` is right-censored, with probability
   q + (1 - q) * P(body > cap). Within-group correlation leaves this marginal likelihood
   unbiased (a composite likelihood), so it needs no group model.
2. ``group_share`` is the intraclass correlation of the standardized log-lengths (one-way
   ANOVA over GRPO groups) of the uncensored samples: censored ones are mostly runaways,
   which share nothing with their group.

Prompt lengths (one per group) and tool columns get their own closed-form or scipy fits.
The result's ``params`` feed straight back into ``synthesize(..., overrides=params)`` or
``workload.source.params``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from laminar.errors import TraceError
from laminar.traces.presets import PARAM_BOUNDS


@dataclass(frozen=True)
class FitResult:
    """Fitted generator parameters (names as in ``SynthParams``) and what they came from."""

    params: dict[str, float]
    cap_tokens: int | None
    """The response cap the censoring used (None: no response ended at a cap)."""
    rows: int


def fit_trace(
    df: pd.DataFrame, *, max_response_len: int | None = None, source: str = "trace"
) -> FitResult:
    """Generator parameters that reproduce ``df`` (a schema trace); see the module docstring.

    ``max_response_len`` is the cap the trace was generated with; by default the longest
    response with ``finish_reason == "length"`` (no censoring if there is none). ``source``
    names the trace in errors.
    """
    length = df["response_len"].to_numpy(dtype="float64")
    groups = len(df[["step", "prompt_id"]].drop_duplicates())
    if groups < 2:
        raise TraceError(
            source,
            f"cannot fit a trace of one GRPO group ({len(df)} sample(s)): the generator's "
            "group share and spread need at least 2 groups",
        )
    if (length < 1).any():
        raise TraceError(
            source, "cannot fit zero-length responses (log-normal model)", column="response_len"
        )
    step = df["step"].to_numpy(dtype="float64")
    finished_long = (df["finish_reason"] == "length").to_numpy()
    cap = max_response_len
    if cap is None and finished_long.any():
        cap = int(length[finished_long].max())
    censored = finished_long & (length >= cap) if cap is not None else np.zeros(len(df), bool)
    if censored.sum() > len(df) - 2:
        raise TraceError(
            source,
            f"cannot fit: {int(censored.sum())} of {len(df)} responses end at the cap "
            f"({cap} tokens, finish_reason 'length'); at least 2 must end before it",
        )
    mu0, drift, sigma, q = _fit_marginal(np.log(length), step, censored, cap)
    z = (np.log(length) - (mu0 + drift * step)) / sigma
    params = {
        "response_median_tokens": float(np.exp(mu0)),
        "response_sigma": sigma,
        "group_share": _intraclass(z[~censored], df[~censored]),
        "runaway_frac": q,
        "drift_per_step": drift,
        "min_response_tokens": float(length.min()),
        **_fit_prompts(df),
        **_fit_tools(df, np.exp(mu0 + drift * step)),
    }
    # An ungrouped trace has no group_share: leave it out, so the preset's value stands.
    # The rest is kept inside the generator's bounds, so that the printed section loads.
    params = {
        k: float(np.clip(v, *PARAM_BOUNDS[k])) for k, v in params.items() if np.isfinite(v)
    }
    return FitResult(params=params, cap_tokens=cap, rows=len(df))


def _fit_marginal(
    log_len: np.ndarray, step: np.ndarray, censored: np.ndarray, cap: int | None
) -> tuple[float, float, float, float]:
    """MLE of (mu0, drift, sigma, q) with right-censoring at the cap."""
    body = ~censored
    vary_step = np.ptp(step) > 0
    design = np.column_stack([np.ones(body.sum()), step[body]])
    coef = np.linalg.lstsq(design if vary_step else design[:, :1], log_len[body], rcond=None)[0]
    start = [coef[0], coef[1] if vary_step else 0.0, np.log(log_len[body].std() + 1e-3), -5.0]
    log_cap = np.log(cap) if cap is not None else np.inf
    fit_q = bool(censored.any())

    def nll(theta: np.ndarray) -> float:
        mu0, drift, log_sigma, logit_q = theta
        sigma = np.exp(log_sigma)
        q = 1.0 / (1.0 + np.exp(-logit_q)) if fit_q else 0.0
        mu = mu0 + drift * step
        ll_body = np.log1p(-q) + stats.norm.logpdf(log_len[body], mu[body], sigma)
        tail = stats.norm.sf(log_cap, mu[censored], sigma)
        ll_cens = np.log(q + (1.0 - q) * tail + 1e-300)
        return -(ll_body.sum() + ll_cens.sum())

    bounds = [(None, None), (None, None) if vary_step else (0.0, 0.0), (-7.0, 3.0), (-20.0, 5.0)]
    res = optimize.minimize(nll, np.array(start), method="L-BFGS-B", bounds=bounds)
    mu0, drift, log_sigma, logit_q = res.x
    q = float(1.0 / (1.0 + np.exp(-logit_q))) if fit_q else 0.0
    return float(mu0), float(drift), float(np.exp(log_sigma)), q


def _intraclass(z: np.ndarray, df: pd.DataFrame) -> float:
    """One-way ANOVA intraclass correlation of z over (step, prompt_id) groups; NaN if none."""
    keys = df["step"].to_numpy() * (int(df["prompt_id"].max()) + 1) + df["prompt_id"].to_numpy()
    _, group, sizes = np.unique(keys, return_inverse=True, return_counts=True)
    k, n = len(sizes), len(z)
    if sizes.max() < 2 or k < 2:
        return float("nan")
    means = np.bincount(group, weights=z) / sizes
    ss_within = float(((z - means[group]) ** 2).sum())
    ss_between = float((sizes * (means - z.mean()) ** 2).sum())
    ms_w, ms_b = ss_within / (n - k), ss_between / (k - 1)
    n0 = (n - (sizes**2).sum() / n) / (k - 1)
    return float(np.clip((ms_b - ms_w) / (ms_b + (n0 - 1) * ms_w), 0.0, 1.0))


def _fit_prompts(df: pd.DataFrame) -> dict[str, float]:
    # One prompt per group: fit the group-level lengths, not every sample's copy.
    prompt = df.drop_duplicates(["step", "prompt_id"])["prompt_len"].to_numpy(dtype="float64")
    log_p = np.log(np.maximum(prompt, 1.0))
    return {
        "prompt_median_tokens": float(np.exp(log_p.mean())),
        "prompt_sigma": float(log_p.std()),
        "min_prompt_tokens": float(prompt.min()),
    }


def _fit_tools(df: pd.DataFrame, median: np.ndarray) -> dict[str, float]:
    if "turns" not in df:
        return {}
    calls = df["turns"].to_numpy(dtype="float64") - 1.0
    log_rel = np.log(df["response_len"].to_numpy(dtype="float64") / median)
    out = {"max_turns": float(calls.max() + 1)}
    out.update(_fit_poisson(calls, log_rel))
    if "tool_latency_s" in df and (calls > 0).any():
        latency = df.loc[calls > 0, "tool_latency_s"].to_numpy(dtype="float64")
        shape, _, scale = stats.lognorm.fit(np.maximum(latency, 1e-9), floc=0)
        out["tool_latency_median_s"] = float(scale)
        out["tool_latency_sigma"] = float(shape)
        out["tool_latency_max_s"] = float(latency.max())
    return out


def _fit_poisson(calls: np.ndarray, log_rel: np.ndarray) -> dict[str, float]:
    """Poisson regression, log E[calls] = log(mean) + exponent * log(length / median), with the
    most calls seen treated as the max_turns cap (censored: P(X >= cap))."""
    cap = calls.max()
    at_cap = calls >= cap

    def nll(theta: np.ndarray) -> float:
        rate = np.exp(theta[0] + theta[1] * log_rel)
        ll = stats.poisson.logpmf(calls[~at_cap], rate[~at_cap]).sum()
        ll += stats.poisson.logsf(cap - 1, rate[at_cap]).sum()
        return -float(ll)

    start = np.array([np.log(max(calls.mean(), 1e-3)), 0.0])
    res = optimize.minimize(nll, start, method="L-BFGS-B", bounds=[(-10.0, 5.0), (-3.0, 3.0)])
    return {
        "tool_calls_mean": float(np.exp(res.x[0])),
        "tool_calls_length_exponent": float(res.x[1]),
    }
