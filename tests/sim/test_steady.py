"""Steady-state figures (``laminar.sim.steady``): the default warm-up, the trend test, and the
notice ``laminar simulate`` prints under its summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.sim.steady import MIN_STEPS, steady_state, trends, warmup_steps

from .conftest import SMALL


def _steps(rates, staleness):
    """A steps table whose step k trains rates[k] tokens/s for 10 s."""
    n = len(rates)
    end_s = 10.0 * np.arange(1, n + 1)
    tokens = 10.0 * np.asarray(rates)
    return pd.DataFrame(
        {"step": np.arange(n), "end_s": end_s, "tokens": tokens, "staleness_mean": staleness}
    )


def test_auto_warmup_is_a_quarter_of_the_steps():
    assert load_config().sim.warmup_steps == "auto"
    assert warmup_steps(load_config(overrides=["workload.steps=20"])) == 5
    assert warmup_steps(load_config(overrides=["workload.steps=3"])) == 0
    assert warmup_steps(load_config(overrides=["workload.steps=9", "sim.warmup_steps=2"])) == 2


def test_flat_figures_are_steady_and_trends_are_caught():
    flat = _steps([100.0] * 12, [2.0] * 12)
    assert steady_state(flat, 4) == "steady"
    rising = _steps(np.linspace(80, 120, 12), [2.0] * 12)
    assert [t.trending for t in trends(rising, 4)] == [True, False]
    assert "training throughput +" in steady_state(rising, 4)
    stale = _steps([100.0] * 12, np.linspace(1, 4, 12))
    assert [t.trending for t in trends(stale, 4)] == [False, True]
    assert "staleness" in steady_state(stale, 4)
    # A small wobble (noise under the thresholds) is steady.
    wobble = _steps(100 + 3 * (-1.0) ** np.arange(12), 2 + 0.2 * (-1.0) ** np.arange(12))
    assert steady_state(wobble, 2) == "steady"
    # The warm-up is left out: a ramp before it does not count.
    ramp = _steps([10, 30, 60, *[100.0] * 9], [0, 1, 2, *[3.0] * 9])
    assert steady_state(ramp, 3) == "steady" and steady_state(ramp, 0) != "steady"


def test_too_few_steps_cannot_tell():
    few = _steps([100.0] * (MIN_STEPS + 1), [1.0] * (MIN_STEPS + 1))
    assert steady_state(few, 2).startswith("too few steps")
    assert trends(few.iloc[:0], 0) is None


@pytest.mark.parametrize(
    "sets, expected",
    [(["workload.steps=3"], "NOT steady state, the run is too short (too few steps")],
)
def test_simulate_says_when_a_run_is_too_short(tmp_path, capsys, sets, expected):
    args = [x for s in [*SMALL, *sets] for x in ("--set", s)]
    assert main(["simulate", *args, "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out
    assert f"laminar: {expected}" in printed
    summary = pd.read_csv(tmp_path / "run" / "summary.csv").iloc[0]
    assert summary["warmup_steps"] == 0 and summary["steady_state"].startswith("too few")


def test_simulate_reports_steady_state_of_a_long_enough_run(tmp_path, capsys):
    sets = ["cluster.gpus=64", "workload.prompts_per_step=32", "workload.steps=16",
            "sim.replica_series=false"]  # fmt: skip
    assert main(["simulate", *[x for s in sets for x in ("--set", s)],
                 "--out", str(tmp_path / "run")]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "run" / "summary.csv").iloc[0]
    assert summary["warmup_steps"] == 4 and summary["steady_state"] == "steady"
    assert "laminar: steady state" in printed and "NOT steady" not in printed
