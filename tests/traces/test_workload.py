"""load_workload: the trajectories a run consumes, from a preset or a (foreign) trace."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.config import load_config
from laminar.errors import ConfigError, TraceError
from laminar.traces import load_workload, synthesize, write_trace


def _cfg(**workload):
    overrides = [f"workload.{k}={v}" for k, v in workload.items()]
    return load_config(overrides=[*overrides, "seed=5"])


def _check_shape(df, steps, prompts, n):
    assert len(df) == steps * prompts * n
    assert df["step"].tolist() == np.repeat(np.arange(steps), prompts * n).tolist()
    assert df["prompt_id"].tolist() == np.repeat(np.arange(steps * prompts), n).tolist()
    assert df["sample_index"].tolist() == np.tile(np.arange(n), steps * prompts).tolist()


def test_synthetic_source_uses_config_and_seed():
    cfg = _cfg(steps=3, prompts_per_step=4, samples_per_prompt=2, max_response_len=1000)
    df = load_workload(cfg)
    _check_shape(df, 3, 4, 2)
    direct = synthesize(
        "dapo-math",
        steps=3,
        prompts_per_step=4,
        samples_per_prompt=2,
        max_prompt_len=2048,
        max_response_len=1000,
        seed=5,
    )
    pd.testing.assert_frame_equal(df, direct)


def test_synthetic_overrides():
    cfg = _cfg(steps=1, prompts_per_step=64, samples_per_prompt=4)
    base = load_workload(cfg)["response_len"].median()
    cfg.workload.source.params = {"response_median_tokens": 5000}
    assert load_workload(cfg)["response_len"].median() > 2 * base
    cfg.workload.source.params = {"nope": 1}
    with pytest.raises(ConfigError, match=r"workload\.source"):
        load_workload(cfg)


def test_trace_with_the_config_shape_is_replayed_as_is(tmp_path):
    df = synthesize(
        "tool-calling",
        steps=2,
        prompts_per_step=3,
        samples_per_prompt=4,
        max_prompt_len=2048,
        max_response_len=16384,
        seed=1,
    )
    write_trace(df, tmp_path / "t.parquet")
    cfg = _cfg(steps=2, prompts_per_step=3, samples_per_prompt=4)
    cfg.workload.source = {"type": "trace", "path": str(tmp_path / "t.parquet")}
    out = load_workload(cfg)
    # The trace's own prompt ids travel along (the run renumbers its prompts).
    assert (out.pop("source_prompt_id") == df["prompt_id"].astype(str)).all()
    pd.testing.assert_frame_equal(out, df)


def test_trace_steps_cycle_and_groups_are_cut_or_repeated(tmp_path):
    # 2 steps x 2 prompts, groups of 3; the run asks 3 steps x 2 prompts, groups of 5.
    df = synthesize(
        "dapo-math",
        steps=2,
        prompts_per_step=2,
        samples_per_prompt=3,
        max_prompt_len=2048,
        max_response_len=16384,
        seed=2,
    )
    shuffled = df.sample(frac=1.0, random_state=0)  # row order must not matter
    write_trace(shuffled, tmp_path / "t.csv")
    cfg = _cfg(steps=3, prompts_per_step=2, samples_per_prompt=5)
    cfg.workload.source = {"type": "trace", "path": str(tmp_path / "t.csv")}
    out = load_workload(cfg)
    _check_shape(out, 3, 2, 5)
    groups = df["response_len"].to_numpy().reshape(4, 3)
    expect = [groups[g % 4][j % 3] for g in range(6) for j in range(5)]
    assert out["response_len"].tolist() == expect


def test_foreign_trace_groups_consecutive_rows(tmp_path):
    path = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:15:{i:02d}.0,{100 + i},{10 + i}" for i in range(10)]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    cfg = _cfg(steps=2, prompts_per_step=3, samples_per_prompt=2, max_response_len=19)
    cfg.workload.source = {"type": "trace", "path": str(path)}
    out = load_workload(cfg)
    _check_shape(out, 2, 3, 2)
    assert out["response_len"].tolist() == [10 + (i % 10) for i in range(12)]
    assert out["finish_reason"].tolist()[9] == "length"  # 19 tokens = the declared max


def test_trace_longer_than_the_config_allows(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nx,3000,10\n")
    cfg = _cfg(steps=1, prompts_per_step=1, samples_per_prompt=1)
    cfg.workload.source = {"type": "trace", "path": str(path)}
    with pytest.raises(TraceError, match=r"row 1, column 'prompt_len'.*max_prompt_len"):
        load_workload(cfg)
