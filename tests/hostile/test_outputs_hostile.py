"""No command writes over, or deletes, what is not its own output (issue 32, "Data loss").

Each case runs the command as a user would and checks that it fails with exit 2 and a one-line
message, and that every input (the whole tree around it) is byte-identical afterwards.
"""

from __future__ import annotations

import json
import os

import pytest

from laminar.cli import main
from laminar.rundir import MARKER, prepare_out, run_output
from laminar.runtime.run.resume import RunLog, load_resume
from tests.hostile.rundirs import calibration_run, train_run, tree


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {"train": train_run(root), "cal": calibration_run(root)}


@pytest.fixture
def place(runs, tmp_path, monkeypatch):
    """A fresh copy of the runs in ``tmp_path`` (the working directory)."""
    import shutil

    for name, src in runs.items():
        shutil.copytree(src, tmp_path / name, symlinks=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(capsys, args: list[str], *words: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("laminar: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


PLOT_OVER_ITS_INPUT = [
    (["train"], []),
    (["train/"], ["--force"]),
    (["train/profile/.."], []),
    (["link"], []),  # a symbolic link to the run
    ([".."], ["--force"]),  # a directory holding the run
    (["train/summary.json"], ["--force"]),  # a file of the run
    (["train/profile"], ["--force"]),  # a directory of the run
]


@pytest.mark.parametrize(("out", "extra"), PLOT_OVER_ITS_INPUT)
def test_plot_never_writes_over_the_run_it_draws(place, capsys, out, extra):
    os.symlink("train", place / "link")
    before = tree(place)
    _refused(capsys, ["plot", "train", "--out", *out, *extra])
    assert tree(place) == before


def test_plot_over_a_simulated_run_it_draws_is_refused_too(place, capsys):
    """Not the kind rule (plot's output over a simulation's) but the input rule: a run of the
    same kind of marker, or none, is still the input."""
    (place / "train" / MARKER).write_text(json.dumps({"command": "laminar", "entries": []}))
    before = tree(place)
    _refused(capsys, ["plot", "train", "--out", "train", "--force"], "input")
    assert tree(place) == before


def test_plot_into_its_default_place_inside_the_run_still_works(place, capsys):
    before = tree(place / "train")
    assert main(["plot", "train"]) == 0
    assert main(["plot", "train"]) == 0  # its own previous output there is replaced
    after = tree(place / "train")
    assert {k: v for k, v in after.items() if not k.startswith("plots")} == before


@pytest.mark.parametrize(
    "out", ["cal/config.yaml", "cal/new.json", "cal/profile/machine.json", "train/cost.json"]
)
def test_calibrate_never_writes_into_a_run_directory(place, capsys, out):
    before = tree(place)
    _refused(capsys, ["calibrate", "cal", "-o", out])
    assert tree(place) == before


def test_calibrate_over_its_input_through_a_link_is_refused(place, capsys):
    os.symlink("cal/config.yaml", place / "cost.json")
    before = tree(place)
    _refused(capsys, ["calibrate", "cal", "-o", "cost.json"], "input")
    assert tree(place) == before


@pytest.mark.parametrize(
    "args",
    [
        ["trace", "synth", "dapo-math", "-o", "train/trajectories.parquet"],
        ["trace", "synth", "dapo-math", "-o", "train/profile/new.csv"],
        ["trace", "show", "train/trajectories.parquet", "--plot", "train/trajectories.parquet"],
        ["trace", "show", "train/trajectories.parquet", "--plot", "lengths.png/../train/x.png"],
    ],
)
def test_a_single_file_output_never_lands_in_a_run_directory(place, capsys, args):
    before = tree(place)
    _refused(capsys, args)
    assert tree(place) == before


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_simulate_never_replaces_a_training_run(place, capsys, force):
    before = tree(place)
    _refused(capsys, ["simulate", "--out", "train", *force], "laminar train", "--force")
    assert tree(place) == before


def test_another_kind_of_run_is_replaced_only_with_force(tmp_path):
    with run_output(tmp_path / "p", command="plot") as d:
        (d / "a.png").write_text("png")
    with pytest.raises(Exception, match="not one of `laminar simulate`"):
        prepare_out(tmp_path / "p", command="simulate")
    assert prepare_out(tmp_path / "p", command="simulate", force=True).mode == "replace"
    assert prepare_out(tmp_path / "p", command="plot").mode == "replace"


def test_simulate_over_the_directory_holding_its_config_is_refused(place, capsys):
    assert main(["simulate", "--set", "workload.steps=2", "--set", "cluster.gpus=16",
                 "--set", "workload.prompts_per_step=8", "--out", "sim"]) == 0  # fmt: skip
    capsys.readouterr()
    before = tree(place)
    _refused(capsys, ["simulate", "sim/config.yaml", "--out", "sim"], "holds", "config.yaml")
    assert tree(place) == before


def test_train_over_the_directory_holding_its_config_is_refused(place, capsys):
    before = tree(place)
    _refused(capsys, ["train", "train/config.yaml", "--out", "train"], "holds", "config.yaml")
    assert tree(place) == before


def test_a_marker_naming_dot_dot_removes_nothing_outside(place, capsys):
    """A hostile marker listing ``..`` as one of its entries: a forced write into that
    directory removes a previous run's entries, never the directory's parent."""
    d = place / "foreign"
    d.mkdir()
    (d / "mine.txt").write_text("keep")
    (d / MARKER).write_text(json.dumps({"command": "plot", "entries": ["..", ".", "", "/x"]}))
    with run_output(d, force=True, command="plot") as stage:
        (stage / "a.png").write_text("png")
    assert (place / "train" / "summary.json").is_file() and (d / "mine.txt").read_text() == "keep"


# laminar train: a failed start gives everything back -------------------------------------------


def _failing_driver(monkeypatch, error: BaseException) -> None:
    from laminar.runtime.run import driver

    def train(cfg, *, log, **kwargs):
        assert log.out.is_dir()  # the run had started writing its directory
        raise error

    monkeypatch.setattr(driver, "train", train)


FAILED_STARTS = [
    RuntimeError("no Ray at that address"),  # the driver's error, as it comes
    KeyboardInterrupt(),  # Ctrl-C while Ray starts: exit 130
    SystemExit(15),  # Ray's own SIGTERM handler while it connects
]


@pytest.mark.parametrize("error", FAILED_STARTS, ids=lambda e: type(e).__name__)
def test_train_over_a_previous_run_that_fails_to_start_gives_it_back(place, monkeypatch, error):
    _failing_driver(monkeypatch, error)
    before = tree(place)
    args = ["train", "--steps", "2", "--out", "train", "--no-progress"]
    if isinstance(error, KeyboardInterrupt):
        assert main(args) == 130
    else:
        with pytest.raises(type(error)):
            main(args)
    assert tree(place) == before


def test_a_failed_resume_leaves_the_run_as_it_was(place, monkeypatch):
    """A resume that fails before its first step (here: its Ray does not start) changes no
    file: config.yaml keeps the run's own config, and a plain --resume still loads it."""
    _failing_driver(monkeypatch, RuntimeError("no Ray"))
    before = tree(place)
    with pytest.raises(RuntimeError):
        main(["train", "--resume", "train", "--set", "runtime.rollouts=1", "--steps", "4"])
    assert tree(place) == before
    cfg, state = load_resume(place / "train")
    assert cfg.runtime.rollouts != 1 and state.step == 2


def test_a_resumed_run_writes_its_config_with_its_first_step(place):
    from laminar.config import load_config

    cfg = load_config(place / "train" / "config.yaml", overrides=["workload.steps=9"])
    before = tree(place / "train")
    log = RunLog.reopen(place / "train", cfg)
    log.write_faults([{"kind": "kill-rollout"}])  # waits for the first step too
    assert tree(place / "train") == before
    _, state = load_resume(place / "train")
    log.write_steps(state.steps)
    assert load_config(place / "train" / "config.yaml").workload.steps == 9
    log.write_faults([{"kind": "kill-rollout"}])
    assert json.loads((place / "train" / "faults.json").read_text()) == [{"kind": "kill-rollout"}]


def test_a_fresh_run_drops_the_previous_one_only_with_its_first_step(place):
    from laminar.config import load_config

    cfg = load_config(place / "train" / "config.yaml")
    log = RunLog.create(prepare_out("train", command="train"), cfg)
    hidden = [p for p in place.iterdir() if p.name.startswith(".train.previous-")]
    assert len(hidden) == 1 and (hidden[0] / "summary.json").is_file()
    log.write_steps([{"step": 0}])
    assert not hidden[0].exists() and not log.give_back()


def test_a_restarted_trajectory_starts_on_the_runs_clock(place):
    """A sample no pool held at the checkpoint restarts from its prompt; its start is on the
    run's clock (the checkpoint's elapsed seconds), not the wall clock: the resumed run's
    trajectory trace (gen_end_s >= gen_start_s) must hold it."""
    from laminar.runtime.records import PromptGroup
    from laminar.runtime.run.resume import orphans_to_resume

    _, state = load_resume(place / "train")
    state.pools["prompts"]["issued"] += 1  # a group handed out that neither pool holds
    fresh = orphans_to_resume(state, lambda pid: PromptGroup(pid, (1, 2), 4), 4, 8)
    lost = [t for t in fresh if t.version == -1]
    assert len(lost) == 4 and {t.gen_start_s for t in lost} == {state.meta["elapsed_s"]}
