"""Synthetic generators: shape, caps, determinism, the paper's tail ratio."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.errors import LaminarError
from laminar.traces import list_synth_presets, synthesize
from tests.traces.conftest import small


@pytest.mark.parametrize("preset", ["dapo-math", "tool-calling"])
def test_shape_and_caps(preset):
    df = small(preset, steps=2, prompts_per_step=16, samples_per_prompt=8, max_response_len=900)
    assert len(df) == 2 * 16 * 8
    assert df.groupby("step").size().tolist() == [128, 128]
    assert (df.groupby("prompt_id").size() == 8).all()
    assert df["prompt_id"].is_unique is False and df["prompt_id"].nunique() == 32
    assert df["response_len"].max() == 900
    capped = df["response_len"] == 900
    assert (df.loc[capped, "finish_reason"] == "length").all()
    assert (df.loc[~capped, "finish_reason"] == "stop").all()
    assert (df["prompt_len"] <= 2048).all() and (df["response_len"] >= 1).all()
    # every sample of a group shares its prompt
    assert (df.groupby("prompt_id")["prompt_len"].nunique() == 1).all()


def test_tiny_maxima_are_respected():
    df = small(max_prompt_len=20, max_response_len=10)
    assert df["prompt_len"].max() <= 20 and df["response_len"].max() <= 10
    assert (df["finish_reason"] == "length").mean() > 0.9


def test_same_seed_same_trace_other_seed_differs():
    a, b, c = small(seed=3), small(seed=3), small(seed=4)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not a["response_len"].equals(c["response_len"])


def test_presets_listed():
    names = list_synth_presets()
    assert "dapo-math" in names and "tool-calling" in names
    with pytest.raises(LaminarError, match="dapo-math"):
        small("nope")
    with pytest.raises(LaminarError, match="response_median_tokens"):
        small(overrides={"median": 3.0})


def test_dapo_math_matches_the_paper_shape():
    # Paper §1, §2.2: p99 ~ 10x median; 512 x 16 per step, 16K max (§8).
    df = synthesize(
        "dapo-math",
        steps=20,
        prompts_per_step=512,
        samples_per_prompt=16,
        max_prompt_len=2048,
        max_response_len=16384,
        seed=0,
    )
    r = df["response_len"]
    ratio = r.quantile(0.99) / r.median()
    assert 8.5 < ratio < 11.5
    truncated = (df["finish_reason"] == "length").mean()
    assert 0.003 < truncated < 0.01  # a spike at the max, below the top 1%
    medians = df.groupby("step")["response_len"].median()
    assert medians.iloc[-5:].mean() > medians.iloc[:5].mean()  # drift: lengths grow


def test_groups_are_correlated():
    df = small(steps=1, prompts_per_step=400, samples_per_prompt=8)
    log_len = np.log(df["response_len"])
    group_var = log_len.groupby(df["prompt_id"]).mean().var()
    # independent samples would give var(log L) / 8 for the group means
    assert group_var > 2.5 * log_len.var() / 8


def test_tool_columns(tool_trace):
    assert tool_trace["turns"].between(1, 8).all()
    no_calls = tool_trace["turns"] == 1
    assert (tool_trace.loc[no_calls, "tool_latency_s"] == 0).all()
    assert (tool_trace.loc[~no_calls, "tool_latency_s"] > 0).all()
    assert tool_trace["tool_latency_s"].max() <= 30.0
