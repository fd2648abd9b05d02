"""Response lengths in users' terms (issue 30, item 3): ``workload.response_len_mean`` and
``workload.response_len_p99`` solved into the synthetic generator (``laminar.traces.lengths``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.errors import ConfigError, LaminarWarning
from laminar.sim import simulate
from laminar.sim.api import load_run_workload
from laminar.traces import lengths, load_workload
from laminar.traces.lengths import LengthModel, resolve_lengths, response_params
from laminar.traces.synth import preset_params

MEAN, P99 = "workload.response_len_mean", "workload.response_len_p99"


def _model(preset="dapo-math", steps=20, max_len=16384, **params):
    return LengthModel(preset_params(preset, params or None), steps, max_len)


def _solve(model, mean=None, p99=None, given=None):
    solved = response_params(model.params, given or {}, steps=model.steps,
                             max_len=model.max_len, mean=mean, p99=p99)  # fmt: skip
    mu = math.log(solved["response_median_tokens"])
    return solved, mu, solved.get("response_sigma", model.params.response_sigma)


@pytest.mark.filterwarnings("ignore::laminar.errors.LaminarWarning")  # 9000: 22% truncated
@pytest.mark.parametrize("preset", ["dapo-math", "tool-calling"])
@pytest.mark.parametrize("mean", [300.0, 1300.0, 4000.0, 9000.0])
def test_a_mean_alone_moves_the_median_and_keeps_the_spread(preset, mean):
    model = _model(preset)
    solved, mu, sigma = _solve(model, mean=mean)
    assert set(solved) == {"response_median_tokens"}
    assert model.mean(mu, sigma) == pytest.approx(mean, rel=1e-9)


@pytest.mark.parametrize("mean, p99", [(600, 8000), (2000, 9000), (4000, 12000), (8000, 14000)])
def test_a_mean_and_a_p99_set_median_and_spread(mean, p99):
    model = _model()
    solved, mu, sigma = _solve(model, mean=mean, p99=p99)
    assert set(solved) == {"response_median_tokens", "response_sigma"}
    assert model.mean(mu, sigma) == pytest.approx(mean, rel=1e-9)
    assert model.below(p99, mu, sigma) == pytest.approx(0.99, abs=1e-9)


def test_a_p99_alone_moves_the_median():
    model = _model()
    _, mu, sigma = _solve(model, p99=6000)
    assert sigma == model.params.response_sigma
    assert model.below(6000, mu, sigma) == pytest.approx(0.99, abs=1e-9)


def test_the_generated_lengths_have_the_mean_and_p99_asked():
    """Closed forms against draws: the whole generator (rounding, floor, runaways, drift)."""
    overrides = [MEAN + "=3000", P99 + "=11000", "workload.steps=40", "seed=3"]
    r = load_workload(load_config(overrides=overrides))["response_len"].to_numpy()
    assert r.mean() == pytest.approx(3000, rel=0.03)
    assert np.percentile(r, 99) == pytest.approx(11000, rel=0.05)


@pytest.mark.parametrize(
    "sets, key, words",
    [
        ([MEAN + "=4000", P99 + "=3000"], P99, "not above response_len_mean"),
        ([MEAN + "=4000", P99 + "=4000"], P99, "not above response_len_mean"),
        ([P99 + "=16384"], P99, "not below max_response_len"),
        ([MEAN + "=20000", "workload.max_response_len=20000"], MEAN, "not below max_response"),
        ([MEAN + "=0.5"], MEAN, "greater than or equal to 1"),
    ],
)
def test_impossible_keys_are_refused_by_the_config(sets, key, words):
    with pytest.raises(ConfigError, match=words) as e:
        load_config(overrides=sets)
    assert e.value.key_path == key


@pytest.mark.parametrize(
    "sets, key, words",
    [
        ([MEAN + "=100", P99 + "=12000"], MEAN, "too far below the p99"),
        ([MEAN + "=9900", P99 + "=10000"], MEAN, "too close to the p99"),
        ([MEAN + "=5", "workload.source.params={min_response_tokens: 16}"], MEAN, "out of reach"),
        ([P99 + "=10"], P99, "shortest response"),
        ([MEAN + "=3000", "workload.source.params={response_median_tokens: 900}"], MEAN,
         "response_median_tokens also sets"),
        ([MEAN + "=3000", P99 + "=9000", "workload.source.params={response_sigma: 1.0}"], P99,
         "response_sigma also sets"),
        ([P99 + "=9000", "workload.source.params={runaway_frac: 0.02}"], P99, "runaway_frac"),
    ],
)  # fmt: skip
def test_what_the_family_cannot_reach_is_refused_naming_the_key(sets, key, words):
    with pytest.raises(ConfigError, match=words) as e:
        load_workload(load_config(overrides=sets))
    assert e.value.key_path == key


def test_a_mean_that_truncates_many_responses_warns():
    """Reachable, but most responses then hit the max: said, not refused."""
    with pytest.warns(LaminarWarning, match=r"of the responses at max_response_len"):
        resolve_lengths(load_config(overrides=[MEAN + "=12000"]))


def test_a_mean_alone_with_the_spread_given_uses_that_spread():
    cfg = load_config(overrides=[MEAN + "=3000", "workload.source.params={response_sigma: 0.5}"])
    params = resolve_lengths(cfg).workload.source.params
    assert params["response_sigma"] == 0.5
    model = _model(response_sigma=0.5)
    assert model.mean(math.log(params["response_median_tokens"]), 0.5) == pytest.approx(3000)


def test_the_cli_exits_2_naming_the_key(tmp_path, capsys):
    code = main(["simulate", "--set", MEAN + "=100", "--set", P99 + "=12000",
                 "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 2
    assert MEAN in capsys.readouterr().err


def test_a_trace_overrides_the_keys_with_a_warning(tmp_path):
    trace = tmp_path / "t.csv"
    rows = ["step,prompt_id,sample_index,prompt_len,response_len,finish_reason"]
    rows += [f"0,{p},{i},50,{100 + p},stop" for p in range(4) for i in range(2)]
    trace.write_text("\n".join(rows) + "\n")
    source = f"workload.source={{type: trace, path: '{trace}'}}"
    cfg = load_config(overrides=[MEAN + "=3000", source, "workload.prompts_per_step=4",
                                 "workload.samples_per_prompt=2", "workload.steps=1"])  # fmt: skip
    with pytest.warns(LaminarWarning, match="ignored: workload.source is a trace"):
        w = load_workload(cfg)
    assert sorted(set(w["response_len"])) == [100, 101, 102, 103]


def test_the_runtime_job_refuses_the_keys(tmp_path):
    from tests.sim.test_local import job

    with pytest.raises(ConfigError, match=r"runtime\.task") as e:
        simulate(job(tmp_path, MEAN + "=20"))
    assert e.value.key_path == MEAN


def test_a_run_solves_over_its_own_steps_not_the_ones_generated_ahead(monkeypatch):
    seen = []
    real = lengths.response_params

    def spy(*args, **kwargs):
        seen.append(kwargs["steps"])
        return real(*args, **kwargs)

    monkeypatch.setattr(lengths, "response_params", spy)
    load_run_workload(load_config(overrides=[MEAN + "=2000", "workload.steps=7"]))
    assert seen == [7]


@pytest.mark.filterwarnings("ignore::laminar.errors.LaminarWarning")  # 10% at the 1024 max
def test_a_simulated_run_generates_the_mean_asked():
    from tests.sim.conftest import small_config

    cfg = small_config(MEAN + "=400", "workload.steps=4", "sim.systems=[verl]")
    t = simulate(cfg).trajectories
    consumed = t[t["consumed_version"] >= 0]["response_len"]
    assert consumed.mean() == pytest.approx(400, rel=0.25)  # 96 responses: a loose check
