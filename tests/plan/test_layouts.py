"""``laminar plan`` searches the trainer's parallel layout too (issue 30, item 2)."""

from __future__ import annotations

import dataclasses

import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.plan import PlanOptions, SearchSpace, run_plan
from laminar.plan.space import check_extra, count_points, enumerate_points, trainer_layouts

MOE = [
    "model.name=qwen3-30b-a3b",
    "model.rollout_tp=2",
    "cluster.gpus=16",
    "workload.prompts_per_step=4",
    "workload.samples_per_prompt=4",
    "workload.max_prompt_len=256",
    "workload.max_response_len=1024",
    "workload.steps=3",
    "sim.warmup_steps=1",
]
SPACE = SearchSpace(
    gpus=(16,), systems=("verl",), trainer_fractions=(0.5,), rollout_tps=(2,), max_batches=(64,)
)


def test_auto_tries_data_parallel_and_expert_parallel_for_moe():
    base = load_config(overrides=MOE)
    assert trainer_layouts(base, SPACE) == [(1, 1, 1, 1), (1, 1, 8, 1)]
    dense = load_config(overrides=["cluster.gpus=16"])
    assert trainer_layouts(dense, SPACE) == [(1, 1, 1, 1)]  # the grid of a dense model as before
    given = load_config(overrides=["cluster.gpus=16", "trainer.tp=2"])
    assert trainer_layouts(given, SPACE) == [(2, 1, 1, 1), (1, 1, 1, 1)]  # the config's first


def test_points_carry_their_layout_and_the_count_agrees():
    base = load_config(overrides=MOE)
    space = dataclasses.replace(SPACE, trainer_layouts=("auto", "2x1x8x1"))
    points = enumerate_points(base, space)
    assert count_points(base, space) == len(points) == 3
    assert [p.trainer_layout for p in points] == [(1, 1, 1, 1), (1, 1, 8, 1), (2, 1, 8, 1)]
    ov = dict(points[2].overrides)
    assert (ov["trainer.tp"], ov["trainer.ep"], ov["trainer.pp"], ov["trainer.cp"]) == (2, 8, 1, 1)


def test_a_bad_layout_or_a_varied_layout_key_is_refused():
    base = load_config(overrides=MOE)
    with pytest.raises(ConfigError) as e:
        trainer_layouts(base, dataclasses.replace(SPACE, trainer_layouts=("2x1x8",)))
    assert e.value.key_path == "--trainer-layouts"
    with pytest.raises(ConfigError, match="--trainer-layouts"):
        check_extra(dataclasses.replace(SPACE, extra={"trainer.ep": (1, 8)}))


def test_the_plan_simulates_each_layout_and_rejects_what_cannot_be_laid():
    base = load_config(overrides=MOE)
    space = dataclasses.replace(SPACE, trainer_layouts=("1x1x1x1", "1x1x8x1", "3x1x1x1"))
    opts = PlanOptions(short_steps=2, short_warmup=1, top=1, progress=False, screen_keep=0.0)
    df = run_plan(base, space, opts).points.set_index("trainer_layout")
    assert df.loc["3x1x1x1", "status"] == "rejected" and "trainer.tp" in df.loc["3x1x1x1", "reason"]
    ok = df.loc[["1x1x1x1", "1x1x8x1"]]
    assert ok["status"].isin(["full", "short"]).all()
    # EP spreads the routed experts: a different (here: cheaper) gradient synchronisation.
    assert ok.loc["1x1x8x1", "train_tokens_per_s"] != ok.loc["1x1x1x1", "train_tokens_per_s"]


def test_cli_flag(tmp_path, capsys):
    out = tmp_path / "plan"
    args = ["plan", *[a for o in MOE for a in ("--set", o)], "--systems", "verl", "--tp", "2",
            "--max-batch", "64", "--trainer-layouts", "auto", "--short-steps", "2",
            "--short-warmup", "1", "--no-cache", "--jobs", "1", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert "1x1x8x1" in (out / "plan.csv").read_text()
    assert main([*args[:-2], "--trainer-layouts", "1x1", "--out", str(tmp_path / "bad")]) == 2
