"""Run directories spoiled one file at a time (issue 32, "Runs"): ``laminar plot``,
``laminar calibrate`` and the reader of ``laminar train --resume`` end in exit 0 with sane
output, or exit 2 with one line naming the run; never a traceback, a hang or shifted numbers.

Each example copies a fixture run (``tests/hostile/rundirs.py``), damages one file
(``tests/hostile/corrupt.py``) and runs the command in-process through the CLI fuzzer's
contract (``tests/test_fuzz_cli.run_cli``: exit 0 or 2, one error line, inputs unchanged).
The default run draws a few examples per command; ``-m slow`` draws many more.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laminar.cli import main
from laminar.errors import LaminarError
from laminar.runtime.run.resume import load_resume
from laminar.sim.cost import load_cost_file
from tests.calibrate.test_speed import _probe as probe
from tests.hostile.corrupt import BAD_VALUES, damage
from tests.hostile.rundirs import CHECKPOINT_STEP, calibration_run, train_run
from tests.test_fuzz_cli import FUZZ, _n, run_cli

EXAMPLES = 6  # per command in the default run (each plot example draws six figures)
CKPT = f"checkpoints/step-{CHECKPOINT_STEP:06d}"
PLOT_TRAIN = ["summary.json", "steps.csv", "trajectories.parquet", "events.csv", "kv.csv",
              "config.yaml"]  # fmt: skip
PLOT_SIM = ["summary.csv", "steps.csv", "trajectories.parquet", "replicas.parquet"]
PROFILE = ["engine_steps.csv", "trainer_steps.csv", "weight_loads.csv", "machine.json",
           "speed_probe.csv", "core_cpu.csv"]  # fmt: skip
CALIBRATE = ["config.yaml", "summary.json", "steps.csv", "trajectories.parquet",
             *(f"profile/{n}" for n in PROFILE)]  # fmt: skip
RESUME = ["config.yaml", "steps.csv", "checkpoints/LATEST", f"{CKPT}/meta.json",
          f"{CKPT}/pools.json"]  # fmt: skip


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-runs")
    train = train_run(root)
    cal = probe(calibration_run(root), 0.004, 0.001)  # with summary, steps and speed probe
    shutil.copy(train / "trajectories.parquet", cal)  # all that calibration reads
    sim = root / "sim"
    small = ["workload.steps=2", "cluster.gpus=16", "workload.prompts_per_step=8"]
    argv = ["simulate", *(a for kv in small for a in ("--set", kv)), "--out", str(sim)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return {"train": train, "cal": cal, "sim": sim}


def _damaged(draw, src: Path, names: list[str]) -> tuple[Path, str, str]:
    """A copy of the run ``src`` in a fresh directory with one of ``names`` damaged."""
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    shutil.copytree(src, work / "run", symlinks=True)
    name = draw(st.sampled_from(names))
    how = damage(draw, work / "run" / name)
    return work, name, how


def _check(code: int, err: str, name: str, how: str) -> None:
    if code == 2:  # the run is named (the file itself, where the damage is found in it)
        assert "run" in err, (name, how, err)


def _plot(data, src: Path, names: list[str]) -> None:
    work, name, how = _damaged(data.draw, src, names)
    try:
        code, err = run_cli(["plot", "run", "--out", "plots"], work, "plots")
        _check(code, err, name, how)
        if code == 0:
            assert any(p.suffix == ".png" for p in (work / "plots").iterdir()), (name, how)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(FUZZ, max_examples=_n(EXAMPLES))
@given(data=st.data())
def test_plot_of_a_damaged_training_run(fixtures, data):
    _plot(data, fixtures["train"], PLOT_TRAIN)


@settings(FUZZ, max_examples=_n(EXAMPLES))
@given(data=st.data())
def test_plot_of_a_damaged_simulated_run(fixtures, data):
    _plot(data, fixtures["sim"], PLOT_SIM)


def _calibrate(data, src: Path) -> None:
    work, name, how = _damaged(data.draw, src, CALIBRATE)
    try:
        code, err = run_cli(["calibrate", "run", "-o", "cost.json"], work, "cost.json")
        _check(code, err, name, how)
        if code == 0:  # a cost file that loads, every coefficient a finite number
            model = load_cost_file(work / "cost.json")
            assert all(math.isfinite(c.value) for c in model.coefficients.values()), (name, how)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(FUZZ, max_examples=_n(EXAMPLES))
@given(data=st.data())
def test_calibrate_a_damaged_run(fixtures, data):
    _calibrate(data, fixtures["cal"])


def _resume(data, src: Path) -> None:
    work, name, how = _damaged(data.draw, src, RESUME)
    try:
        try:
            _, state = load_resume(work / "run")
        except LaminarError as e:
            # config.yaml goes through the config loader, whose YAML parse errors keep the
            # parser's own lines; every run-directory reader's message is one line
            one_line = name == "config.yaml" or "\n" not in str(e)
            assert one_line and str(work / "run") in str(e), (name, how, str(e))
        else:
            assert state.step == CHECKPOINT_STEP and len(state.steps) == CHECKPOINT_STEP + 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(FUZZ, max_examples=_n(EXAMPLES))
@given(data=st.data())
def test_the_resume_reader_on_a_damaged_run(fixtures, data):
    _resume(data, fixtures["train"])


def _forge(data, src: Path) -> None:
    """A pools.json changed and its hash in meta.json updated to match (a forgery, or a bug
    writing both): every field is still checked, never trusted."""
    work = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        run = shutil.copytree(src, work / "run")
        pools, meta = run / CKPT / "pools.json", run / CKPT / "meta.json"
        doc = json.loads(pools.read_text())
        node, key = _pick(data.draw, doc)
        node[key] = data.draw(st.sampled_from([*BAD_VALUES, "nan", 2**70]))
        pools.write_text(json.dumps(doc))
        m = json.loads(meta.read_text())
        m["pools_sha256"] = hashlib.sha256(pools.read_bytes()).hexdigest()
        meta.write_text(json.dumps(m))
        try:
            load_resume(run)
        except LaminarError as e:
            assert "pools.json" in str(e) and "\n" not in str(e), str(e)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pick(draw, doc):
    """A (container, key) somewhere in ``doc``, a few levels down."""
    node, key = {"doc": doc}, "doc"
    for _ in range(draw(st.integers(1, 5))):
        child = node[key]
        if not isinstance(child, dict | list) or not child:
            break
        keys = list(child) if isinstance(child, dict) else list(range(len(child)))
        node, key = child, draw(st.sampled_from(keys))
    return node, key


@settings(FUZZ, max_examples=_n(EXAMPLES))
@given(data=st.data())
def test_a_forged_pools_file_is_checked_field_by_field(fixtures, data):
    _forge(data, fixtures["train"])


# More of each, for a second command in CI --------------------------------------------------------

@pytest.mark.slow
@settings(FUZZ, max_examples=_n(150))
@given(data=st.data())
def test_many_damaged_runs(fixtures, data):
    kind = data.draw(st.sampled_from(["train", "sim", "cal", "resume", "forge"]))
    if kind == "train":
        _plot(data, fixtures["train"], PLOT_TRAIN)
    elif kind == "sim":
        _plot(data, fixtures["sim"], PLOT_SIM)
    elif kind == "cal":
        _calibrate(data, fixtures["cal"])
    elif kind == "resume":
        _resume(data, fixtures["train"])
    else:
        _forge(data, fixtures["train"])


# sessions.json: what --resume would kill and remove ----------------------------------------------

HOSTILE_SESSIONS = [
    [{"run_id": "", "ended": False}],  # would mark every process with "laminar-" in its environment
    [{"run_id": "0123456789/../../..", "ended": False}],  # a path outside the scratch roots
    [{"run_id": 7}],
    {"run_id": "0123456789"},
    "fifo",
]


@pytest.mark.parametrize("rows", HOSTILE_SESSIONS, ids=["empty", "dotdot", "number", "object",
                                                        "fifo"])  # fmt: skip
def test_resume_refuses_a_sessions_file_it_did_not_write(fixtures, tmp_path, monkeypatch, capsys,
                                                         rows):  # fmt: skip
    import os

    from laminar.runtime.run import driver
    from tests.hostile.rundirs import tree

    def never(*args, **kwargs):
        raise AssertionError("the driver started")

    monkeypatch.setattr(driver, "train", never)
    run = shutil.copytree(fixtures["train"], tmp_path / "run")
    if rows == "fifo":
        os.mkfifo(run / "sessions.json")
    else:
        (run / "sessions.json").write_text(json.dumps(rows))
    before = tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--resume", "run"]) == 2
    err = capsys.readouterr().err
    assert "sessions.json" in err and err.count("\n") == 1, err
    assert tree(tmp_path) == before
