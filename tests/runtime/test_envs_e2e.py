"""``laminar train`` with an environment of your own (issue 29, item 1), end to end on CPU: a
user module outside the repository, named only in the config file beside it, trains the tiny
model; the rewards the run records are the environment's, and a reward that raises costs its
trajectories only (counted in the summary)."""

from __future__ import annotations

import json
import textwrap

import pytest

from laminar.cli import main
from laminar.traces import read_trace
from tests.runtime.test_train_e2e import warmup_sets

pytestmark = pytest.mark.slow

MODULE = '''
class Letters:
    """Write a letter n times; chat messages; prompt index % 8 == 1 makes reward() raise."""

    def __init__(self, args, seed):
        self.letters = args["letters"]

    def prompt(self, index):
        n = 1 + index % 5
        c = self.letters[index % len(self.letters)]
        return {"id": f"q{index}", "messages": [{"role": "user", "content": f"{n}*{c}="}],
                "want": c * n, "index": index}

    def target(self, sample):
        return sample["want"]

    async def reward(self, sample, messages):
        if sample["index"] % 8 == 1:
            raise KeyError("grader offline")
        return 1.0 if messages[-1]["content"] == sample["want"] else 0.125


def make(args, seed):
    return Letters(args, seed)
'''


def test_a_user_environment_trains_and_its_rewards_are_recorded(tmp_path):
    user = tmp_path / "elsewhere"
    user.mkdir()
    (user / "laminar_e2e_letters.py").write_text(MODULE)
    config = user / "task.yaml"
    config.write_text(textwrap.dedent("""\
        runtime:
          task:
            type: python
            entry: laminar_e2e_letters:make
            args: {letters: abc}
            timeout_s: 5
        """))  # fmt: skip
    sets = [x for kv in warmup_sets(tmp_path) for x in ("--set", kv)]
    out = tmp_path / "run"
    args = ["train", str(config), "--preset", "tiny-cpu", "--mode", "laminar", "--steps", "3",
            "--no-progress", "--out", str(out), "--set", "workload.prompts_per_step=4",
            "--set", "workload.samples_per_prompt=4", "--set", "runtime.max_batch=16",
            "--set", "runtime.loggers=[tensorboard, mlflow]", *sets]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["trajectories_lost"] == 0
    assert summary["warmup_s"] > 0  # the environment's target() taught the warm-up
    trace = read_trace(out / "trajectories.parquet")
    index = trace["prompt_id"]
    assert list(trace["source_prompt_id"]) == [f"q{i}" for i in index]
    failing = trace[index % 8 == 1]
    assert (failing["reward"] == 0.0).all()
    assert summary["env_errors"] == {"reward_raised": len(failing)} and len(failing) > 0
    assert "KeyError: 'grader offline'" in summary["env_error_examples"]["reward_raised"]
    scored = trace[index % 8 != 1]
    assert set(scored["reward"]) <= {1.0, 0.125}  # the environment's rewards, as it gave them
    assert (out / "config.yaml").read_text().count(str(user)) == 1  # module_dir, for --resume
    _trackers_hold_the_steps(out)


def _trackers_hold_the_steps(out) -> None:
    """runtime.loggers (issue 29, item 4): steps.csv's rows in TensorBoard and MLflow."""
    import os

    import pandas as pd
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    steps = pd.read_csv(out / "steps.csv")
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    tb = acc.Scalars("reward_mean")
    assert [e.step for e in tb] == list(steps["step"])
    assert [e.value for e in tb] == pytest.approx(list(steps["reward_mean"]), rel=1e-6)
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(out / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("laminar").experiment_id])
    history = client.get_metric_history(run.info.run_id, "train_s")
    assert sorted(m.step for m in history) == list(steps["step"])
