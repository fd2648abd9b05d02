"""``laminar calibrate`` says what its runs lack of docs/fidelity.md's protocol (issue 31: the
shortcut of 10-step runs, 2 repeats and no one-rollout run missed held-out jobs by 2-31%)."""

from __future__ import annotations

from laminar.calibrate.protocol import REPEATS, STEPS, protocol_gaps
from laminar.cli import main
from laminar.config import load_config
from tests.calibrate.test_calibrate_cli import make_run


def _cfg(mode: str = "laminar", rollouts: int = 2, median: float = 6.0):
    return load_config(preset="tiny-cpu", overrides=[
        f"runtime.mode={mode}", f"runtime.rollouts={rollouts}",
        f"runtime.task.median_len={median}"])  # fmt: skip


def _protocol(steps: int = STEPS, repeats: int = REPEATS):
    """The page's calibration: laminar, sync and sync with one rollout, ``repeats`` runs each."""
    settings = [_cfg("laminar"), _cfg("sync"), _cfg("sync", 1)]
    return [(f"runs/{i}-{k}", cfg, steps) for i, cfg in enumerate(settings)
            for k in range(repeats)]  # fmt: skip


def test_the_protocol_itself_has_no_gap():
    assert protocol_gaps(_protocol()) == []


def test_short_runs_are_named_with_the_fewest_steps():
    runs = _protocol()
    runs[4] = (runs[4][0], runs[4][1], 10)
    runs[7] = (runs[7][0], runs[7][1], 12)
    (gap,) = protocol_gaps(runs)
    assert f"2 of 9 run(s) have fewer than {STEPS} trainer steps (fewest: 10, runs/1-1)" in gap


def test_settings_with_too_few_repeats_are_listed():
    runs = _protocol(repeats=REPEATS)
    runs = [r for r in runs if r[0] != "runs/2-0"]  # one-rollout sync: 2 runs left
    (gap,) = protocol_gaps(runs)
    assert "1 of 3 setting(s) have fewer than 3 repeats: sync x1 (2 runs)" in gap
    # a run of another task is another setting, not a repeat of the first
    other = [*_protocol(), ("runs/long", _cfg("laminar", median=9.0), STEPS)]
    (gap,) = protocol_gaps(other)
    assert "1 of 4 setting(s)" in gap and "laminar x2 (1 run)" in gap


def test_a_calibration_without_a_one_rollout_run_is_told():
    runs = [r for r in _protocol() if not r[0].startswith("runs/2-")]
    (gap,) = protocol_gaps(runs)
    assert "no run with one rollout" in gap


def test_the_issues_shortcut_prints_every_gap(tmp_path, capsys):
    """One 10-step run of laminar and one of sync (the issue's own calibration): every gap."""
    runs = [make_run(tmp_path / "a", seed=1),
            make_run(tmp_path / "b", seed=2, shared=False, threads=2, rate=3e10)]  # fmt: skip
    assert main(["calibrate", *map(str, runs), "-o", str(tmp_path / "cost.json")]) == 0
    out = capsys.readouterr().out
    assert "protocol (docs/fidelity.md" in out
    assert f"2 of 2 run(s) have fewer than {STEPS} trainer steps (fewest: 10," in out
    assert "2 of 2 setting(s) have fewer than 3 repeats" in out
    assert "no run with one rollout" in out
    assert "thirteenth campaign" in out
