"""The runtime's own job in the simulator (``laminar/sim/local.py``): one config, both engines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from laminar.cli import main
from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.sim.local import is_runtime_setting
from laminar.sim.local_workload import task_workload

COEFFS = {
    "replica_gpus": (1, "GPUs"),
    "weight_bytes": (2.0e6, "bytes"),
    "kv_capacity_tokens": (500_000, "tokens"),
    "decode_base_s": (0.005, "s"),
    "decode_per_seq_s": (1.0e-4, "s/sequence"),
    "decode_per_kv_token_s": (1.0e-7, "s/token"),
    "prefill_base_s": (0.0, "s"),
    "prefill_per_token_s": (2.0e-5, "s/token"),
    "prefill_per_token_sq_s": (0.0, "s/token^2"),
    "train_flop_per_token": (4.3e6, "FLOP/token"),
    "train_flop_per_token_sq": (2048.0, "FLOP/token^2"),
    "train_flop_per_s_per_gpu": (2.0e10, "FLOP/s"),
    "pcie_bytes_per_s": (6.0e7, "bytes/s"),
    "nvlink_bytes_per_s": (6.0e7, "bytes/s"),
    "rdma_bytes_per_s": (4.0e8, "bytes/s"),
    "rdma_startup_s": (0.0, "s"),
}


def cost_file(path, *, runtime: bool = True, rates=None) -> str:
    """A calibrated-looking cost file (``laminar calibrate`` writes the same shape)."""
    data = {
        "label": "test",
        "coefficients": {k: {"value": v, "unit": u} for k, (v, u) in COEFFS.items()},
    }
    if runtime:
        data["runtime"] = {"trainer_flop_per_s_by_threads": rates or {"1": 2.0e10, "2": 3.0e10}}
    path.write_text(json.dumps(data))
    return str(path)


def job(tmp_path, *overrides: str, runtime: bool = True):
    return load_config(
        preset="tiny-cpu",
        overrides=[
            "workload.steps=6",
            f"sim.cost_file={cost_file(tmp_path / 'cost.json', runtime=runtime)}",
            *overrides,
        ],
    )


def test_auto_setting_follows_the_cost_file(tmp_path):
    assert is_runtime_setting(job(tmp_path))
    assert not is_runtime_setting(job(tmp_path, runtime=False))
    assert is_runtime_setting(job(tmp_path, "sim.setting=runtime", runtime=False))


def test_runtime_setting_needs_a_cost_file():
    cfg = load_config(preset="tiny-cpu", overrides=["sim.setting=runtime", "workload.steps=3"])
    with pytest.raises(ConfigError, match=r"sim\.cost_file"):
        simulate(cfg)


def test_the_job_the_config_trains(tmp_path):
    lam = simulate(job(tmp_path)).summary.iloc[0]
    assert lam["system"] == "laminar" and lam["replicas"] == 2 and lam["steps"] == 6
    sync = simulate(job(tmp_path, "runtime.mode=sync")).summary.iloc[0]
    assert sync["system"] == "sync" and sync["staleness_max"] == 0
    three = simulate(job(tmp_path, "runtime.rollouts=3")).summary.iloc[0]
    assert three["replicas"] == 3


def test_flow_control_bounds_what_is_handed_out(tmp_path):
    """At most (steps consumed + 1 + prefetch_steps) x prompts_per_step groups ever issued."""
    for prefetch in (0.0, 1.0, 3.0):
        cfg = job(tmp_path, f"runtime.prefetch_steps={prefetch}")
        res = simulate(cfg)
        groups = res.trajectories["group_id"].nunique()
        p = cfg.workload.prompts_per_step
        assert groups <= math.floor((cfg.workload.steps + 1 + prefetch) * p)
        assert groups >= cfg.workload.steps * p


def test_replicas_on_one_core_share_it(tmp_path):
    """Two replicas pinned to one core generate more slowly than on two cores."""
    shared = simulate(job(tmp_path, 'runtime.cpu_binds=["1"]', "runtime.prefetch_steps=100"))
    apart = simulate(job(tmp_path, 'runtime.cpu_binds=["1", "2"]', "runtime.prefetch_steps=100"))
    ratio = apart.summary.iloc[0]["gen_tokens_per_s"] / shared.summary.iloc[0]["gen_tokens_per_s"]
    assert ratio > 1.3


def test_trainer_rate_follows_its_threads(tmp_path):
    """Sync mode trains on every core: the cost file's rate for 2 threads applies."""
    res = simulate(job(tmp_path, "runtime.mode=sync"))
    assert res.cost_models["sync"].train_flop_per_s_per_gpu == pytest.approx(3.0e10)
    res = simulate(job(tmp_path))
    assert res.cost_models["laminar"].train_flop_per_s_per_gpu == pytest.approx(2.0e10)


def test_task_workload_has_the_tasks_shape(tmp_path):
    cfg = job(tmp_path, "workload.max_response_len=32")
    w = task_workload(cfg)
    n = cfg.workload.samples_per_prompt
    assert (w.groupby("prompt_id").size() == n).all()
    assert w["response_len"].between(2, 32).all()
    assert abs(w["response_len"].median() - 7) <= 1  # median answer 6 + end of sequence


def test_simulate_cli_with_cost(tmp_path, capsys):
    cfg_path = tmp_path / "train.yaml"
    cfg_path.write_text("runtime: {mode: sync}\nworkload: {steps: 3}\n")
    cost = cost_file(tmp_path / "c.json")
    rc = main(["simulate", str(cfg_path), "--preset", "tiny-cpu", "--cost", cost,
               "--out", str(tmp_path / "out")])  # fmt: skip
    assert rc == 0
    assert "sync" in capsys.readouterr().out
    assert (tmp_path / "out" / "summary.csv").is_file()


def test_a_train_config_without_cost_file_says_what_to_do(tmp_path, capsys):
    rc = main(["simulate", "--preset", "tiny-cpu", "--out", str(tmp_path / "out")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "model.name" in err and "laminar calibrate" in err
    assert not (tmp_path / "out").exists()


def test_a_task_without_known_lengths_asks_for_a_trace(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text('{"prompt": "1+1?", "answer": "2"}\n')
    cfg = job(tmp_path, f"runtime.task={{type: jsonl, path: {data}}}")
    with pytest.raises(ConfigError, match="trace"):
        simulate(cfg)


class _Mate:
    """A replica as ``CoreSharing`` sees it: an index, its running trajectories, and
    re-planning it can be asked to do."""

    def __init__(self, index: int):
        self.index, self.replans = index, 0
        self.running: list = []

    def sync(self) -> None:
        pass

    def wake(self) -> None:
        self.replans += 1


def test_an_idle_engine_occupies_its_cores_while_it_spins(tmp_path):
    """A replica that stops decoding still slows its core-mate for ``engine_spin_s`` (vLLM's
    worker polls for its next step that long), by the spinning cost (``alpha_spin``) rather
    than the decoding one, unless it starts again before."""
    import simpy

    from laminar.sim.local import CoreSharing

    cost = tmp_path / "spin.json"
    data = json.loads(Path(cost_file(cost)).read_text())
    data["runtime"].update(core_sharing_alpha=1.0, core_sharing_alpha_spin=0.25,
                           engine_spin_s=1.0)
    cost.write_text(json.dumps(data))
    cfg = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}",
                                                    'runtime.cpu_binds=["1"]',
                                                    "runtime.engine_spin_s=null"])  # fmt: skip
    share = CoreSharing(cfg)
    assert share.spin_s == 1.0  # the job sets no bound: the calibrated runs' spin
    bounded = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}",
                                                        "runtime.engine_spin_s=0.05"])
    assert CoreSharing(bounded).spin_s == 0.05  # the job's own bound
    a, b = _Mate(0), _Mate(1)
    cluster = type("Cluster", (), {"env": simpy.Environment(), "replicas": [a, b]})()
    share.busy_changed(cluster, a, True)
    share.busy_changed(cluster, b, True)
    assert share.slowdown(a) == 2.0
    share.busy_changed(cluster, b, False)
    assert a.replans == 2  # b came (a re-planned), then b stopped decoding (again)
    cluster.env.run(until=0.9)
    assert share.slowdown(a) == 1.25  # b still spins: it costs less than decoding
    cluster.env.run(until=1.1)
    assert share.slowdown(a) == 1.0 and a.replans == 3  # b left: a re-planned
    share.busy_changed(cluster, b, True)
    share.busy_changed(cluster, b, False)
    cluster.env.run(until=1.6)
    share.busy_changed(cluster, b, True)  # back before its spin ended: the leave is void
    cluster.env.run(until=3.0)
    assert share.slowdown(a) == 2.0  # decoding again


def test_a_decoding_mate_costs_more_the_larger_its_batch(tmp_path):
    """``core_sharing_alpha_batch``: a decoding core-mate adds alpha + alpha_batch x its
    running sequences / B (its CPU demand grows with its batch)."""
    import simpy

    from laminar.sim.local import CoreSharing

    cost = tmp_path / "batch.json"
    data = json.loads(Path(cost_file(cost)).read_text())
    data["runtime"].update(core_sharing_alpha=0.5, core_sharing_alpha_batch=2.0,
                           core_sharing_alpha_spin=0.25, engine_spin_s=1.0)
    cost.write_text(json.dumps(data))
    cfg = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}",
                                                    'runtime.cpu_binds=["1"]',
                                                    "runtime.max_batch=64"])  # fmt: skip
    share = CoreSharing(cfg)
    a, b = _Mate(0), _Mate(1)
    cluster = type("Cluster", (), {"env": simpy.Environment(), "replicas": [a, b]})()
    share.busy_changed(cluster, a, True)
    share.busy_changed(cluster, b, True)
    b.running = [object()] * 16
    assert share.slowdown(a) == pytest.approx(1.0 + 0.5 + 2.0 * 16 / 64)
    b.running = [object()] * 64
    assert share.slowdown(a) == pytest.approx(1.0 + 0.5 + 2.0)
    share.busy_changed(cluster, b, False)  # spinning: its batch no longer counts
    assert share.slowdown(a) == pytest.approx(1.25)


def cold_job(tmp_path, *overrides: str, extra_s: float = 0.0, first_s: float = 0.0):
    """The tiny-cpu job with a cost file that states a cold start."""
    path = tmp_path / f"cold-{extra_s}-{first_s}.json"
    data = json.loads(Path(cost_file(path)).read_text())
    data["runtime"].update(trainer_first_step_extra_s_by_threads={"1": extra_s, "2": extra_s},
                           first_prompts_s=first_s)
    path.write_text(json.dumps(data))
    return load_config(preset="tiny-cpu",
                       overrides=["workload.steps=4", f"sim.cost_file={path}", *overrides])


@pytest.mark.parametrize("mode", ["laminar", "sync"])
def test_the_cold_start_delays_the_first_prompts_and_step(tmp_path, mode):
    """The first prompts start ``first_prompts_s`` into the job and only the first trainer
    step pays ``trainer_first_step_extra_s``."""
    warm = simulate(cold_job(tmp_path, f"runtime.mode={mode}"))
    cold = simulate(cold_job(tmp_path, f"runtime.mode={mode}", extra_s=0.7, first_s=0.5))
    assert warm.trajectories["gen_start_s"].min() < 0.5
    assert cold.trajectories["gen_start_s"].min() == pytest.approx(0.5)
    warm_s, cold_s = warm.steps["train_s"].to_numpy(), cold.steps["train_s"].to_numpy()
    assert cold_s[0] == pytest.approx(warm_s[0] + 0.7)


def test_a_longer_cold_start_lets_prefetch_run_further_ahead(tmp_path):
    """While the first step is slow the rollouts generate up to the prompt budget: with three
    steps of prefetch, more finished groups wait when the trainer's second step starts."""
    ahead = []
    for extra_s in (0.0, 2.0):
        res = simulate(cold_job(tmp_path, "runtime.prefetch_steps=3", extra_s=extra_s))
        second = res.steps.iloc[1]["start_s"]
        ahead.append(int((res.trajectories["gen_end_s"] <= second).sum()))
    assert ahead[1] > ahead[0]


@pytest.mark.parametrize(("binds", "rollouts", "expected"),
                         [('["1"]', 2, [1.5, 1.5]), ('["1"]', 1, [1.25]),
                          ('["0", "1"]', 2, [1.25, 1.25])])  # fmt: skip
def test_each_laminar_rollout_on_a_core_loads_its_engines(tmp_path, binds, rollouts, expected):
    """``engine_load_per_rollout_by_mode``: a replica runs 1 + beta x (the mode's rollouts on
    its cores, itself included) times slower than alone, before any core-mate's cost; sync
    mode's rollouts have no control loop on the cores (beta 0)."""
    from laminar.sim.local import CoreSharing

    cost = tmp_path / "load.json"
    data = json.loads(Path(cost_file(cost)).read_text())
    data["runtime"]["engine_load_per_rollout_by_mode"] = {"laminar": 0.25, "sync": 0.0}
    cost.write_text(json.dumps(data))
    sets = [f"sim.cost_file={cost}", f"runtime.cpu_binds={binds}", f"runtime.rollouts={rollouts}"]
    share = CoreSharing(load_config(preset="tiny-cpu", overrides=sets))
    assert [share.slowdown(_Mate(i)) for i in range(rollouts)] == expected
    sync = CoreSharing(load_config(preset="tiny-cpu", overrides=[*sets, "runtime.mode=sync"]))
    assert [sync.slowdown(_Mate(i)) for i in range(rollouts)] == [1.0] * rollouts


def _cross_cost(tmp_path, gamma: float | None) -> Path:
    cost = tmp_path / f"cross-{gamma}.json"
    data = json.loads(Path(cost_file(cost)).read_text())
    data["runtime"].update(core_sharing_alpha=1.0, core_sharing_alpha_spin=0.25,
                           engine_spin_s=1.0)  # fmt: skip
    if gamma is not None:
        data["runtime"]["cross_core_gamma"] = gamma
    cost.write_text(json.dumps(data))
    return cost


def test_an_engine_alone_on_its_core_slows_while_another_core_works(tmp_path):
    """``cross_core_gamma``: a replica alone on its cores runs 1 + gamma times slower while a
    replica on other cores decodes or the trainer (on cores not its own) updates; replicas
    sharing their cores and GPU jobs are not affected."""
    import simpy

    from laminar.sim.local import CoreSharing

    cost = _cross_cost(tmp_path, 0.5)
    apart = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}",
                                                      'runtime.cpu_binds=["0", "1"]',
                                                      'runtime.trainer_cpus="0"'])  # fmt: skip
    share = CoreSharing(apart)
    a, b = _Mate(0), _Mate(1)
    cluster = type("Cluster", (), {"env": simpy.Environment(), "replicas": [a, b]})()
    share.busy_changed(cluster, a, True)  # a decodes on core 0: b (core 1) would run slower
    assert share.slowdown(a) == 1.0 and share.slowdown(b) == 1.5 and b.replans == 1
    share.busy_changed(cluster, b, True)  # and a slows while b decodes
    assert share.slowdown(a) == 1.5 and a.replans == 1
    share.busy_changed(cluster, b, False)
    share.busy_changed(cluster, a, False)
    assert share.slowdown(a) == 1.0 and share.slowdown(b) == 1.0
    assert a.replans == 2 and b.replans == 2
    share.trainer_changed(cluster, True)  # the trainer on core 0: only b (core 1) slows
    assert share.slowdown(b) == 1.5 and share.slowdown(a) == 1.0
    assert b.replans == 3 and a.replans == 2
    share.trainer_changed(cluster, False)
    assert share.slowdown(b) == 1.0
    # two replicas on one core: sharing, not the cross-core term
    shared = CoreSharing(load_config(preset="tiny-cpu", overrides=[
        f"sim.cost_file={cost}", 'runtime.cpu_binds=["1"]', 'runtime.trainer_cpus="0"']))
    shared.trainer_changed(cluster, True)
    shared.busy_changed(cluster, a, True)
    assert shared.slowdown(a) == 1.0
    gpu = load_config(preset="tiny-cpu", overrides=[f"sim.cost_file={cost}",
                                                    "runtime.device=cuda"])  # fmt: skip
    assert CoreSharing(gpu).cross == 0.0


def test_the_cross_core_term_slows_a_one_rollout_job_and_zero_changes_nothing(tmp_path):
    def tokens_per_s(gamma):
        cfg = load_config(preset="tiny-cpu", overrides=[
            "workload.steps=6", f"sim.cost_file={_cross_cost(tmp_path, gamma)}",
            "runtime.rollouts=1", 'runtime.cpu_binds=["1"]', 'runtime.trainer_cpus="0"'])
        return simulate(cfg).summary.iloc[0]["train_tokens_per_s"]

    plain = tokens_per_s(None)
    assert tokens_per_s(0.0) == plain  # an older cost file: the same run
    assert tokens_per_s(1.0) < plain


def test_simulate_says_when_cost_gives_repack_a_bound_train_would_not_have(tmp_path, capsys):
    """``laminar train`` bounds repack's steps only with a cost file; ``--cost`` on a config
    without one simulates the bound: the command says so (not for a config with the bound
    off, e.g. a train run's config.yaml, which records the bound it ran with)."""
    cost = cost_file(tmp_path / "cost.json")
    args = ["simulate", "--preset", "tiny-cpu", "--cost", cost, "--set", "workload.steps=2"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "note: this simulates repack with its step bound" in capsys.readouterr().err
    off = ["--set", "repack.max_step_slowdown=0", "--out", str(tmp_path / "b")]
    assert main([*args, *off]) == 0
    assert "step bound" not in capsys.readouterr().err


def test_a_run_simulated_with_the_bound_it_ran_with_repacks(tmp_path):
    """A train run without a cost file repacks unbounded, and its ``config.yaml`` says so
    (``as_ran``); simulated from that file with a cost file, its repack moves trajectories.
    With the default bound kept instead (how runs were predicted before), a CPU-like step
    cost lets a destination take less."""
    from laminar.config import write_resolved
    from laminar.runtime.data.manager import as_ran

    write_resolved(as_ran(load_config(preset="tiny-cpu")), tmp_path)
    cost = f"sim.cost_file={cost_file(tmp_path / 'cost.json')}"
    ran = load_config(tmp_path / "config.yaml", overrides=[cost, "workload.steps=10"])
    kept = ran.model_copy(update={"repack": ran.repack.model_copy(
        update={"max_step_slowdown": 1.15})})  # fmt: skip
    moved = simulate(ran).summary.iloc[0]["moved_trajectories"]
    assert moved > 0
    assert simulate(kept).summary.iloc[0]["moved_trajectories"] < moved
