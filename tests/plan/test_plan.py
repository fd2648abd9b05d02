"""``laminar plan``: points, rejections, determinism, the cache, outputs and CLI errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.plan import PlanOptions, SearchSpace, run_plan, write_plan
from laminar.plan.cache import ResultCache
from laminar.plan.search import pareto_ids
from laminar.plan.space import enumerate_points

# Two 8-GPU machines, short responses: a simulation takes a fraction of a second.
SMALL = [
    "cluster.gpus=16",
    "workload.prompts_per_step=6",
    "workload.samples_per_prompt=4",
    "workload.max_prompt_len=256",
    "workload.max_response_len=1024",
    "workload.steps=4",
    "sim.warmup_steps=1",
    "repack.interval_s=2.0",
]
SPACE = SearchSpace(
    gpus=(16, 24),
    systems=("laminar", "verl"),
    trainer_fractions=(0.25, 0.5, 0.75),
    rollout_tps=(1, 2),
    max_batches=(8, 64),
)
OPTS = PlanOptions(short_steps=3, short_warmup=1, top=2, progress=False)


def _base(*extra):
    return load_config(overrides=[*SMALL, *extra])


@pytest.fixture(scope="module")
def small_plan():
    return run_plan(_base(), SPACE, OPTS)


def test_points_cover_the_grid_without_duplicates():
    points = enumerate_points(_base(), SPACE)
    # 16 GPUs = 2 machines: every fraction rounds to one trainer machine; 24 GPUs = 3: 1 or 2.
    lam16 = [p for p in points if p.gpus == 16 and p.system == "laminar"]
    assert {p.trainer_gpus for p in lam16} == {8}
    assert len(lam16) == 1 * 2 * 2 * 2  # split x TP x B x repack
    lam24 = [p for p in points if p.gpus == 24 and p.system == "laminar"]
    assert {p.trainer_gpus for p in lam24} == {8, 16}
    verl = [p for p in points if p.system == "verl"]
    assert all(p.trainer_gpus is None and p.repack is None for p in verl)
    assert len(verl) == 2 * 2 * 2  # GPUs x TP x B: no split, no repack
    assert len({repr(p.overrides) for p in points}) == len(points)
    assert [p.pid for p in points] == list(range(len(points)))


def test_plan_rows_stages_and_best(small_plan):
    df = small_plan.points
    assert len(df) == len(enumerate_points(_base(), SPACE))
    assert set(df["status"]) <= {"rejected", "screened", "short", "full"}
    full = df[df["status"] == "full"]
    assert len(full) >= 2 and set(full["system"]) == {"laminar", "verl"}  # each system's best
    sim = df[df["status"].isin(["short", "full"])]
    assert sim["train_tokens_per_s"].gt(0).all()
    assert set(sim["bottleneck"]) <= {"generation", "training", "weight sync"}
    best = df.set_index("pid").loc[small_plan.best]
    assert best["status"] == "full"
    assert best["train_tokens_per_s_per_gpu"] == full["train_tokens_per_s_per_gpu"].max()
    screened = df[df["status"] == "screened"]
    assert screened["reason"].str.contains("analytic estimate").all()


def test_the_plan_is_deterministic(small_plan):
    again = run_plan(_base(), SPACE, OPTS)
    pd.testing.assert_frame_equal(again.points, small_plan.points)
    assert again.best == small_plan.best


def test_rejections_name_their_reason():
    import re

    base = _base("model.name=qwen2.5-72b", "cluster.gpus_per_machine=4")
    space = SearchSpace(gpus=(48,), systems=("laminar",), trainer_fractions=(0.25, 0.5),
                        rollout_tps=(1, 3, 4), max_batches=(64,), repack=(True,))  # fmt: skip
    df = run_plan(base, space, dataclasses.replace(OPTS, screen_keep=0.0)).points
    df = df.set_index(["trainer_gpus", "rollout_tp"])
    tp1 = df.loc[(24, 1)]  # 145 GB of weights on one GPU
    assert tp1["status"] == "rejected" and tp1["bottleneck"] == "memory"
    assert "rollout_tp=2" in tp1["reason"]  # names the smallest replica that fits
    small = df.loc[(12, 4)]  # 72B's trainer needs more than 12 GPUs (laminar.specs)
    assert small["status"] == "rejected" and small["bottleneck"] == "memory"
    need = re.search(r"at least (\d+) trainer GPUs", small["reason"])
    assert need and 12 < int(need.group(1)) <= 24, small["reason"]  # 24 fits, below
    assert df.loc[(24, 3), "status"] == "rejected"
    assert "must divide" in df.loc[(24, 3), "reason"]
    assert df.loc[(24, 4), "status"] in ("short", "full")


def test_a_split_the_simulator_refuses_is_rejected_with_its_message():
    # A fault on rollout machine 1 needs two rollout machines: a 3-machine cluster with two
    # trainer machines has one, so the simulator refuses that split.
    base = _base("faults.events=[{type: relay, at_s: 1.0, machine: 1, recover_s: 5.0}]")
    space = SearchSpace(gpus=(24,), systems=("laminar",), trainer_fractions=(0.33, 0.67),
                        rollout_tps=(1,), max_batches=(64,), repack=(True,))  # fmt: skip
    df = run_plan(base, space, dataclasses.replace(OPTS, screen_keep=0.0)).points
    refused = df[df["trainer_gpus"] == 16].iloc[0]
    assert refused["status"] == "rejected" and "faults.events" in refused["reason"]
    assert df[df["trainer_gpus"] == 8].iloc[0]["status"] in ("short", "full")


def test_cache_hits_make_a_rerun_identical_and_simulation_free(tmp_path):
    opts = dataclasses.replace(OPTS, cache_dir=tmp_path / "cache")
    space = dataclasses.replace(SPACE, gpus=(16,))
    first = run_plan(_base(), space, opts)
    assert first.meta["cache_hits"] == 0 and first.meta["cache_misses"] > 0
    second = run_plan(_base(), space, opts)
    assert second.meta["cache_misses"] == 0
    assert second.meta["cache_hits"] == first.meta["cache_misses"]
    pd.testing.assert_frame_equal(first.points, second.points)


def test_the_cache_key_follows_config_and_code(tmp_path):
    cfg = _base().model_dump(mode="json")
    a = ResultCache(tmp_path, "code-a")
    a.put(a.key(cfg), {"ok": False, "reason": "refused"}, cfg)
    again = ResultCache(tmp_path, "code-a")  # a later plan, same simulator
    assert again.get(again.key(cfg), cfg)["reason"] == "refused"
    b = ResultCache(tmp_path, "code-b")
    assert b.get(b.key(cfg), cfg) is None  # another simulator version never reuses it
    other = _base("seed=7").model_dump(mode="json")
    assert again.get(again.key(other), other) is None


def test_pareto_front():
    up = {0: 10.0, 1: 8.0, 2: 12.0, 3: 9.0, 4: float("nan")}
    down = {0: 1.0, 1: 0.0, 2: 3.0, 3: 2.0, 4: 0.0}
    assert pareto_ids(up, down) == [0, 1, 2]  # 3 is beaten by 0; 4 has no figure


def test_outputs_and_best_yaml_runs(small_plan, tmp_path):
    out = write_plan(small_plan, tmp_path / "plan")
    assert {p.name for p in out.iterdir()} >= {"plan.csv", "pareto.csv", "best.yaml",
                                              "pareto.png", "plan.json"}  # fmt: skip
    plan = pd.read_csv(out / "plan.csv")
    assert len(plan) == len(small_plan.points)
    pareto = pd.read_csv(out / "pareto.csv")
    assert set(pareto["front"]) == {"staleness"} and set(pareto["status"]) == {"full"}
    cfg = load_config(out / "best.yaml")
    best = small_plan.points.set_index("pid").loc[small_plan.best]
    assert cfg.sim.systems == [best["system"]] and cfg.model.rollout_tp == best["rollout_tp"]
    assert cfg.cluster.gpus == best["gpus"] and cfg.sim.max_batch == best["max_batch"]
    assert main(["simulate", str(out / "best.yaml"), "--out", str(tmp_path / "sim")]) == 0
    summary = pd.read_csv(tmp_path / "sim" / "summary.csv").iloc[0]
    assert summary["train_tokens_per_s"] == pytest.approx(best["train_tokens_per_s"])


def _cli(tmp_path, *extra):
    sets = [x for s in SMALL for x in ("--set", s)]
    return ["plan", *sets, "--out", str(tmp_path / "out"), "--no-cache", "--jobs", "1",
            "--short-steps", "3", *extra]  # fmt: skip


def test_cli_prints_the_top_table_and_prices(tmp_path, capsys):
    args = _cli(tmp_path, "--systems", "laminar", "--tp", "1", "--max-batch", "64",
                "--gpu-hour-price", "2.5")  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "bottleneck" in printed and "USD/Mtok" in printed
    pareto = pd.read_csv(tmp_path / "out" / "pareto.csv")
    assert set(pareto["front"]) == {"staleness", "cost"}


@pytest.mark.parametrize(
    ("extra", "names"),
    [
        (["--tp", "1,x"], "--tp"),
        (["--gpus", "0"], "--gpus"),
        (["--gpus", "16,20"], "--gpus 16,20"),  # not whole 8-GPU machines
        (["--systems", "laminar,nope"], "--systems"),
        (["--trainer-fractions", "1.5"], "--trainer-fractions"),
        (["--vary", "sim.nope=1,2"], "sim.nope"),
        (["--vary", "sim.kv_watermark=0.01,7"], "sim.kv_watermark"),
        (["--short-steps", "1"], "--short-steps"),
        (["--jobs", "0"], "--jobs"),
        (["--gpu-hour-price", "nan"], "--gpu-hour-price"),
    ],
)
def test_cli_errors_exit_2_and_write_nothing(tmp_path, capsys, extra, names):
    try:
        code = main(_cli(tmp_path, *extra))
    except SystemExit as e:  # argparse's own checks
        code = e.code
    assert code == 2
    assert names in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_vary_adds_a_dimension(tmp_path):
    space = dataclasses.replace(
        SPACE, gpus=(16,), systems=("laminar",), extra={"sim.kv_watermark": (0.01, 0.05)}
    )
    points = enumerate_points(_base(), space)
    assert {dict(p.extra)["sim.kv_watermark"] for p in points} == {0.01, 0.05}
    df = run_plan(_base(), space, OPTS).points
    assert "sim.kv_watermark" in df.columns


def test_cli_refuses_an_out_dir_holding_other_files(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    assert main(_cli(tmp_path, "--systems", "verl", "--tp", "1", "--max-batch", "8")) == 2
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"
    assert "--force" in capsys.readouterr().err


def test_a_plan_with_nothing_feasible_still_writes_its_reasons(tmp_path):
    from laminar.plan import top_table

    base = _base("model.name=qwen2.5-72b")
    space = SearchSpace(gpus=(16,), systems=("laminar", "verl"), rollout_tps=(1,),
                        max_batches=(64,))  # fmt: skip
    result = run_plan(base, space, OPTS)
    assert result.best is None and (result.points["status"] == "rejected").all()
    assert "no point was simulated" in top_table(result)
    out = write_plan(result, tmp_path / "plan")
    assert not (out / "best.yaml").exists() and (out / "pareto.png").exists()


def test_the_default_tps_reach_a_model_that_none_of_1_to_8_holds():
    """DeepSeek-V3 in BF16 fits no replica of TP 1-8 on any catalog GPU: without ``--tp`` a plan
    tried only those and rejected every point for memory. The default axis now starts at the
    smallest TP that holds the weights and one longest trajectory (the memory check's own
    figure), and stays 1, 2, 4, 8 for a model that one of those holds."""
    from laminar.config.cluster import MAX_ROLLOUT_TP
    from laminar.plan.space import DEFAULT_TPS, default_rollout_tps
    from laminar.specs.memory import check_fit

    assert default_rollout_tps(_base()) == DEFAULT_TPS  # qwen2.5-7b
    assert default_rollout_tps(_base("model.name=qwen2.5-72b")) == DEFAULT_TPS  # TP 4 holds it
    big = _base("model.name=deepseek-v3", "cluster.hardware=h20", "cluster.gpus=256")
    tps = default_rollout_tps(big)
    assert tps[0] > max(DEFAULT_TPS) and max(tps) <= MAX_ROLLOUT_TP
    assert list(tps) == [tps[0] * 2**i for i in range(len(tps))]

    def holds(tp):
        cfg = big.model_copy(update={"model": big.model.model_copy(update={"rollout_tp": tp})})
        return not check_fit(cfg).reason.startswith("a rollout replica")

    assert holds(tps[0]) and not holds(tps[0] // 2)
    # FP8 weights: half the bytes, so a smaller TP holds them
    fp8 = default_rollout_tps(_base("model.name=deepseek-v3", "cluster.hardware=h20",
                                    "cluster.gpus=256", "model.rollout_quant=fp8"))  # fmt: skip
    assert fp8[0] == tps[0] // 2 or fp8 == DEFAULT_TPS


def test_a_plan_of_a_model_too_big_for_tp_8_simulates_by_default(tmp_path, capsys):
    args = ["plan", "--set", "model.name=deepseek-v3", "--set", "cluster.hardware=h20",
            "--set", "workload.steps=3", "--set", "workload.prompts_per_step=8",
            "--set", "workload.max_response_len=2048", "--gpus", "256", "--systems", "laminar",
            "--trainer-fractions", "0.75", "--max-batch", "64", "--repack", "on", "--jobs", "1",
            "--no-cache", "--out", str(tmp_path / "plan")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no point could be simulated" not in out
    points = pd.read_csv(tmp_path / "plan" / "plan.csv")
    assert (points["status"] == "full").any()
    assert points["rollout_tp"].min() > 8


def test_a_warning_about_the_model_is_printed_once_a_plan(tmp_path, capsys):
    """A plan sizes its model at every point it simulates; an ``hf_config`` with a tower it
    does not size said so once a point (17 times for this plan). Each warning text now prints
    once a command; distinct ones all print."""
    import warnings

    from laminar.cli import _show_warning
    from laminar.errors import LaminarWarning

    config = Path(__file__).resolve().parents[1] / "specs" / "configs" / "llava-1.5-7b.json"
    args = ["plan", "--set", f"model.hf_config={config}", "--set", "workload.steps=3",
            "--set", "workload.prompts_per_step=8", "--set", "cluster.gpus=16",
            "--systems", "laminar", "--trainer-fractions", "0.5", "--max-batch", "64",
            "--repack", "on", "--jobs", "1", "--no-cache",
            "--out", str(tmp_path / "p")]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert err.count("laminar: warning:") == 1 and "vision_config" in err, err
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # Python's own once-a-place filter out of the way
        warnings.showwarning = _show_warning
        for text in ("first", "second", "first"):
            warnings.warn(text, LaminarWarning, stacklevel=1)
    assert capsys.readouterr().err.count("laminar: warning:") == 2
