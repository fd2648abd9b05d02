"""Experiment tracking (``runtime.loggers``, issue 29 item 4), fast: step rows like
``steps.csv``'s go to TensorBoard event files and an MLflow file store under the run
directory, read back here with each tool's own reader; W&B runs offline (a stand-in module
records what it is asked, the real package being optional); a missing package is refused at
start naming what to install."""

from __future__ import annotations

import math
import sys
import types

import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.runtime.tracking.loggers import Trackers, check_loggers, scalars

ROWS = [
    {"mode": "laminar", "step": i, "version": i + 1, "reward_mean": 0.25 * i,
     "train_tokens_per_s": 1000.0 + i, "staleness_mean": 0.5, "staleness_max": 1,
     "kl": math.nan, "weight_sync_s": 0.01 * (i + 1), "loads": [1, 2], "resumed": True}
    for i in range(3)
]  # fmt: skip


def test_scalars_are_the_numbers_of_a_row():
    got = scalars(ROWS[1])
    assert got["reward_mean"] == 0.25 and got["staleness_max"] == 1.0 and got["resumed"] == 1.0
    assert "mode" not in got and "loads" not in got and "kl" not in got  # text, list, NaN


def test_tensorboard_event_files_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    t = Trackers(["tensorboard"], tmp_path, {"seed": 0})
    for row in ROWS:
        t.log(row)
    t.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"reward_mean", "train_tokens_per_s", "staleness_max", "weight_sync_s"} <= tags
    reward = acc.Scalars("reward_mean")
    assert [e.step for e in reward] == [0, 1, 2]
    assert [e.value for e in reward] == pytest.approx([0.0, 0.25, 0.5])
    assert [e.value for e in acc.Scalars("weight_sync_s")] == pytest.approx([0.01, 0.02, 0.03])


def test_mlflow_file_store_reads_back(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 reads file stores so
    from mlflow.tracking import MlflowClient

    t = Trackers(["mlflow"], tmp_path / "run-x", {"runtime": {"mode": "laminar", "loggers": []}})
    for row in ROWS:
        t.log(row)
    t.close()
    client = MlflowClient(tracking_uri=(tmp_path / "run-x" / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("laminar").experiment_id])
    assert run.info.run_name == "run-x" and run.info.status == "FINISHED"
    assert run.data.params["runtime.mode"] == "laminar"
    history = client.get_metric_history(run.info.run_id, "reward_mean")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.0), (1, 0.25), (2, 0.5)]
    assert run.data.metrics["train_tokens_per_s"] == 1002.0  # the latest step's
    assert "kl" not in run.data.metrics


def test_wandb_runs_offline_in_the_run_directory(tmp_path, monkeypatch):
    calls = {"log": []}

    class Run:
        def log(self, metrics, step):
            calls["log"].append((step, metrics))

        def finish(self):
            calls["finished"] = True

    def init(**kwargs):
        calls["init"] = kwargs
        return Run()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    check_loggers(["wandb"])
    t = Trackers(["wandb"], tmp_path / "run-w", {"seed": 3})
    for row in ROWS:
        t.log(row)
    t.close()
    init_kw = calls["init"]
    assert init_kw["mode"] == "offline" and init_kw["dir"] == str(tmp_path / "run-w")
    assert init_kw["name"] == "run-w" and init_kw["config"] == {"seed": 3}
    assert [s for s, _ in calls["log"]] == [0, 1, 2] and calls["finished"]
    assert calls["log"][2][1]["reward_mean"] == 0.5


def test_a_failing_tracker_is_dropped_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tensorboard")

    class Broken:
        def __init__(self, *a):
            pass

        def log(self, step, metrics):
            raise OSError("disk full")

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace())
    from laminar.runtime.tracking import loggers

    monkeypatch.setitem(loggers.LOGGERS, "wandb", Broken)
    t = Trackers(["wandb", "tensorboard"], tmp_path, {})
    for row in ROWS:
        t.log(row)
    t.close()
    assert t.failed == {"wandb": "OSError: disk full"}
    assert "logger 'wandb' stopped: OSError: disk full" in capsys.readouterr().err
    assert any((tmp_path / "tensorboard").iterdir())


def test_a_missing_package_is_refused_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(ConfigError, match=r"runtime.loggers: 'wandb' needs the wandb package"):
        check_loggers(["tensorboard", "wandb"] if "tensorboard" in sys.modules else ["wandb"])
    cfg = load_config(overrides=["runtime.loggers=[tensorboard, mlflow]"])
    assert cfg.runtime.loggers == ["tensorboard", "mlflow"]
    with pytest.raises(ConfigError):
        load_config(overrides=["runtime.loggers=[neptune]"])


def test_laminar_train_refuses_a_missing_logger_at_start_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)
    out = tmp_path / "run"
    args = ["train", "--preset", "tiny-cpu", "--set", "runtime.loggers=[wandb]", "--out",
            str(out), "--no-progress"]  # fmt: skip
    assert main(args) == 2
    assert "pip install wandb" in capsys.readouterr().err and not out.exists()
