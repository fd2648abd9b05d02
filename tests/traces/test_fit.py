"""Fitting recovers the generator's parameters within a stated tolerance.

Tolerance, for a 40-step x 128-prompt x 16-sample trace (81,920 rows); over 60 fits (20 seeds
x dapo-math, tool-calling and OTHER below) the largest error seen used 85% of its tolerance
(runaway_frac), most under 60% (traces/README.md, "Fitting"):
relative: medians of response / prompt / tool latency, mean tool calls;
absolute: everything else. min_* and tool_latency_max_s are observed extremes, not fitted.
"""

from __future__ import annotations

import math

import pytest

from laminar.traces import preset_params, synthesize
from laminar.traces.fit import fit_trace
from laminar.traces.stats import trace_stats

RELATIVE = {
    "response_median_tokens": 0.08,
    "prompt_median_tokens": 0.05,
    "tool_calls_mean": 0.05,
    "tool_latency_median_s": 0.05,
}
ABSOLUTE = {
    "response_sigma": 0.03,
    "group_share": 0.05,
    "runaway_frac": 0.002,
    "drift_per_step": 0.003,
    "prompt_sigma": 0.02,
    "tool_calls_length_exponent": 0.03,
    "tool_latency_sigma": 0.03,
    "max_turns": 0.0,
}

# Far from the presets' defaults, so a fit that echoed a preset would fail.
OTHER = {
    "response_median_tokens": 800,
    "response_sigma": 1.2,
    "group_share": 0.7,
    "runaway_frac": 0.01,
    "drift_per_step": 0.02,
    "prompt_median_tokens": 900,
    "prompt_sigma": 0.2,
    "tool_calls_mean": 4.0,
    "tool_calls_length_exponent": 0.2,
    "max_turns": 12,
    "tool_latency_median_s": 3.0,
    "tool_latency_sigma": 0.5,
}


def _trace(preset, overrides, seed):
    return synthesize(
        preset,
        steps=40,
        prompts_per_step=128,
        samples_per_prompt=16,
        max_prompt_len=2048,
        max_response_len=16384,
        seed=seed,
        overrides=overrides,
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "preset, overrides", [("dapo-math", {}), ("tool-calling", OTHER)], ids=["dapo", "tool-other"]
)
def test_fit_recovers_parameters(preset, overrides, seed):
    true = preset_params(preset, overrides)
    fitted = fit_trace(_trace(preset, overrides, seed), max_response_len=16384).params
    checked = 0
    for name, tol in RELATIVE.items():
        if name in fitted:
            want = getattr(true, name)
            assert abs(fitted[name] / want - 1) <= tol, (name, fitted[name], want)
            checked += 1
    for name, tol in ABSOLUTE.items():
        if name in fitted:
            want = getattr(true, name)
            assert abs(fitted[name] - want) <= tol, (name, fitted[name], want)
            checked += 1
    assert checked == (7 if preset == "dapo-math" else 12)


def test_fitted_parameters_reproduce_the_trace_shape():
    original = _trace("dapo-math", {"response_median_tokens": 3000, "group_share": 0.3}, 4)
    fit = fit_trace(original)  # cap found from the 'length' rows
    assert fit.cap_tokens == 16384
    again = _trace("dapo-math", fit.params, 5)
    a, b = trace_stats(original), trace_stats(again)
    assert math.isclose(a.response_p50, b.response_p50, rel_tol=0.05)
    assert math.isclose(a.p99_over_p50, b.p99_over_p50, rel_tol=0.08)
    assert math.isclose(a.group_max_over_mean, b.group_max_over_mean, rel_tol=0.05)
    assert math.isclose(a.truncated_frac, b.truncated_frac, rel_tol=0.25, abs_tol=0.002)


def test_ungrouped_trace_fits_without_group_share():
    df = _trace("dapo-math", {}, 0).head(4000)
    df = df.assign(step=0, prompt_id=range(len(df)), sample_index=0)
    fitted = fit_trace(df).params
    assert "group_share" not in fitted and fitted["drift_per_step"] == 0.0
    assert abs(fitted["response_sigma"] - preset_params("dapo-math").response_sigma) < 0.06
