"""How the calibration runs' answers moved as they trained, against a probe's window
(``laminar/calibrate/drift.py``; docs/fidelity.md, *Fifteenth campaign*)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from laminar.calibrate import drift
from laminar.cli import main
from laminar.config import load_config
from laminar.config.loader import write_resolved
from tests.calibrate.test_answers import run_with_policy

PROBE_STEPS = 4


def _scale_first_steps(run: Path, factor: float, steps: int = PROBE_STEPS) -> float:
    """Make the run's policy answer ``factor`` times as long in its first ``steps`` steps;
    returns its mean response over steps >= 1 over its mean over steps < ``steps``."""
    trace = pd.read_parquet(run / "trajectories.parquet")
    early = trace["step"] < steps
    trace.loc[early, "response_len"] = np.round(trace.loc[early, "response_len"] * factor)
    trace.to_parquet(run / "trajectories.parquet", index=False)
    resp = trace["response_len"].to_numpy(float)
    return float(resp[trace["step"] >= 1].mean() / resp[early].mean())


def _probe(root: Path) -> Path:
    run = run_with_policy(root, 7)
    cfg = load_config(preset="tiny-cpu", overrides=[f"workload.steps={PROBE_STEPS}"])
    write_resolved(cfg, run)
    return run


@pytest.mark.parametrize("factor, word", [(2.0, "upper figure"), (0.5, "lower figure")])
def test_calibrate_says_how_far_a_probes_window_is_from_the_runs_whole(tmp_path, capsys,
                                                                       factor, word):
    """Calibration runs whose answers were twice as long over a 4-step probe's window as later
    (or half): ``laminar calibrate --lengths-from`` prints the ratio, the spread over runs and
    which way it makes the probe's figure err, and records it with the fits; the cost file's
    coefficients and lengths are what they are without it."""
    runs = [run_with_policy(tmp_path / name, seed) for name, seed in (("a", 1), ("b", 2))]
    ratios = [_scale_first_steps(r, factor) for r in runs]
    probe = _probe(tmp_path / "p")
    out = tmp_path / "cost.json"
    capsys.readouterr()
    assert main(["calibrate", *map(str, runs), "--lengths-from", str(probe), "-o", str(out)]) == 0
    said = capsys.readouterr().out
    row = next(line for line in said.splitlines() if line.startswith("answer lengths"))
    mean = float(np.exp(np.mean(np.log(ratios))))
    assert f"were {mean:.2f}x (runs {min(ratios):.2f}-{max(ratios):.2f})" in row, row
    assert f"over their first {PROBE_STEPS}" in row and word in row
    assert (mean < 1) == (factor > 1)
    fit = json.loads(out.read_text())["fit"]["answer lengths"]
    assert fit["values"]["later_over_first"] == pytest.approx(mean)
    assert fit["samples"] == 2 and fit["values"]["first_steps"] == PROBE_STEPS
    # without a probe there is no window to compare: no row
    plain = tmp_path / "plain.json"
    capsys.readouterr()
    assert main(["calibrate", *map(str, runs), "-o", str(plain)]) == 0
    assert "answer lengths" not in capsys.readouterr().out
    assert "answer lengths" not in json.loads(plain.read_text())["fit"]
    assert json.loads(plain.read_text())["coefficients"] == json.loads(out.read_text())[
        "coefficients"]


def _run(steps: list[int], responses: list[float], probe_steps: int = PROBE_STEPS):
    lengths = pd.DataFrame({"step": steps, "response": responses})
    workload = SimpleNamespace(steps=probe_steps)
    return SimpleNamespace(lengths=lengths, config=SimpleNamespace(workload=workload))


def test_runs_that_say_nothing_of_the_probes_window_are_left_out():
    """A run without a trace, or whose trace ends inside the probe's window, gives no ratio;
    with none left, or no probe, there is no row."""
    long = _run(list(range(10)), [20.0] * 4 + [10.0] * 6)
    assert drift.later_over_first(long, 4) == pytest.approx(np.mean([20.0] * 3 + [10.0] * 6)
                                                             / 20.0)
    short = _run([0, 1, 2], [5.0, 5.0, 5.0])
    assert drift.later_over_first(short, 4) is None
    assert drift.later_over_first(SimpleNamespace(lengths=None), 4) is None
    probe = _run([0, 1, 2, 3], [1.0] * 4)
    assert drift.measure([short], [probe]) is None
    assert drift.measure([long], []) is None
    empty = _run([], [])
    assert drift.later_over_first(empty, 4) is None
    fit = drift.measure([long, short, empty], [probe])
    assert fit is not None and fit.samples == 1  # the short run is left out
    ratio = drift.later_over_first(long, 4)
    assert f"were {ratio:.2f}x (runs {ratio:.2f})" in fit.note
    assert fit.values["later_over_first"] == pytest.approx(ratio)
