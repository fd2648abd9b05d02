"""Trace statistics, the `laminar trace` commands, the histogram figure, the shipped traces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from laminar.cli import main
from laminar.traces import read_trace, write_trace
from laminar.traces.plot import plot_length_histogram
from laminar.traces.stats import trace_stats

ROOT = Path(__file__).resolve().parents[2]


def _hand_made() -> pd.DataFrame:
    # two steps, one group of 2 each: lengths 10, 30 | 20, 20 ; one truncated at 30
    return pd.DataFrame(
        {
            "step": [0, 0, 1, 1],
            "prompt_id": [0, 0, 1, 1],
            "sample_index": [0, 1, 0, 1],
            "prompt_len": [5, 5, 7, 7],
            "response_len": [10, 30, 20, 20],
            "finish_reason": pd.array(["stop", "length", "stop", "stop"], dtype="string"),
        }
    )


def test_stats_by_hand():
    s = trace_stats(_hand_made())
    assert (s.rows, s.steps, s.groups, s.group_size_min, s.group_size_max) == (4, 2, 2, 2, 2)
    assert s.response_p50 == 20 and s.response_max == 30 and s.response_mean == 20
    assert s.truncated_frac == 0.25
    assert s.mean_tokens_per_group == 40  # (10 + 30 + 20 + 20) / 2
    assert s.group_max_over_mean == pytest.approx((30 / 20 + 20 / 20) / 2)
    assert np.isnan(s.turns_mean)


def test_ungrouped_stats_have_no_group_ratio():
    df = _hand_made().assign(step=0, prompt_id=[0, 1, 2, 3], sample_index=0)
    assert np.isnan(trace_stats(df).group_max_over_mean)


def test_synth_show_fit_commands(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    args = ["--steps", "2", "--prompts-per-step", "8", "--samples-per-prompt", "4", "--seed", "3"]
    assert main(["trace", "synth", "tool-calling", "-o", str(out), *args]) == 0
    df = read_trace(out)
    assert len(df) == 64 and "turns" in df
    plot = tmp_path / "plots" / "h.png"
    assert main(["trace", "show", str(out), "--plot", str(plot)]) == 0
    text = capsys.readouterr().out
    p50, p99 = np.percentile(df["response_len"], [50, 99])
    assert f"{p99 / p50:.2f}" in text and "turns (mean)" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["trace", "fit", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tool_calls_mean" in text and "preset: tool-calling" in text
    assert main(["trace", "synth", "--list"]) == 0
    assert "dapo-math" in capsys.readouterr().out


def test_synth_param_override(tmp_path):
    out = tmp_path / "t.csv"
    argv = ["trace", "synth", "dapo-math", "-o", str(out), "--steps", "1"]
    assert main([*argv, "--param", "response_median_tokens=50", "--max-response-len", "400"]) == 0
    df = read_trace(out)
    assert df["response_len"].median() < 100 and df["response_len"].max() == 400
    assert main([*argv, "--param", "response_median_tokens"]) == 2


def test_plot_of_a_single_step(tmp_path):
    plot_length_histogram(_hand_made().query("step == 0"), tmp_path / "one.svg")
    assert (tmp_path / "one.svg").read_text().lstrip().startswith("<?xml")


def _generator():
    spec = importlib.util.spec_from_file_location("generate", ROOT / "traces" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_traces_are_what_the_script_generates():
    gen = _generator()
    total = 0
    for name in gen.SHIPPED:
        path = ROOT / "traces" / name
        total += path.stat().st_size
        pd.testing.assert_frame_equal(read_trace(path), gen.build(name), check_exact=True)
    assert total < 5 * 2**20


def test_shipped_math_trace_has_the_paper_shape():
    s = trace_stats(read_trace(ROOT / "traces" / "dapo-math.parquet", max_response_len=16384))
    assert s.group_size_min == s.group_size_max == 16 and s.groups == 20 * 512
    assert 9.0 < s.p99_over_p50 < 11.0  # paper §1, §2.2: ~10x
    assert 0.0 < s.truncated_frac < 0.01 and s.response_max == 16384


def test_write_then_show_is_atomic_for_plot(tmp_path):
    df = _hand_made()
    write_trace(df, tmp_path / "t.parquet")
    with pytest.raises(ValueError):
        plot_length_histogram(df, tmp_path / "h.notaformat")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
