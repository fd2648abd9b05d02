"""Each row of ``plan.csv`` is what was simulated (issue 32): settings read back from the config
the simulation ran and its summary, never copied from the grid; one config simulated once; the
grid counted without being built."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from laminar.cli import main
from laminar.config import load_config
from laminar.plan import PlanOptions, SearchSpace, run_plan
from laminar.plan import executors as plan_executors
from laminar.plan.space import count_points, enumerate_points

# One 8-GPU machine or a few, a handful of short responses: milliseconds a simulation.
TINY = [
    "cluster.gpus=8",
    "workload.prompts_per_step=3",
    "workload.samples_per_prompt=2",
    "workload.max_prompt_len=64",
    "workload.max_response_len=256",
    "workload.steps=3",
    "sim.warmup_steps=1",
]
OPTS = PlanOptions(short_steps=2, short_warmup=1, top=8, screen_keep=0.0, progress=False)


def _base(*extra):
    return load_config(overrides=[*TINY, *extra])


@pytest.fixture
def simulations(monkeypatch):
    """Every config the plan simulates, with its result, in the order they ran."""
    ran: list[tuple[dict, dict]] = []
    real = plan_executors.evaluate

    def spy(cfg):
        res = real(cfg)
        ran.append((cfg, res))
        return res

    monkeypatch.setattr(plan_executors, "evaluate", spy)
    return ran


def _ran_as(row, ran) -> list[dict]:
    """The simulated configs a row's settings describe (with the row's figure)."""
    out = []
    for cfg, res in ran:
        if (
            cfg["cluster"]["gpus"] == row["gpus"]
            and cfg["sim"]["systems"] == [row["system"]]
            and cfg["model"]["rollout_tp"] == row["rollout_tp"]
            and cfg["sim"]["max_batch"] == row["max_batch"]
            and res.get("trainer_gpus") == row["trainer_gpus"]
            and res.get("train_tokens_per_s") == pytest.approx(row["train_tokens_per_s"])
        ):
            out.append(cfg)
    return out


def test_rows_are_what_was_simulated_at_16_and_32_gpus_tp2_and_verl(simulations):
    space = SearchSpace(gpus=(16, 32), systems=("laminar", "verl"), trainer_fractions=(0.5,),
                        rollout_tps=(1, 2), max_batches=(8,), repack=(True,))  # fmt: skip
    df = run_plan(_base(), space, OPTS).points
    sim = df[df["status"].isin(["short", "full"])]
    assert set(sim["gpus"]) == {16, 32} and set(sim["rollout_tp"]) == {1, 2}
    assert set(sim["system"]) == {"laminar", "verl"}
    for _, row in sim.iterrows():
        assert _ran_as(row, simulations), row.to_dict()
        assert row["train_tokens_per_s_per_gpu"] == pytest.approx(
            row["train_tokens_per_s"] / row["gpus"]
        )
    verl = sim[sim["system"] == "verl"]
    assert (verl["trainer_gpus"] == verl["gpus"]).all() and (verl["repack"] == "").all()
    lam = sim[sim["system"] == "laminar"]
    assert (lam["trainer_gpus"] == lam["gpus"] // 2).all()


def test_a_varied_key_is_read_back_as_the_config_resolved_it(simulations):
    # YAML reads 1e-2 as text; the config resolves it to 0.01: one config, one column value
    space = SearchSpace(gpus=(8,), systems=("laminar",), trainer_fractions=(0.5,),
                        rollout_tps=(1,), max_batches=(8,), repack=(True,),
                        extra={"sim.kv_watermark": (0.01, "1e-2", 0.05)})  # fmt: skip
    df = run_plan(_base(), space, OPTS).points
    assert df["sim.kv_watermark"].tolist() == [0.01, 0.01, 0.05]
    assert df["status"].tolist()[1] == "duplicate"
    assert "point 0" in df["reason"].tolist()[1]


def test_duplicates_are_simulated_once(simulations):
    # One 8-GPU machine, TP 4: trainer shares 1/2..7/8 all leave 4 GPUs for the trainer (the
    # rollout keeps one 4-GPU replica): one split, one simulation a stage.
    space = SearchSpace(gpus=(8,), systems=("laminar",), trainer_fractions=(0.5, 0.625, 0.75),
                        rollout_tps=(4,), max_batches=(8,), repack=(True,))  # fmt: skip
    result = run_plan(_base(), space, OPTS)
    df = result.points
    assert df["status"].tolist().count("duplicate") == 2
    assert (df["trainer_gpus"] == 4).all()
    assert len(simulations) == len({repr(sorted(c.items())) for c, _ in simulations})
    assert result.meta["duplicates"] == 2 and result.meta["simulations_run"] == len(simulations)


def test_a_short_simulation_that_is_the_full_one_runs_once(simulations):
    # workload.steps 2 = the short steps, same warm-up: the short config is the full config
    space = SearchSpace(gpus=(8,), systems=("laminar",), trainer_fractions=(0.5,),
                        rollout_tps=(1,), max_batches=(8, 16), repack=(True,))  # fmt: skip
    result = run_plan(_base("workload.steps=2"), space, OPTS)
    assert (result.points["status"] == "full").all()
    assert len(simulations) == 2


def _cli(tmp_path, *extra):
    sets = [x for s in TINY[1:] for x in ("--set", s)]
    return ["plan", *sets, "--out", str(tmp_path / "out"), "--no-cache", "--jobs", "1",
            "--short-steps", "2", "--systems", "laminar", "--max-batch", "8", "--repack", "on",
            "--trainer-fractions", "0.5", *extra]  # fmt: skip


def test_a_set_of_a_grid_key_is_that_axis_when_its_flag_is_absent(tmp_path, capsys):
    assert main(_cli(tmp_path, "--gpus", "16", "--set", "model.rollout_tp=2")) == 0
    plan = pd.read_csv(tmp_path / "out" / "plan.csv")
    assert plan["rollout_tp"].tolist() == [2]


def test_a_set_the_flag_overrides_is_named_in_a_warning(tmp_path, capsys):
    assert main(_cli(tmp_path, "--gpus", "16", "--set", "model.rollout_tp=2", "--tp", "1")) == 0
    err = capsys.readouterr().err
    assert "warning: --set model.rollout_tp=2" in err and "--tp 1" in err
    assert pd.read_csv(tmp_path / "out" / "plan.csv")["rollout_tp"].tolist() == [1]


@pytest.mark.parametrize(
    ("vary", "names"),
    [
        ("cluster.gpus=16,32", "--gpus"),
        ("model.rollout_tp=2", "--tp"),
        ("sim.systems=[verl]", "--systems"),
        ("sim.max_batch=16", "--max-batch"),
        ("repack.enabled=false", "--repack"),
        ("cluster.trainer_fraction=0.5", "--trainer-fractions"),
        ("cluster={gpus: 16}", "cluster.gpus"),
    ],
)
def test_a_vary_of_a_grid_key_is_refused_naming_its_flag(tmp_path, capsys, vary, names):
    assert main(_cli(tmp_path, "--gpus", "16", "--vary", vary)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and names in err[0]
    assert not (tmp_path / "out").exists()


def test_a_key_varied_twice_is_refused(tmp_path, capsys):
    args = _cli(tmp_path, "--vary", "sim.kv_watermark=0.01", "--vary", "sim.kv_watermark=0.02")
    assert main(args) == 2
    assert "given twice" in capsys.readouterr().err


# Counting the grid ---------------------------------------------------------------------------

SYSTEMS = ("laminar", "verl", "one-step")
MACHINE_SIZES = st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=2, unique=True)
HARDWARE = st.lists(st.sampled_from(["h100-sxm", "gb200", "b200"]), min_size=1, max_size=3,
                    unique=True)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(
    gpus=st.lists(st.sampled_from([4, 8, 16, 24, 64]), min_size=1, max_size=3, unique=True),
    systems=st.lists(st.sampled_from(SYSTEMS), min_size=1, max_size=3, unique=True),
    fractions=st.lists(st.sampled_from([0.1, 0.25, 0.5, 0.6, 0.9]), min_size=1, max_size=4),
    tps=st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=2, unique=True),
    repack=st.sampled_from([(True,), (False,), (True, False)]),
    gpms=st.one_of(st.none(), MACHINE_SIZES),
    hardware=st.one_of(st.none(), HARDWARE),
    seeds=st.integers(1, 3),
)
def test_points_are_counted_without_building_them(gpus, systems, fractions, tps, repack, gpms,
                                                  hardware, seeds):  # fmt: skip
    extra = {"seed": tuple(range(seeds))}
    if gpms is not None:
        extra["cluster.gpus_per_machine"] = tuple(gpms)
    if hardware is not None:  # a GB200 names its own 4-GPU machine: the splits change with it
        extra["cluster.hardware"] = tuple(hardware)
    space = SearchSpace(gpus=tuple(gpus), systems=tuple(systems),
                        trainer_fractions=tuple(fractions), rollout_tps=tuple(tps),
                        max_batches=(8,), repack=repack, extra=extra)  # fmt: skip
    base = _base()
    points = enumerate_points(base, space)
    assert count_points(base, space) == len(points)
    assert [p.pid for p in points] == list(range(len(points)))


def test_a_varied_gpu_brings_its_own_machine_size():
    """--vary cluster.hardware=h100-sxm,gb200 over an 8-GPU-machine base: the GB200 points run
    on its 4-GPU trays (and split in them), the H100 ones on 8; a machine size the user set
    stands for every GPU."""
    from laminar.plan.space import point_config

    hw = {"cluster.hardware": ("h100-sxm", "gb200")}
    space = SearchSpace(gpus=(16,), systems=("laminar",), rollout_tps=(1,), max_batches=(8,),
                        repack=(True,), extra=hw)  # fmt: skip
    base = _base("cluster.gpus=16")
    points = enumerate_points(base, space)
    assert count_points(base, space) == len(points)
    data = base.model_dump()
    machines = {p.pid: point_config(data, p).cluster for p in points}
    by_hw = {(c.hardware, c.gpus_per_machine) for c in machines.values()}
    assert by_hw == {("h100-sxm", 8), ("gb200", 4)}
    split = {hw: sorted(p.trainer_gpus for p in points if dict(p.extra)["cluster.hardware"] == hw)
             for hw in ("h100-sxm", "gb200")}  # fmt: skip
    assert split == {"h100-sxm": [8], "gb200": [4, 8, 12]}  # trays of 4, machines of 8
    told = _base("cluster.gpus=16", "cluster.gpus_per_machine=2")
    for p in enumerate_points(told, space):
        assert point_config(told.model_dump(), p).cluster.gpus_per_machine == 2


def test_a_huge_grid_is_counted_in_no_time():
    values = tuple(range(100))
    extra = {f"sim.k{i}": values for i in range(6)}  # 10^12 combinations of extra keys
    space = SearchSpace(gpus=(8, 16), systems=("laminar",), extra=extra)
    # 8 GPUs: one machine, split by GPU (7 splits); 16: two machines (1); x TP 4 x B 3 x repack 2
    assert count_points(_base(), space) == (7 + 1) * 4 * 3 * 2 * 10**12


def test_rows_of_a_duplicate_keep_the_settings_of_their_config(simulations):
    space = SearchSpace(gpus=(8,), systems=("laminar",), trainer_fractions=(0.5, 0.75),
                        rollout_tps=(4,), max_batches=(8,), repack=(True,))  # fmt: skip
    df = run_plan(_base(), space, dataclasses.replace(OPTS, top=1)).points
    first, dup = df.iloc[0], df.iloc[1]
    assert dup["status"] == "duplicate"
    for col in ("gpus", "system", "trainer_gpus", "rollout_tp", "max_batch", "repack"):
        assert dup[col] == first[col]
