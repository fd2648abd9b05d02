"""``laminar calibrate`` on synthetic run directories (no engines): it recovers the
coefficients the measurements were made from, and rejects bad inputs naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config, write_resolved
from laminar.sim.cost import load_cost_file

TRUE = {
    "decode_base_s": 0.006,
    "decode_per_seq_s": 1.5e-4,
    "decode_per_kv_token_s": 2.0e-7,
    "prefill_per_token_s": 4.0e-5,
}
PARAMS, WEIGHT_BYTES, RATE = 537_472, 2_149_888, 2.0e10


def _flop(tokens, tokens_sq):
    """A trainer step's FLOPs in ``make_run``'s runs (8 x params, 8 x layers x hidden)."""
    return 8 * PARAMS * tokens + 8 * 2 * 128 * tokens_sq


def make_run(root: Path, *, seed: int = 0, shared: bool = True, threads: int = 1,
             rate: float = RATE, cpu_model: str = "Test CPU") -> Path:  # fmt: skip
    """A run directory whose profile follows TRUE (2 replicas, on one core when ``shared``)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    mode = "laminar" if threads == 1 else "sync"
    write_resolved(load_config(preset="tiny-cpu", overrides=[f"runtime.mode={mode}"]), root)
    (root / "summary.json").write_text(json.dumps({"steps": 8}))
    prof = root / "profile"
    prof.mkdir()
    rows = []
    for rid in ("r0", "r1"):
        t = 0.0
        for _ in range(400):
            b = int(rng.integers(1, 64))
            kv = int(b * rng.integers(10, 120))
            pf = int(rng.integers(0, 200)) if rng.random() < 0.2 else 0
            solo = TRUE["decode_base_s"] + TRUE["decode_per_seq_s"] * b
            solo += TRUE["decode_per_kv_token_s"] * kv + TRUE["prefill_per_token_s"] * pf
            step = solo * (2 if shared else 1) * rng.normal(1.0, 0.02)
            rows.append((rid, t, step, b, 0, pf, kv, 0.01, b, 0))
            t += step
    cols = ["replica_id", "at_s", "step_s", "decode_seqs", "prefill_seqs", "prefill_tokens"]
    cols += ["kv_tokens", "kv_usage", "running", "waiting"]
    pd.DataFrame(rows, columns=cols).to_csv(prof / "engine_steps.csv", index=False)
    tokens = rng.integers(1000, 6000, 10)
    sq = tokens * 30
    flop = _flop(tokens, sq)
    pd.DataFrame({"step": range(10), "train_s": flop / rate, "publish_s": 0.005,
                  "wait_s": 0.1, "tokens": tokens, "tokens_sq": sq}).to_csv(
        prof / "trainer_steps.csv", index=False)  # fmt: skip
    pd.DataFrame({"replica_id": ["r0", "r1"] * 5, "at_s": range(10), "version": range(10),
                  "load_s": 0.03, "bytes": WEIGHT_BYTES}).to_csv(
        prof / "weight_loads.csv", index=False)  # fmt: skip
    cores = [[1], [1]] if shared else [[0], [1]]
    machine = {"mode": mode, "rollout_cpus": cores, "trainer_cpus": [0],
               "trainer_threads": threads, "kv_capacity_tokens": 524288, "params": PARAMS,
               "weight_bytes": WEIGHT_BYTES, "model": "tiny-llama",
               "cpu_model": cpu_model}  # fmt: skip
    (prof / "machine.json").write_text(json.dumps(machine))
    return root


def test_recovers_the_coefficients(tmp_path, capsys):
    runs = [make_run(tmp_path / "a", seed=1), make_run(tmp_path / "b", seed=2, shared=False,
                                                       threads=2, rate=3e10)]  # fmt: skip
    out = tmp_path / "cost.json"
    assert main(["calibrate", *map(str, runs), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "engine step" in printed and "R2" in printed
    model = load_cost_file(out)
    for name, value in TRUE.items():
        assert getattr(model, name) == pytest.approx(value, rel=0.15), name
    assert model.pcie_bytes_per_s == pytest.approx(WEIGHT_BYTES / 0.03)
    assert model.rdma_bytes_per_s == pytest.approx(WEIGHT_BYTES / 0.005)
    rates = json.loads(out.read_text())["runtime"]["trainer_flop_per_s_by_threads"]
    assert rates["1"] == pytest.approx(RATE, rel=1e-3)
    assert rates["2"] == pytest.approx(3e10, rel=1e-3)
    assert json.loads(out.read_text())["fit"]["engine step"]["r2"] > 0.95
    # Every step of the laminar run shared its core: its slowdown is sharing's (alpha 1: the
    # steps took twice as long), not a factor of its mode, which those steps cannot tell apart.
    rt = json.loads(out.read_text())["runtime"]
    assert rt["engine_load_per_rollout_by_mode"] == {"laminar": 0.0, "sync": 0.0}
    assert rt["core_sharing_alpha"] == pytest.approx(1.0, rel=0.05)


def test_an_idle_core_mate_counts_while_it_spins():
    """A core-mate occupies the cores for ENGINE_SPIN_S after its last step."""
    from types import SimpleNamespace

    from laminar.calibrate.fit import ENGINE_SPIN_S, sharing

    ends = [1.0, 1.0 + 0.5 * ENGINE_SPIN_S, 1.0 + 1.5 * ENGINE_SPIN_S]
    eng = pd.DataFrame({"replica_id": ["r1", "r0", "r0", "r0"], "at_s": [1.0, 0.995, *ends[1:]],
                        "step_s": 0.01})  # fmt: skip
    run = SimpleNamespace(engine=eng, machine={"rollout_cpus": [[1], [1]]})
    assert sharing(run).tolist() == [2.0, 2.0, 2.0, 1.0]
    apart = SimpleNamespace(engine=eng, machine={"rollout_cpus": [[0], [1]]})
    assert sharing(apart).tolist() == [1.0] * 4


def test_a_core_mate_decodes_while_it_holds_requests_and_spins_after():
    """``mate_load``: a mate decodes from a step that leaves it requests to its next step,
    and spins for ENGINE_SPIN_S after a step that leaves it empty."""
    from types import SimpleNamespace

    from laminar.calibrate.fit import ENGINE_SPIN_S, mate_load

    spin = ENGINE_SPIN_S
    # r1 steps over [0, 0.1] and [0.2, 0.3] holding requests between them, then empties at
    # 0.3; r0's steps: inside r1's gap, half in its last step, in its spin, after its spin.
    eng = pd.DataFrame({
        "replica_id": ["r1", "r1", "r0", "r0", "r0", "r0"],
        "at_s": [0.1, 0.3, 0.2, 0.35, 0.3 + 0.5 * spin, 0.3 + 2 * spin],
        "step_s": [0.1, 0.1, 0.1, 0.1, 0.1, 0.1],
        "running": [5, 0, 3, 3, 3, 0],
        "decode_seqs": [5, 5, 3, 3, 3, 3],
    })  # fmt: skip
    run = SimpleNamespace(engine=eng, machine={"rollout_cpus": [[1], [1]], "max_batch": 10})
    busy, spin_share, batch = mate_load(run)
    assert busy[2:].tolist() == pytest.approx([1.0, 0.5, 0.0, 0.0])
    assert spin_share[2:].tolist() == pytest.approx([0.0, 0.5, 1.0, 0.0])
    # r0 starts at 0.1 and holds requests from then on: it decodes through r1's second step.
    assert busy[:2].tolist() == pytest.approx([0.0, 1.0])
    # The decoding share weighted by the mate's batch / B: r1 decodes 5 of 10 sequences during
    # the whole of r0's first step, then during half of its second.
    assert batch[2:].tolist() == pytest.approx([0.5, 0.25, 0.0, 0.0])
    apart = SimpleNamespace(engine=eng, machine={"rollout_cpus": [[0], [1]], "max_batch": 10})
    assert [x.tolist() for x in mate_load(apart)] == [[0.0] * 6] * 3


def _fails(capsys, args: list[str], *names: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    for name in names:
        assert name in err, err
    return err


def test_bad_inputs_exit_2_and_name_the_file(tmp_path, capsys):
    out = tmp_path / "cost.json"
    run = make_run(tmp_path / "run")
    _fails(capsys, ["calibrate", str(tmp_path / "nope"), "-o", str(out)], "nope")
    (run / "profile" / "weight_loads.csv").unlink()
    _fails(capsys, ["calibrate", str(run), "-o", str(out)], "weight_loads.csv", "missing")
    run2 = make_run(tmp_path / "run2")
    steps = run2 / "profile" / "engine_steps.csv"
    df = pd.read_csv(steps)
    df["step_s"] = df["step_s"].astype(object)
    df.loc[4, "step_s"] = "fast"
    df.to_csv(steps, index=False)
    _fails(capsys, ["calibrate", str(run2), "-o", str(out)], "engine_steps.csv", "row 5",
           "step_s")  # fmt: skip
    run3 = make_run(tmp_path / "run3")
    pd.read_csv(run3 / "profile" / "trainer_steps.csv").drop(columns="tokens").to_csv(
        run3 / "profile" / "trainer_steps.csv", index=False)  # fmt: skip
    _fails(capsys, ["calibrate", str(run3), "-o", str(out)], "trainer_steps.csv", "tokens")
    assert not out.exists()  # nothing half-written


def test_refuses_runs_of_different_machines(tmp_path, capsys):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", cpu_model="Other CPU")
    out = tmp_path / "cost.json"
    _fails(capsys, ["calibrate", str(a), str(b), "-o", str(out)], "machine.json", "cpu_model")
    assert not out.exists()


def test_broken_machine_json(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    (run / "profile" / "machine.json").write_text("{not json")
    _fails(capsys, ["calibrate", str(run), "-o", str(tmp_path / "c.json")], "machine.json")


def test_the_trainer_fit_counts_padded_tokens():
    """A step's tokens as the trainer computes them: padded to their micro-batch's longest;
    a step the trace does not match keeps the counts the trainer recorded."""
    from types import SimpleNamespace

    from laminar.calibrate.fit import padded_tokens

    cfg = load_config(preset="tiny-cpu", overrides=["runtime.grpo.micro_batch_tokens=250"])
    lengths = pd.DataFrame({"step": [1, 1, 1, 2], "length": [5, 6, 50, 7]})
    run = SimpleNamespace(lengths=lengths, config=cfg)
    trainer = pd.DataFrame({"step": [1, 2, 3], "tokens": [61, 8, 10], "tokens_sq": [1, 2, 3]})
    tokens, sq = padded_tokens(run, trainer)
    assert tokens.tolist() == [150, 8, 10] and sq.tolist() == [7500, 2, 3]
    tokens, sq = padded_tokens(SimpleNamespace(lengths=None, config=cfg), trainer)
    assert tokens.tolist() == [61, 8, 10]


def test_the_cold_start_is_fitted_from_the_first_step(tmp_path):
    """The first trainer step's seconds beyond a warm step of its tokens, and the delay from
    the loop's start to the first trajectory, each a median over runs."""
    from laminar.calibrate import read_run
    from laminar.calibrate.coldstart import fit_first_prompts, fit_first_step
    from laminar.calibrate.fit import fit_trainer

    runs = []
    for i, (extra_s, delay_s) in enumerate(((1.2, 0.9), (0.8, 1.1), (1.0, 1.0))):
        root = make_run(tmp_path / f"r{i}", seed=i)
        tr = pd.read_csv(root / "profile" / "trainer_steps.csv")
        tr.loc[tr["step"] == 0, "train_s"] += extra_s
        tr.to_csv(root / "profile" / "trainer_steps.csv", index=False)
        (root / "summary.json").write_text(json.dumps({"steps": 8, "setup_s": 5.0}))
        starts = [5.0 + delay_s + 0.3, 5.0 + delay_s]  # a trace the step counts do not match
        pd.DataFrame({"step": [99, 99], "prompt_len": 5, "response_len": 3,
                      "gen_start_s": starts}).to_parquet(root / "trajectories.parquet")  # fmt: skip
        runs.append(read_run(root))
    first = fit_first_step(runs, fit_trainer(runs))
    assert list(first) == [1]  # one trainer thread in every run
    assert first[1].values["trainer_first_step_extra_s"] == pytest.approx(1.0, rel=1e-3)
    prompts = fit_first_prompts(runs)
    assert prompts.values["first_prompts_s"] == pytest.approx(1.0, rel=1e-6)
    assert prompts.samples == 3
    # A trace without start times (an older run) gives no figure instead of failing.
    pd.DataFrame({"step": [1], "prompt_len": 5, "response_len": 3}).to_parquet(
        tmp_path / "r0" / "trajectories.parquet")  # fmt: skip
    assert fit_first_prompts([read_run(tmp_path / "r0")]).samples == 0


def _laminar_run_with_an_idle_mate(root: Path, beta: float, alpha: float) -> Path:
    """A laminar run (2 replicas on core 1, spin bound 0.02 s) whose steps follow TRUE times
    (1 + beta x 2 rollouts on the core) x (1 + alpha while the mate decodes): r1 decodes
    during the first half of r0's steps only, so r0's second half runs with its mate idle."""
    root = make_run(root, seed=5)
    write_resolved(load_config(preset="tiny-cpu", overrides=["runtime.engine_spin_s=0.02"]),
                   root)  # fmt: skip
    rng = np.random.default_rng(7)
    factor = 1.0 + beta * 2
    rows, t = [], 0.0
    for k in range(600):
        b = int(rng.integers(1, 64))
        solo = TRUE["decode_base_s"] + TRUE["decode_per_seq_s"] * b
        shared = k < 300
        step = factor * solo * ((1.0 + alpha) if shared else 1.0)
        rows.append(("r0", t + step, step, b, 0, 0, 0, 0.01, 32, 0))
        if shared:  # the mate's steps, back to back with r0's, holding 32 sequences
            running = 32 if k < 299 else 0
            rows.append(("r1", t + step, step, b, 0, 0, 0, 0.01, running, 0))
        t += step
    cols = ["replica_id", "at_s", "step_s", "decode_seqs", "prefill_seqs", "prefill_tokens"]
    cols += ["kv_tokens", "kv_usage", "running", "waiting"]
    pd.DataFrame(rows, columns=cols).to_csv(root / "profile" / "engine_steps.csv", index=False)
    return root


def test_a_laminar_rollouts_own_load_is_fitted_per_rollout_on_the_core(tmp_path, capsys):
    """With an idle mate in some steps, laminar's load on its cores is told apart from
    sharing, as a load per laminar rollout on the core (2 here: the run's placement)."""
    lam = _laminar_run_with_an_idle_mate(tmp_path / "lam", beta=0.25, alpha=0.8)
    sync = make_run(tmp_path / "sync", seed=2, shared=False, threads=2, rate=3e10)
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(lam), str(sync), "-o", str(out)]) == 0
    rt = json.loads(out.read_text())["runtime"]
    assert rt["engine_load_per_rollout_by_mode"]["laminar"] == pytest.approx(0.25, rel=0.1)
    assert rt["engine_load_per_rollout_by_mode"]["sync"] == 0.0
    # the mate's cost while decoding 32 of 64 sequences: alpha + alpha_batch x 0.5
    shared = rt["core_sharing_alpha"] + 0.5 * rt["core_sharing_alpha_batch"]
    assert shared == pytest.approx(0.8, rel=0.1)


def test_the_fit_finds_an_engine_alone_on_its_core_slowed_by_the_other_core():
    """``other_core_share`` and the cross-core factor: two engines on cores 0 and 1, the second
    stepping only in the run's first half; while it does, each engine's steps take 1.3x their
    solo cost. The fit recovers gamma = 0.3 and the solo cost; engines that share their cores
    get no such share."""
    from types import SimpleNamespace

    from laminar.calibrate.fit import engine_frame, engine_seconds, fit_engine, other_core_share

    rng = np.random.default_rng(3)
    rows = []
    for rid, until in (("r0", 8.0), ("r1", 4.0)):
        t = 0.0
        while t < until:
            b = int(rng.integers(1, 64))
            solo = TRUE["decode_base_s"] + TRUE["decode_per_seq_s"] * b
            step = solo * (1.3 if t < 4.0 else 1.0) * rng.normal(1.0, 0.01)
            t += step
            rows.append((rid, t, step, b, 0, 0, 0, 0.01, b, 0))
    cols = ["replica_id", "at_s", "step_s", "decode_seqs", "prefill_seqs", "prefill_tokens",
            "kv_tokens", "kv_usage", "running", "waiting"]  # fmt: skip
    eng = pd.DataFrame(rows, columns=cols)
    machine = {"mode": "sync", "rollout_cpus": [[0], [1]], "trainer_cpus": [0, 1]}
    config = load_config(preset="tiny-cpu", overrides=["runtime.mode=sync"])
    run = SimpleNamespace(engine=eng, machine=machine, config=config, summary={},
                          path=Path("/nonexistent"))  # fmt: skip
    share = other_core_share(run)
    early = (eng["at_s"] < 3.9).to_numpy()
    assert share[early].min() > 0.9 and share[(eng["at_s"] > 4.1).to_numpy()].max() == 0
    fit = fit_engine([run])
    assert fit.values["cross_core_gamma"] == pytest.approx(0.3, rel=0.05)
    # one run: the slowdown varies within it, so its steps alone support the same factor
    assert fit.values["cross_core_gamma_within_runs"] == pytest.approx(0.3, rel=0.1)
    assert fit.values["decode_base_s"] == pytest.approx(TRUE["decode_base_s"], rel=0.05)
    # the fitted term evaluated on the run's own steps (fidelity.py --engine-check): each step
    # about its 1% noise (steps across the switch at 4 s partly slowed), the slowed ones 1.3x
    # the others' cost for the same batch
    frame = engine_frame([run])
    cost = engine_seconds(fit.values, frame)
    off = np.abs(cost / frame["step_s"].to_numpy() - 1.0)
    assert np.median(off) < 0.02 and np.quantile(off, 0.95) < 0.05
    assert cost.sum() == pytest.approx(frame["step_s"].sum(), rel=0.01)
    solo = engine_seconds({**fit.values, "cross_core_gamma": 0.0}, frame)
    assert (cost / solo)[early].min() > 1.25 and (cost / solo)[~early].max() < 1.31
    mates = SimpleNamespace(**{**vars(run), "machine": {**machine, "rollout_cpus": [[1], [1]]}})
    assert not other_core_share(mates).any()
    # the crosscore benchmark's view: every engine, core-mates or not (no other core here)
    assert not other_core_share(mates, with_mates=True).any()
    assert (other_core_share(run, with_mates=True) == share).all()


def test_a_cross_core_factor_set_only_between_runs_is_told_apart(tmp_path, capsys):
    """Issue 31: two runs of two engines on cores 0 and 1 (the second engine stepping only in
    each run's first half) whose steps all take 1.3x their solo cost, whatever the other core
    does, beside one run of a lone engine at its solo cost. The fit charges the factor to the
    other core's work (gamma > 0.1: the one feature telling the runs apart), but within each
    run a step beside it costs what one without does: ~0. ``laminar simulate --cost`` warns
    for a job with engines alone on their cores, and not for one whose engines share theirs."""
    from types import SimpleNamespace

    from laminar.calibrate.fit import fit_engine
    from laminar.cli import main

    cols = ["replica_id", "at_s", "step_s", "decode_seqs", "prefill_seqs", "prefill_tokens",
            "kv_tokens", "kv_usage", "running", "waiting"]  # fmt: skip
    config = load_config(preset="tiny-cpu", overrides=["runtime.mode=sync"])
    runs = []
    for seed, engines, slow in ((4, (("r0", 8.0), ("r1", 4.0)), 1.3), (5, (("r0", 8.0),), 1.0),
                                (6, (("r0", 8.0), ("r1", 4.0)), 1.3)):  # fmt: skip
        rng = np.random.default_rng(seed)
        rows = []
        for rid, until in engines:
            t = 0.0
            while t < until:
                b = int(rng.integers(1, 64))
                step = (TRUE["decode_base_s"] + TRUE["decode_per_seq_s"] * b) * slow
                step *= rng.normal(1.0, 0.01)
                t += step
                rows.append((rid, t, step, b, 0, 0, 0, 0.01, b, 0))
        cpus = [[0], [1]][: len(engines)]
        machine = {"mode": "sync", "rollout_cpus": cpus, "trainer_cpus": [0, 1]}
        runs.append(SimpleNamespace(engine=pd.DataFrame(rows, columns=cols), machine=machine,
                                    config=config, summary={}, path=Path("/nonexistent")))
    values = fit_engine(runs).values
    assert values["cross_core_gamma"] > 0.1
    assert values["cross_core_gamma_within_runs"] < 0.03
    # the warning, from a cost file that says so
    cost = json.loads((Path(__file__).resolve().parents[2] / "docs" / "fidelity" /
                       "cost.json").read_text())  # fmt: skip
    cost["runtime"]["cross_core_gamma"] = 0.3
    cost["runtime"]["cross_core_gamma_within_runs"] = 0.0
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(cost))
    args = ["simulate", "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost", str(path)]
    assert main([*args, "--set", "runtime.mode=sync", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert err.count("cross_core_gamma 0.30") == 1 and "up to 30%" in err
    assert main([*args, "--out", str(tmp_path / "b")]) == 0  # laminar: both engines on core 1
    assert "cross_core_gamma" not in capsys.readouterr().err
    cost["runtime"]["cross_core_gamma_within_runs"] = 0.28
    path.write_text(json.dumps(cost))
    assert main([*args, "--set", "runtime.mode=sync", "--out", str(tmp_path / "c")]) == 0
    assert "cross_core_gamma" not in capsys.readouterr().err


def test_a_job_in_no_calibrated_placement_is_warned(tmp_path, capsys):
    """Issue 31, two campaigns: calibrated on two-engine runs alone, a single sync engine beside
    an idle core came out 25-35% slow. The cost file records its runs' (mode, rollouts)
    placements; ``simulate --cost`` warns for a job in none of them, once, and not otherwise."""
    from types import SimpleNamespace

    from laminar.calibrate import placements
    from laminar.cli import main

    def run(mode, rollouts):
        return SimpleNamespace(config=SimpleNamespace(
            runtime=SimpleNamespace(mode=mode, rollouts=rollouts)))  # fmt: skip

    seen = placements([run("sync", 2), run("laminar", 2), run("sync", 2)])
    assert seen == [{"mode": "laminar", "rollouts": 2}, {"mode": "sync", "rollouts": 2}]
    cost = json.loads((Path(__file__).resolve().parents[2] / "docs" / "fidelity" /
                       "cost.json").read_text())  # fmt: skip
    cost["runtime"]["placements"] = seen
    path = tmp_path / "cost.json"
    path.write_text(json.dumps(cost))
    args = ["simulate", "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost", str(path),
            "--set", "runtime.mode=sync"]  # fmt: skip
    assert main([*args, "--set", "runtime.rollouts=1", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert err.count("placement (sync, 1 rollout(s)) is none of its calibration runs' "
                     "(laminar x2, sync x2)") == 1, err
    assert main([*args, "--set", "runtime.rollouts=2", "--out", str(tmp_path / "b")]) == 0
    assert "placement" not in capsys.readouterr().err


def _trainer_seconds(root: Path, seconds) -> np.ndarray:
    """Give ``root``'s trainer steps ``seconds(flop)``; the steps' FLOPs (step 0 left out, as
    the fit leaves it)."""
    path = root / "profile" / "trainer_steps.csv"
    tr = pd.read_csv(path)
    flop = _flop(tr["tokens"].to_numpy(float), tr["tokens_sq"].to_numpy(float))
    tr["train_s"] = seconds(flop)
    tr.to_csv(path, index=False)
    return flop[1:]


def test_a_trainer_slope_the_steps_do_not_resolve_charges_the_whole_step_per_flop(tmp_path, capsys):
    """A short, noisy run whose step seconds do not grow with its FLOPs (here they shrink a
    little): a line's slope would go to nothing, a FLOP rate no machine has, and the cost file
    be refused. The fit charges each step's seconds per FLOP instead (the mean step kept)."""
    run = make_run(tmp_path / "run", seed=3)
    rng = np.random.default_rng(0)
    flop = _trainer_seconds(run, lambda f: 0.4 - 1e-12 * f + rng.normal(0, 0.01, len(f)))
    secs = pd.read_csv(run / "profile" / "trainer_steps.csv")["train_s"].to_numpy()[1:]
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(run), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "slope not resolved" in printed
    rt = json.loads(out.read_text())["runtime"]
    assert rt["trainer_step_base_s_by_threads"]["1"] == 0.0
    assert rt["trainer_flop_per_s_by_threads"]["1"] == pytest.approx(flop.sum() / secs.sum())
    fit = json.loads(out.read_text())["fit"]["trainer (1 thread)"]
    assert "slope not resolved" in fit["caveat"]


def test_a_noisy_trainer_line_keeps_its_base(tmp_path, capsys):
    """Steps whose seconds grow with their FLOPs through the noise keep base and rate apart."""
    run = make_run(tmp_path / "run", seed=4)
    rng = np.random.default_rng(1)
    _trainer_seconds(run, lambda f: 0.2 + f / RATE * rng.normal(1.0, 0.03, len(f)))
    out = tmp_path / "cost.json"
    assert main(["calibrate", str(run), "-o", str(out)]) == 0
    assert "slope not resolved" not in capsys.readouterr().out
    rt = json.loads(out.read_text())["runtime"]
    assert rt["trainer_step_base_s_by_threads"]["1"] == pytest.approx(0.2, abs=0.05)
    assert rt["trainer_flop_per_s_by_threads"]["1"] == pytest.approx(RATE, rel=0.1)
