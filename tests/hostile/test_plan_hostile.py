"""``laminar plan`` tried as a hostile user would (issue 32): every bad argument, cache entry,
cache directory, cost file and address ends in exit 2 with one clear line and nothing written,
or in a plan with a ``laminar: warning`` naming what was wrong; never a traceback or a hang.

Plans here are tiny (one to four points of a few trajectories) and run in process through
``laminar.cli.main``; the cache's code fingerprint is pinned so that a rerun finds its entries
whatever else changes in the tree meanwhile.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from laminar.cli import main
from laminar.plan.cache import problem

TINY = [
    "cluster.gpus=8",
    "workload.prompts_per_step=3",
    "workload.samples_per_prompt=2",
    "workload.max_prompt_len=64",
    "workload.max_response_len=256",
    "workload.steps=3",
    "sim.warmup_steps=1",
]
SETS = [x for s in TINY for x in ("--set", s)]
# One system, split, TP, batch bound and repack switch at 8 GPUs: one point, two simulations.
ONE = ["--gpus", "8", "--systems", "laminar", "--trainer-fractions", "0.5", "--tp", "1",
       "--max-batch", "8", "--repack", "on", "--jobs", "1", "--short-steps", "2"]  # fmt: skip


def plan(tmp_path: Path, *args: str, out: str = "out") -> tuple[int, str]:
    """Run ``laminar plan``; check the contract (no traceback; exit 2: one error line and no
    output); return (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["plan", *SETS, "--out", str(tmp_path / out), *args])
        except SystemExit as e:  # argparse's own checks
            code = e.code
    text = err.getvalue()
    assert "Traceback" not in text, text[-3000:]
    assert code in (0, 2), (code, args, text[-2000:])
    if code == 2:
        lines = [line for line in text.splitlines() if "error:" in line]
        assert len(lines) == 1 and len(lines[0]) < 2100, text[-2000:]
        assert not (tmp_path / out).exists()
        assert not [p for p in tmp_path.iterdir() if ".laminar-staging" in p.name]
    return code, text


@pytest.fixture(autouse=True)
def pinned_fingerprint(monkeypatch):
    monkeypatch.setattr("laminar.plan.search.code_fingerprint", lambda: "pinned")


# Arguments ------------------------------------------------------------------------------------

BAD_ARGS = [
    ["--gpus", "0"], ["--gpus", "-8"], ["--gpus", "1e3"], ["--gpus", ",,"], ["--gpus", "8,x"],
    ["--gpus", "99999999999999999999"], ["--gpus", "12"], ["--gpus", "nan"],
    ["--tp", "0"], ["--tp", "65"], ["--tp", "999999999999"], ["--tp", ""], ["--tp", "1.5"],
    ["--max-batch", "0"], ["--max-batch", "100000000"],
    ["--trainer-fractions", "1"], ["--trainer-fractions", "nan"], ["--trainer-fractions", "inf"],
    ["--systems", ""], ["--systems", "laminar,nope"],
    ["--vary", "seed"], ["--vary", "=1"], ["--vary", "seed="], ["--vary", "seed=1,"],
    ["--vary", "seed=!!python/object/apply:os.system [ls]"], ["--vary", "seed=["],
    ["--vary", "seed=*x"], ["--vary", "seed=&a [*a]"], ["--vary", "seed.x=1"],
    ["--vary", "nope=1"], ["--vary", "seed=-1"], ["--vary", "seed=1e999"],
    ["--vary", "cluster.gpus=16"], ["--vary", "cluster=1"], ["--vary", "a..b=1"],
    ["--vary", "seed=" + ",".join(map(str, range(10_001)))],
    [x for i in range(33) for x in ("--vary", f"sim.k{i}=1")],
    ["--set", "nope=1"], ["--set", "cluster.gpus=0"], ["--set", "seed"],
    ["--jobs", "0"], ["--jobs", "x"], ["--top", "0"], ["--top", "1e9"],
    ["--screen-keep", "-1"], ["--screen-keep", "nan"], ["--short-steps", "1"],
    ["--short-warmup", "2"], ["--gpu-hour-price", "0"], ["--gpu-hour-price", "inf"],
    ["--max-points", "0"], ["--max-points", "1000001"], ["--max-points", "x"],
    ["--cache-dir", ""], ["--cache-dir", "/dev/null"], ["--cache-dir", "a\x00b"],
    ["--cache-dir", "c", "--no-cache"], ["--address", ""], ["--address", "nowhere"],
    ["--address", "127.0.0.1:1"], ["--address", "ray://h:99999"], ["--address", " auto"],
    ["--repack", "maybe"], ["--show", "-1"], ["--seed", "-1"], ["--preset", "nope"],
]  # fmt: skip


@pytest.mark.parametrize("bad", BAD_ARGS, ids=lambda a: " ".join(a)[:40])
def test_a_bad_argument_is_one_line_and_exit_2(tmp_path, bad):
    no_cache = [] if "--cache-dir" in bad else ["--no-cache"]
    assert plan(tmp_path, *ONE, *no_cache, *bad)[0] == 2


def test_an_unreachable_address_is_refused_at_once(tmp_path):
    t0 = time.perf_counter()
    code, err = plan(tmp_path, *ONE, "--no-cache", "--address", "127.0.0.1:1")
    assert code == 2 and "--address" in err
    assert time.perf_counter() - t0 < 30


def test_a_simulator_crash_is_a_failed_row_and_a_warning(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("laminar.sim.simulate", crash)
    code, err = plan(tmp_path, *ONE, "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "failed inside the simulator" in err
    row = pd.read_csv(tmp_path / "out" / "plan.csv").iloc[0]
    assert row["status"] == "failed" and "RuntimeError: boom" in row["reason"]
    assert not _entries(tmp_path / "cache")  # a failure is not cached: retried next time


def _die(config):
    os._exit(3)  # a worker killed (out of memory, a signal)


def test_a_dead_worker_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("laminar.plan.executors.evaluate", _die)
    args = ["plan", *SETS, "--out", str(tmp_path / "out"), *ONE, "--jobs", "2",
            "--max-batch", "8,16", "--no-cache"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "worker process died" in err[0]
    assert not (tmp_path / "out").exists()


# The bound ------------------------------------------------------------------------------------


def test_an_over_bound_grid_is_refused_with_its_count_and_estimate(tmp_path):
    t0 = time.perf_counter()
    seeds = ",".join(map(str, range(100)))
    code, err = plan(tmp_path, "--gpus", "8", "--no-cache", "--vary", f"seed={seeds}")
    assert code == 2 and time.perf_counter() - t0 < 20
    line = err.strip().splitlines()[-1]
    count = int(line.split("the grid has ")[1].split(" points")[0].replace(",", ""))
    assert count > 4096 and "CPU-" in line and f"--max-points {count}" in line


def test_a_grid_of_10_to_the_14_is_refused_without_being_built(tmp_path, monkeypatch):
    def no_building(*a, **k):
        raise AssertionError("the grid was built")

    monkeypatch.setattr("laminar.plan.space.iter_points", no_building)
    values = ",".join(map(str, range(100)))
    varies = [x for i in range(7) for x in ("--vary", f"sim.kv_watermark{i}={values}")]
    t0 = time.perf_counter()
    code, err = plan(tmp_path, "--gpus", "8", "--no-cache", *varies)
    assert code == 2 and "split it into plans" in err and time.perf_counter() - t0 < 20


def test_max_points_lets_a_larger_grid_run(tmp_path):
    code, err = plan(tmp_path, *ONE, "--no-cache", "--vary", "seed=0,1,2", "--max-points", "2")
    assert code == 2 and "--max-points 3" in err
    code, _ = plan(tmp_path, *ONE, "--no-cache", "--vary", "seed=0,1,2", "--max-points", "3")
    assert code == 0
    assert pd.read_csv(tmp_path / "out" / "plan.csv")["seed"].tolist() == [0, 1, 2]


# The cache ------------------------------------------------------------------------------------


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*.json") if not p.name.startswith("."))


def _edit(path: Path, **change) -> None:
    entry = json.loads(path.read_text())
    entry.update(change)
    path.write_text(json.dumps(entry))


CORRUPTIONS = {
    "negative staleness": lambda p: _edit(p, staleness_mean=-5),
    "1e300 tokens/s": lambda p: _edit(p, train_tokens_per_s=1e300),
    "wrong GPU count": lambda p: _edit(p, gpus=16),
    "string figure": lambda p: _edit(p, staleness_max="2"),
    "missing figure": lambda p: _drop(p, "gen_tokens_per_s"),
    "another key": lambda p: _edit(p, key="0" * 64),
    "not JSON": lambda p: p.write_text('{"ok": tru'),
    "empty": lambda p: p.write_text(""),
    "NaN constant": lambda p: p.write_text(p.read_text().replace('"staleness_mean": ',
                                                                 '"staleness_mean": NaN, "x": ')),
    "a list": lambda p: p.write_text("[]"),
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "a FIFO": lambda p: (p.unlink(), os.mkfifo(p)),
    "a dangling link": lambda p: (p.unlink(), p.symlink_to(p.parent / "nowhere.json")),
    "huge": lambda p: p.write_text(" " * (2 << 20)),
}  # fmt: skip


def _drop(path: Path, name: str) -> None:
    entry = json.loads(path.read_text())
    del entry[name]
    path.write_text(json.dumps(entry))


THREE = [*ONE, "--max-batch", "8,16,32"]  # three points, six cached simulations
GROUPS = [list(CORRUPTIONS)[i : i + 5] for i in range(0, len(CORRUPTIONS), 5)]


@pytest.mark.parametrize("kinds", GROUPS, ids=lambda g: ", ".join(g))
def test_bad_cache_entries_are_simulated_again_with_a_warning_and_replaced(tmp_path, kinds):
    cache = tmp_path / "cache"
    assert plan(tmp_path, *THREE, "--cache-dir", str(cache))[0] == 0
    first = (tmp_path / "out" / "plan.csv").read_text()
    entries = _entries(cache)
    assert len(entries) == 6
    for kind, entry in zip(kinds, entries, strict=False):
        CORRUPTIONS[kind](entry)
    code, err = plan(tmp_path, *THREE, "--cache-dir", str(cache))
    assert code == 0
    warned = [line for line in err.splitlines() if line.startswith("laminar: warning: plan cache")]
    assert len(warned) == len(kinds) and all("simulating it again" in w for w in warned)
    for entry in entries[: len(kinds)]:
        assert sum(str(entry) in w for w in warned) == 1, (entry, warned)
    assert (tmp_path / "out" / "plan.csv").read_text() == first
    for entry in entries:  # replaced whole: a regular file holding a sound result
        assert entry.is_file() and not entry.is_symlink() and json.loads(entry.read_text())["ok"]
    assert not [p for p in cache.rglob(".*") if p.is_file()]  # no temporary file left
    code, err = plan(tmp_path, *THREE, "--cache-dir", str(cache))
    assert code == 0 and "warning" not in err
    meta = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert meta["simulations_run"] == 0 and meta["cache_hits"] == 6


def test_many_bad_entries_are_counted_after_the_first_five(tmp_path):
    cache = tmp_path / "cache"
    assert plan(tmp_path, *THREE, "--cache-dir", str(cache))[0] == 0
    for entry in _entries(cache):
        entry.write_text("{")
    code, err = plan(tmp_path, *THREE, "--cache-dir", str(cache))
    assert code == 0 and err.count("simulating it again") == 5
    assert "1 more bad plan cache entries" in err


def test_the_cache_check_accepts_what_the_simulator_returns(tmp_path):
    cache = tmp_path / "cache"
    assert plan(tmp_path, *ONE, "--cache-dir", str(cache), "--tp", "1,2", "--max-batch", "8,64",
                "--trainer-fractions", "0.25,0.5")[0] == 0  # fmt: skip
    for path in _entries(cache):
        entry = json.loads(path.read_text())
        assert entry["schema"] == 2 and entry["key"] == path.stem


def test_a_directory_in_an_entrys_place_is_named_and_left_alone(tmp_path):
    cache = tmp_path / "cache"
    assert plan(tmp_path, *ONE, "--cache-dir", str(cache))[0] == 0
    bad = _entries(cache)[0]
    bad.unlink()
    bad.mkdir()
    (bad / "mine.txt").write_text("a user's file")
    code, err = plan(tmp_path, *ONE, "--cache-dir", str(cache))
    assert code == 0 and "is a directory" in err and str(bad) in err
    assert (bad / "mine.txt").read_text() == "a user's file"


def test_problem_names_what_is_wrong():
    cfg = {"cluster": {"gpus": 8}, "workload": {"steps": 3},
           "sim": {"systems": ["laminar"], "max_sim_time_s": 1e7}}  # fmt: skip
    good = {"schema": 2, "key": "k", "ok": True, "system": "laminar", "gpus": 8,
            "trainer_gpus": 4, "replicas": 4, "steps": 3, "steady_state": "yes",
            "train_tokens_per_s": 1e4, "gen_tokens_per_s": 1e4, "staleness_mean": 1.0,
            "staleness_max": 2, "mean_kv_util": 0.5, "rollout_idle_frac": 0.1,
            "actor_stall_s_mean": 0.1, "weight_wait_s_mean": None, "step_time_s_mean": 3.0,
            "wait_frac": 0.5, "train_frac": 0.4, "stall_frac": 0.1}  # fmt: skip
    assert problem(good, "k", cfg) == ""
    for change, named in [
        ({"staleness_max": 4}, "staleness_max"),
        ({"mean_kv_util": 1.5}, "mean_kv_util"),
        ({"wait_frac": -0.1}, "wait_frac"),
        ({"trainer_gpus": 9}, "trainer_gpus"),
        ({"steps": True}, "steps"),
        ({"system": "verl"}, "verl"),
        ({"ok": "yes"}, "ok"),
        ({"schema": 1}, "schema"),
    ]:
        assert named in problem({**good, **change}, "k", cfg), change
    assert problem({"schema": 2, "key": "k", "ok": False, "reason": ""}, "k", cfg)
    assert problem({"schema": 2, "key": "k", "ok": False, "reason": "refused"}, "k", cfg) == ""


def test_a_cache_dir_that_is_a_file_or_inside_the_plan_is_refused(tmp_path):
    (tmp_path / "file").write_text("mine")
    code, err = plan(tmp_path, *ONE, "--cache-dir", str(tmp_path / "file"))
    assert code == 2 and "--cache-dir" in err and (tmp_path / "file").read_text() == "mine"
    code, err = plan(tmp_path, *ONE, "--cache-dir", str(tmp_path / "out" / "cache"))
    assert code == 2 and "inside one another" in err


def test_an_unusable_default_cache_warns_and_plans_without_one(tmp_path, monkeypatch):
    (tmp_path / "xdg").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))
    code, err = plan(tmp_path, *ONE)
    assert code == 0 and "laminar: warning: plan cache" in err and "without a cache" in err


# Cost files -----------------------------------------------------------------------------------


def _cost_file(tmp_path: Path, *, runtime: bool) -> Path:
    from laminar.sim.costdata import derive

    data = json.loads(derive("h800", "qwen2.5-7b", tp=1).to_json())
    if runtime:
        data["runtime"] = {}  # what `laminar calibrate` adds: the local job's figures
    path = tmp_path / ("calibrated.json" if runtime else "cluster.json")
    path.write_text(json.dumps(data))
    return path


def test_a_runtime_calibration_is_refused(tmp_path):
    cost = _cost_file(tmp_path, runtime=True)
    code, err = plan(tmp_path, *ONE, "--no-cache", "--set", f"sim.cost_file={cost}")
    assert code == 2 and "runtime" in err


def test_the_runtime_setting_is_refused(tmp_path):
    code, err = plan(tmp_path, *ONE, "--no-cache", "--set", "sim.setting=runtime")
    assert code == 2 and "sim.setting" in err


def test_a_cluster_cost_file_plans_and_refuses_to_vary_what_it_fixes(tmp_path):
    cost = _cost_file(tmp_path, runtime=False)
    args = [*ONE, "--no-cache", "--set", f"sim.cost_file={cost}"]
    assert plan(tmp_path, *args, "--tp", "1,2")[0] == 0
    df = pd.read_csv(tmp_path / "out" / "plan.csv").set_index("rollout_tp")
    assert df.loc[1, "status"] == "full" and df.loc[2, "status"] == "rejected"
    assert "rollout replicas" in df.loc[2, "reason"]  # the file describes TP 1 replicas
    code, err = plan(tmp_path, *args, "--vary", "cluster.hardware=h100,h800", out="again")
    assert code == 2 and "cluster.hardware" in err


@pytest.mark.parametrize("kind", ["fifo", "missing", "directory", "device", "not json"])
def test_a_bad_cost_file_is_one_line(tmp_path, kind):
    path = tmp_path / "cost.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "not json":
        path.write_text("{")
    t0 = time.perf_counter()
    code, err = plan(tmp_path, *ONE, "--no-cache", "--set", f"sim.cost_file={path}")
    assert code == 2 and str(path) in err and time.perf_counter() - t0 < 20


# Fuzz -----------------------------------------------------------------------------------------

HOSTILE = ["", " ", ",", "0", "-1", "1e3", "nan", "inf", "x", "[", "]", "{", "*a", "&a [*a]",
           "!!python/name:os.system", "1,1", "8,16", "2,4", "1_0", "0x8", "٨", "\x00", "é" * 3,
           "9" * 30, "1," * 5, "true", "null", "~"]  # fmt: skip
KEYS = ["seed", "sim.kv_watermark", "cluster.gpus", "model.rollout_tp", "sim.systems",
        "cluster", "nope", "cluster.gpus_per_machine", "sim.setting", "sim.cost_file",
        "workload.steps", "repack.interval_s", "model", ""]  # fmt: skip
numbers = st.lists(st.integers(-2, 40), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v)))
plausible = st.sampled_from(["8", "16", "8,16", "4", "1,2", "2", "0.01,0.05", "3", "laminar",
                             "auto", "cluster", "[1]", "{a: 1}", "1.5", "-0"])  # fmt: skip
lists = st.one_of(plausible, numbers, st.sampled_from(HOSTILE), st.text(max_size=12))


FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples each run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(
    gpus=st.one_of(st.none(), lists),
    tp=st.one_of(st.none(), lists),
    vary=st.lists(st.tuples(st.sampled_from(KEYS), lists), max_size=2),
)
def test_fuzz_gpus_tp_and_vary(tmp_path_factory, gpus, tp, vary):
    tmp_path = tmp_path_factory.mktemp("fuzz")
    args = ["--systems", "laminar", "--trainer-fractions", "0.5", "--max-batch", "8",
            "--repack", "on", "--jobs", "1", "--short-steps", "2", "--no-cache",
            "--max-points", "4"]  # fmt: skip
    for flag, value in (("--gpus", gpus), ("--tp", tp)):
        if value is not None:
            args += [flag, value]
    for key, value in vary:
        args += ["--vary", f"{key}={value}"]
    if "\x00" in "".join(args):
        return  # the OS refuses such an argument before laminar sees it
    plan(tmp_path, *args)
