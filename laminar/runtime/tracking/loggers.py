"""Experiment trackers beside the run directory's CSVs (``runtime.loggers``, issue 29 item 4).

Every trainer step's row of ``steps.csv`` (throughputs, staleness, reward, losses, KL,
weight-sync and stage times) goes to each tracker under the same names, at the row's ``step``;
only numbers are sent (booleans as 0/1). Each tracker writes under the run directory and needs
no network:

- ``tensorboard``: event files in ``RUN/tensorboard/`` (``tensorboard --logdir RUN/tensorboard``);
- ``wandb``: an offline run in ``RUN/wandb/`` (``wandb sync RUN/wandb/offline-run-*`` uploads it);
- ``mlflow``: a file store in ``RUN/mlruns/`` (``MLFLOW_ALLOW_FILE_STORE=true mlflow ui
  --backend-store-uri RUN/mlruns``: MLflow 3 opens file stores only with that variable, which
  the logger sets for itself), experiment ``laminar``, the config's fields as parameters.

Each is an optional dependency, imported only when named: :func:`check_loggers` refuses a
missing one at start (a ``ConfigError``: exit 2) naming the package to install.
"""

from __future__ import annotations

import math
import numbers
import time
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError

PACKAGES = {  # logger -> (module imported, what to install)
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow-skinny (or mlflow)"),
}
EXPERIMENT = "laminar"


def check_loggers(names: list[str]) -> None:
    """A ``ConfigError`` naming the package of the first logger that cannot be imported."""
    import importlib

    for name in names:
        module, package = PACKAGES[name]
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(
                "runtime.loggers", "", f"{name!r} needs the {module} package, which cannot be "
                f"imported ({e}): pip install {package} — or drop {name!r} from runtime.loggers"
            ) from None


def scalars(row: dict) -> dict[str, float]:
    """The numbers of a step row (booleans as 0/1; text, lists and missing values left out)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, numbers.Real) and not (isinstance(v, float) and math.isnan(v)):
            out[str(k)] = float(v)
    return out


class TensorBoardLogger:
    """Scalars into a TensorBoard event file (tensorboard's own writer: no torch needed)."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.dir = run_dir / "tensorboard"
        self.writer = EventFileWriter(str(self.dir))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()]
        event = Event(wall_time=time.time(), step=step, summary=Summary(value=values))
        self.writer.add_event(event)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """An offline W&B run (``mode="offline"``: nothing leaves the machine)."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        import wandb

        self.dir = run_dir / "wandb"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            mode="offline", dir=str(run_dir), project=EXPERIMENT, name=name, config=config
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowLogger:
    """An MLflow run in a file store under the run directory."""

    def __init__(self, run_dir: Path, name: str, config: dict):
        import os

        # MLflow 3 keeps the file store only behind this opt-out (a database needs SQLAlchemy,
        # which mlflow-skinny lacks); it is what a run directory can hold without a service
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        self.dir = run_dir / "mlruns"
        self.client = MlflowClient(tracking_uri=self.dir.resolve().as_uri())
        exp = self.client.get_experiment_by_name(EXPERIMENT)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(EXPERIMENT)
        self.run_id = self.client.create_run(exp_id, run_name=name).info.run_id
        params = {k: str(v)[:500] for k, v in _flat(config).items()}
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            from mlflow.entities import Param

            batch = list(params.items())[i : i + 100]
            self.client.log_batch(self.run_id, params=[Param(k, v) for k, v in batch])

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        ms = int(time.time() * 1000)
        batch = [Metric(k, v, ms, step) for k, v in metrics.items() if math.isfinite(v)]
        self.client.log_batch(self.run_id, metrics=batch)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


LOGGERS = {"tensorboard": TensorBoardLogger, "wandb": WandbLogger, "mlflow": MlflowLogger}


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class Trackers:
    """The run's trackers: opened at the first step (the run directory is the run's by then),
    each step row logged to every one, closed at the end. A tracker that fails mid-run is
    reported once and dropped; the run and its CSVs go on."""

    def __init__(self, names: list[str], run_dir: str | Path, config: dict | None = None):
        self.names = list(dict.fromkeys(names))
        self.run_dir = Path(run_dir)
        self.config = config or {}
        self.open: dict[str, Any] | None = None
        self.failed: dict[str, str] = {}

    def _start(self) -> dict[str, Any]:
        self.open = {}
        for name in self.names:
            try:
                self.open[name] = LOGGERS[name](self.run_dir, self.run_dir.name, self.config)
            except Exception as e:  # a tracker is never worth the run
                self._fail(name, e)
        return self.open

    def _fail(self, name: str, e: Exception) -> None:
        import sys

        self.failed[name] = f"{type(e).__name__}: {e}"
        print(f"laminar train: warning: logger {name!r} stopped: {self.failed[name]}",
              file=sys.stderr)  # fmt: skip

    def log(self, row: dict) -> None:
        """One step row of ``steps.csv``."""
        if not self.names:
            return
        trackers = self.open if self.open is not None else self._start()
        metrics = scalars(row)
        step = int(row.get("step", 0))
        for name, tracker in list(trackers.items()):
            try:
                tracker.log(step, metrics)
            except Exception as e:
                del trackers[name]
                self._fail(name, e)

    def close(self) -> None:
        for name, tracker in (self.open or {}).items():
            try:
                tracker.close()
            except Exception as e:
                self._fail(name, e)
        self.open = {}
