"""``benchmarks/fidelity.py: noise_floor``: how often a perfect model meets the bound."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fidelity():
    path = ROOT / "benchmarks" / "fidelity.py"
    spec = importlib.util.spec_from_file_location("fidelity_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(setting: str, tokens: list[float]) -> pd.DataFrame:
    return pd.DataFrame({
        "setting": setting,
        "measured_train_tokens_per_s": tokens,
        "measured_step_time_s": [1000.0 / t for t in tokens],
        "predicted_train_tokens_per_s": [100.0] * len(tokens),
    })  # fmt: skip


def test_steady_runs_always_meet_and_spread_runs_often_do_not():
    f = _fidelity()
    df = pd.concat([_runs("steady", [100, 101, 99, 100, 102]),
                    _runs("spread", [60, 80, 100, 130, 170])])  # fmt: skip
    noise = f.noise_floor(df, draws=4000).set_index("setting")
    assert noise.loc["steady", "p_within"] == 1.0
    assert noise.loc["spread", "p_within"] < 0.6
    assert noise.loc["all rows", "p_within"] <= noise.loc["spread", "p_within"]
    assert noise.loc["steady", "measured_cv"] < 0.02 < noise.loc["spread", "measured_cv"]
    assert noise.loc["steady", "predicted_cv"] == 0.0
    text = "\n".join(f.noise_markdown(noise.reset_index()))
    assert "every row at once" in text and "| spread |" in text


def test_paired_calibration_fits_each_repeat_on_its_own_calibration_runs(tmp_path, monkeypatch):
    f = _fidelity()
    runs = {name: [tmp_path / name / f"rep{k}" for k in range(3)] for name in f.SETTINGS}
    runs["sync"] = runs["sync"][:2]  # repeat 2 lacks a calibration setting: left out
    seen = []

    def calibrate(dirs):
        seen.append(sorted(str(d.relative_to(tmp_path)) for d in dirs))
        return {"runs": [str(d) for d in dirs]}, []

    monkeypatch.setattr(f, "calibrate", calibrate)
    costs = f.repeat_costs(runs, tmp_path)
    assert sorted(costs) == ["rep0", "rep1"]
    assert seen == [["laminar/rep0", "sync/rep0"], ["laminar/rep1", "sync/rep1"]]
    assert "sync/rep1" in costs["rep1"].read_text() and "rep0" not in costs["rep1"].read_text()


def test_repeat_share_tells_drift_between_repeats_from_noise_within_them():
    f = _fidelity()

    def runs(scale: dict[int, dict[str, float]]) -> pd.DataFrame:
        rows = [{"repeat": f"rep{r}", "setting": s, "measured_train_tokens_per_s": v}
                for r, by in scale.items() for s, v in by.items()]  # fmt: skip
        return pd.DataFrame(rows)

    # every setting of a repeat moves together: all of the variance is the repeat's
    drift = runs({r: {"a": 100.0 * k, "b": 300.0 * k} for r, k in enumerate([1.0, 0.7, 1.3])})
    assert abs(f.repeat_share(drift) - 1.0) < 1e-9
    # the settings move against each other: the repeat explains nothing
    noise = runs({0: {"a": 110.0, "b": 270.0}, 1: {"a": 90.0, "b": 330.0}})
    assert f.repeat_share(noise) < 1e-9


def test_verdicts_count_held_out_and_calibration_rows_apart(tmp_path):
    f = _fidelity()
    pd.DataFrame({
        "setting": ["cal", "near", "far"], "held_out": [False, True, True], "repeats": [5, 5, 4],
        "error_train_tokens_per_s": [0.12, -0.05, 0.02], "error_step_time_s": [-0.1, 0.1, -0.3],
    }).to_csv(tmp_path / "settings.csv", index=False)  # fmt: skip
    (row,) = f.verdicts([str(tmp_path)])[2:]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["4-5", "1 of 2", "0 of 1"]
    assert "cal (calibration) +12% / -10%" in cells[4] and "far +2% / -30%" in cells[4]
    assert "near" not in cells[4]  # exactly on the bound is within it


def test_moving_runs_to_one_speed_takes_the_drift_out_of_their_spread():
    f = _fidelity()
    speed = [0.8, 1.0, 1.25, 1.1, 0.9]  # time multipliers of the machine in each run
    df = _runs("a", [100.0 / k for k in speed])  # a perfectly regular job on a drifting machine
    df["measured_gen_tokens_per_s"] = [50.0 / k for k in speed]
    df["predicted_train_tokens_per_s"] = 100.0
    df["speed_factor"] = speed
    at = f.at_reference_speed(df)
    assert at["measured_train_tokens_per_s"].tolist() == pytest.approx([100.0] * 5)
    assert at["measured_gen_tokens_per_s"].tolist() == pytest.approx([50.0] * 5)
    assert at["measured_step_time_s"].tolist() == pytest.approx([10.0] * 5)
    # the constant prediction's error scatters with the drift; at one speed it would not
    assert f.error_scatter(df) > 0.1
    assert f.error_scatter(at) == pytest.approx(0.0, abs=1e-12)


def test_other_core_share_merges_intervals_and_clips_to_each_step():
    """``fit.other_core_share``: the union of the other core's steps inside each step, over
    the step's length."""
    from types import SimpleNamespace

    import numpy as np

    from laminar.calibrate.fit import other_core_share

    work = np.array([[5.0, 7.0], [0.0, 2.0], [1.0, 3.0]])  # unsorted, two overlapping
    steps_a, steps_b = np.array([0.0, 2.5, 3.0, 4.0, -1.0]), np.array([1.0, 5.5, 5.0, 8.0, 9.0])
    eng = pd.DataFrame({"replica_id": ["r1"] * 3 + ["r0"] * 5,
                        "at_s": [*work[:, 1], *steps_b],
                        "step_s": [*(work[:, 1] - work[:, 0]), *(steps_b - steps_a)]})
    run = SimpleNamespace(engine=eng, machine={"rollout_cpus": [[0], [1]], "trainer_cpus": []},
                          summary={}, path=ROOT / "no-such-run")  # fmt: skip
    got = other_core_share(run)[3:].tolist()
    # the union is [0, 3] + [5, 7]
    assert got == pytest.approx([1.0 / 1.0, 1.0 / 3.0, 0.0, 2.0 / 4.0, 5.0 / 10.0])
    alone = SimpleNamespace(**{**vars(run), "engine": eng[eng["replica_id"] == "r0"]})
    assert other_core_share(alone).tolist() == [0.0] * 5


def test_ranking_spread_says_how_firmly_the_runs_order_two_settings():
    f = _fidelity()
    clear = pd.concat([_runs("a", [120, 121, 119, 122]), _runs("b", [100, 101, 99, 100])])
    clear["repeat"] = [f"rep{i}" for i in range(4)] * 2
    lo, hi, wins, n = f.ranking_spread(clear, "a", "b", draws=2000)
    assert 1.0 < lo <= 1.2 <= hi < 1.25 and (wins, n) == (4, 4)
    mixed = pd.concat([_runs("a", [90, 130, 95, 125]), _runs("b", [110, 100, 105, 100])])
    mixed["repeat"] = [f"rep{i}" for i in range(4)] * 2
    lo, hi, wins, n = f.ranking_spread(mixed, "a", "b", draws=2000)
    assert lo < 1.0 < hi and (wins, n) == (2, 4)


def test_rankings_also_read_the_runs_at_one_machine_speed():
    """With per-run speed factors, a measured gap that the machine's speed explains shows up
    as a tie at one speed."""
    f = _fidelity()
    runs = pd.concat([_runs("laminar", [120, 120, 120, 120]),
                      _runs("laminar-norepack", [100, 100, 100, 100])])  # fmt: skip
    runs["repeat"] = [f"rep{i}" for i in range(4)] * 2
    runs["speed_factor"] = [1.0] * 4 + [1.2] * 4  # the repack-off runs met a slower machine
    runs["measured_gen_tokens_per_s"] = runs["measured_train_tokens_per_s"]
    settings = runs.groupby("setting", as_index=False).median(numeric_only=True)
    (line,) = f._rankings(settings, runs)
    assert "measured 1.20x" in line and "at one machine speed 1.00x" in line


def test_a_run_is_predicted_with_the_repack_bound_it_ran_with(tmp_path):
    """``job_config``: a run directory written before the runtime recorded its bound (a
    config with no cost file and the default bound) is predicted unbounded, as it ran."""
    from laminar.config import load_config, write_resolved

    f = _fidelity()
    run = tmp_path / "run"
    run.mkdir()
    write_resolved(load_config(preset="tiny-cpu"), run)
    cost = tmp_path / "cost.json"
    cost.write_text("{}")
    job = f.job_config(run, cost, trace=False)
    assert job.repack.max_step_slowdown == 0 and job.sim.cost_file == str(cost)
    write_resolved(load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}"]), run)
    assert f.job_config(run, cost, trace=False).repack.max_step_slowdown > 0


def test_engine_check_compares_the_cost_files_term_with_each_settings_steps(tmp_path):
    """``fidelity.py --engine-check``: a cost file calibrated on two settings' runs gives each
    setting measured / term ~1 on its own steps, and each setting's own fit recovers the
    engine's solo cost; a cost file twice as fast reads ~2."""
    import json

    from laminar.calibrate import calibrate, cost_file_json
    from tests.calibrate.test_calibrate_cli import TRUE, make_run

    runs = {"a": [make_run(tmp_path / "a" / "rep0", seed=1)],
            "b": [make_run(tmp_path / "b" / "rep0", seed=2, shared=False, threads=2)]}
    content, _ = calibrate([d for v in runs.values() for d in v])
    cost = tmp_path / "cost.json"
    cost.write_text(cost_file_json(content))
    fid = _fidelity()
    rows = [line.split("|") for line in fid.engine_check(runs, cost).splitlines()[2:]]
    assert [r[1].strip() for r in rows] == ["a", "b"]
    for r in rows:
        assert float(r[3].split()[0]) == pytest.approx(1.0, abs=0.03)
    base_ms = TRUE["decode_base_s"] * 1e3
    assert float(rows[1][5]) == pytest.approx(base_ms, rel=0.1)  # alone on its cores: solo
    for term in ("decode_base_s", "decode_per_seq_s", "decode_per_kv_token_s",
                 "prefill_per_token_s"):
        content["coefficients"][term]["value"] /= 2
    cost.write_text(json.dumps(content))
    rows = [line.split("|") for line in fid.engine_check(runs, cost).splitlines()[2:]]
    assert float(rows[1][3].split()[0]) == pytest.approx(2.0, rel=0.03)


def _answered_run(path: Path, overrides: list[str], responses: list[int], steps: int = 3) -> Path:
    """A run directory with what ``answered_lengths`` reads: config, summary and a trace whose
    step 0 answers 1,000 tokens (left out as the warm-up) and the later steps ``responses``."""
    rows = [(0, 1000)] * 4 + [(1 + i % (steps - 1), r) for i, r in enumerate(responses)]
    rows += [(steps, 2000)] * 4  # generated past the last step: not trained
    return _trace_run(path, pd.DataFrame(rows, columns=["step", "response_len"]), overrides, steps)


def _trace_run(path: Path, trace: pd.DataFrame, overrides: list[str], steps: int) -> Path:
    """A run directory of the tiny-cpu preset with ``overrides``: config, summary, ``trace``."""
    from laminar.config import load_config
    from laminar.config.loader import write_resolved

    path.mkdir(parents=True)
    write_resolved(load_config(preset="tiny-cpu", overrides=overrides), path)
    (path / "summary.json").write_text(f'{{"steps": {steps}}}')
    trace.to_parquet(path / "trajectories.parquet")
    return path


def test_answered_lengths_pool_the_trained_steps_against_the_calibration_runs(tmp_path):
    import numpy as np

    f = _fidelity()
    cal = [4, 6, 6, 8, 100] * 20
    held = [9, 12, 12, 15, 400] * 20
    runs = {"laminar": [_answered_run(tmp_path / "laminar" / "rep0", [], cal)],
            "sync": [_answered_run(tmp_path / "sync" / "rep0", ["runtime.mode=sync"], cal)],
            "wide": [_answered_run(tmp_path / "wide" / "rep0",
                                   ["runtime.task.median_len=14", "runtime.task.tail_ratio=30",
                                    "workload.max_response_len=512"], held[:50]),
                     _answered_run(tmp_path / "wide" / "rep1", [], held[50:])]}  # fmt: skip
    df = f.answered_lengths(runs, ("laminar", "sync")).set_index("setting")
    assert df.loc["wide", "trajectories"] == len(held)  # warm-up and untrained steps left out
    assert df.loc["wide", "median"] == np.median(held)
    assert df.loc["wide", "median_ratio"] == np.median(held) / np.median(cal)
    assert df.loc["wide", "p99_ratio"] == np.quantile(held, 0.99) / np.quantile(cal + cal, 0.99)
    assert bool(df.loc["wide", "held_out"]) and not bool(df.loc["sync", "held_out"])
    assert (df.loc["wide", "task_median"], df.loc["wide", "task_p99"]) == (14.0, 420.0)
    assert df.loc["wide", "max_response_len"] == 512
    text = "\n".join(f.answered_markdown(df.reset_index()))
    assert "| wide | yes | 100 | 12 |" in text


def _prompt_run(path: Path, rows: list[tuple[int, int, int]], steps: int = 8) -> Path:
    """A run directory of the default repeat task with a trace of (step, prompt_id, response)
    and 4 trajectories generated past its last step (not trained: left out)."""
    rows = [*rows, *[(steps, 0, 5000)] * 4]
    trace = pd.DataFrame(rows, columns=["step", "prompt_id", "response_len"])
    return _trace_run(path, trace, [], steps)


def _prompts_by_letter():
    """Prompt ids of the default task (seed 0) by (letter, power-of-two bucket of n + 1)."""
    import math

    from laminar.config import load_config
    from laminar.runtime.tasks.make import make_task

    cfg = load_config(preset="tiny-cpu")
    cap = cfg.workload.max_response_len
    gen = make_task(cfg.runtime.task, seed=cfg.seed, max_answer_len=cap - 1)
    out: dict[tuple[str, int], list[int]] = {}
    for p in range(3000):
        answer = gen.prompt(p).answer
        out.setdefault((answer[0], int(math.log2(len(answer) + 1))), []).append(p)
    return out


def test_a_probes_gap_splits_into_its_prompts_and_its_policy(tmp_path):
    """Answers set by their prompt alone, the probe's steps asking the long ones: the whole gap
    is its prompts'. One kind of prompt whose answers halve after the probe: the policy's."""
    f = _fidelity()
    by = _prompts_by_letter()
    long_ids, short_ids = by[("a", 3)], by[("b", 3)]
    rows = []
    for step in range(8):  # the first 4 steps ask 3 long prompts and 1 short, the rest 1 and 3
        ids = long_ids[3 * step: 3 * step + 3][: 3 if step < 4 else 1]
        ids += short_ids[3 * step: 3 * step + 3][: 1 if step < 4 else 3]
        rows += [(step, p, 40 if p in long_ids else 10) for p in ids for _ in range(4)]
    prompts = {"prompts": [_prompt_run(tmp_path / "p" / "rep0", rows)]}
    same = by[("c", 3)]
    rows = [(step, same[step], 20 if step < 4 else 10) for step in range(8) for _ in range(4)]
    policy = {"policy": [_prompt_run(tmp_path / "q" / "rep0", rows)]}
    gap = f.probe_gap({**prompts, **policy}).set_index("setting")
    early = (3 * 40 + 10) / 4  # the mean answer of a step of the probe's kind
    window = (3 * early + 4 * (40 + 3 * 10) / 4) / 7  # steps 1-3 of that kind, 4-7 the other
    assert gap.loc["prompts", "gap"] == pytest.approx(early / window)
    assert gap.loc["prompts", "prompts"] == pytest.approx(early / window)
    assert gap.loc["prompts", "policy"] == pytest.approx(1.0)
    assert gap.loc["prompts", "prompt_share"] == pytest.approx(1.0)  # a prompt's answers alike
    assert gap.loc["policy", "gap"] == pytest.approx(20 / (20 * 3 + 10 * 4) * 7)
    assert gap.loc["policy", "prompts"] == pytest.approx(1.0)
    assert gap.loc["policy", "policy"] == pytest.approx(gap.loc["policy", "gap"])
    assert "| prompts |" in "\n".join(f.probe_gap_markdown(gap.reset_index()))
