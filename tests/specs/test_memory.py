"""The memory fit check: refusals name the smallest count that fits, and that count fits."""

from __future__ import annotations

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.specs.memory import check_fit, require_fit

SHORT = ["workload.steps=2", "sim.warmup_steps=1", "workload.prompts_per_step=16",
         "sim.replica_series=false"]  # fmt: skip


# the data-parallel trainer (the preset splits sequences over 8 GPUs: trainer.cp=8)
PLAIN = "trainer.cp=1"


def test_72b_on_16_gpus_at_half_split_names_the_minimum_trainer_gpus():
    overrides = ["cluster.gpus=16", "cluster.trainer_fraction=0.5", PLAIN]
    cfg = load_config(preset="paper-math-72b", overrides=overrides)
    report = check_fit(cfg)
    assert not report.ok and report.trainer_gpus == 8
    n = report.min_trainer_gpus
    assert 8 < n <= 1024 and f"at least {n} trainer GPUs" in report.reason
    with pytest.raises(ConfigError, match=f"at least {n} trainer GPUs"):
        simulate(cfg)
    # The named minimum (whole machines) fits, one machine fewer does not.
    machines = -(-n // 8)
    ok = check_fit(cfg, trainer_gpus=machines * 8)
    assert ok.ok, ok.reason
    assert not check_fit(cfg, trainer_gpus=(machines - 1) * 8).ok
    # ... and so does a cluster with the advised GPU count at that split.
    assert "raise cluster.gpus to at least" in report.reason
    advised = int(report.reason.rsplit("at least ", 1)[1].split()[0])
    bigger = load_config(preset="paper-math-72b", overrides=[f"cluster.gpus={advised}", PLAIN])
    assert check_fit(bigger.model_copy(update={"cluster": bigger.cluster.model_copy(
        update={"trainer_fraction": (machines) / (advised // 8)})})).ok  # fmt: skip


def test_cli_exits_2_on_a_configuration_that_does_not_fit(tmp_path, capsys):
    from laminar.cli import main

    out = tmp_path / "run"
    args = ["simulate", "--preset", "paper-math-72b", "--set", "cluster.gpus=16", "--set", PLAIN,
            "--out", str(out)]  # fmt: skip
    assert main(args) == 2
    assert "trainer GPUs" in capsys.readouterr().err and not out.exists()


DSV3 = ["model.name=deepseek-v3", "model.rollout_tp=8", "cluster.hardware=h800",
        "cluster.gpus=512", "cluster.trainer_fraction=0.5"]  # fmt: skip


@pytest.mark.parametrize("quant", ["none", "fp8"])
def test_deepseek_v3_on_one_8xh800_machine_is_refused(quant):
    cfg = load_config(preset="paper-math-7b", overrides=[*DSV3, f"model.rollout_quant={quant}"])
    report = check_fit(cfg)
    assert not report.ok and report.key_path.startswith("model.rollout_")
    assert report.min_replica_gpus > 8  # 671B does not fit 8 x 80 GB, not even in fp8
    assert f"the smallest replica that fits is {report.min_replica_gpus} GPUs" in report.reason


def test_deepseek_v3_fits_with_fp8_and_expert_parallelism():
    bf16 = check_fit(load_config(preset="paper-math-7b", overrides=DSV3))
    fp8_ep = [*DSV3, "model.rollout_quant=fp8", "model.rollout_ep=2"]
    report = require_fit(load_config(preset="paper-math-7b", overrides=fp8_ep))
    assert report.ok and report.min_replica_gpus == 16 < bf16.min_replica_gpus
    # A 16-GPU replica spans two machines; the run simulates.
    cfg = load_config(preset="paper-math-7b", overrides=[*fp8_ep, *SHORT])
    s = simulate(cfg).summary.iloc[0]
    assert s["replicas"] == 256 // 16 and s["train_tokens_per_s"] > 0


def test_presets_fit_and_report_per_gpu_bytes_below_memory():
    for preset in ("paper-math-7b", "paper-math-32b", "paper-math-72b"):
        r = check_fit(load_config(preset=preset))
        assert r.ok, r.reason
        assert r.trainer_bytes_per_gpu <= r.gpu_bytes and r.rollout_bytes_per_gpu <= r.gpu_bytes


def test_colocated_systems_are_checked_on_every_gpu():
    # 72B on 48 GPUs: decoupled at 0.5 gives the trainer 24 (too few: the embedding group and
    # its gradient gathered, a measured layer working set, need 36); verl trains on all 48.
    cfg = load_config(preset="paper-math-72b",
                      overrides=["cluster.gpus=48", "sim.systems=[verl]", *SHORT])  # fmt: skip
    assert not check_fit(cfg).ok
    assert check_fit(cfg, trainer_gpus=48).ok
    assert simulate(cfg).summary.iloc[0]["trainer_gpus"] == 48


def test_config_cli_lists_catalogs_and_checks_fit(capsys):
    from laminar.cli import main

    assert main(["config", "models"]) == 0
    assert "deepseek-v3: 671.03B params" in capsys.readouterr().out
    assert main(["config", "hardware"]) == 0
    assert "mi300x: 192 GB" in capsys.readouterr().out
    assert main(["config", "architectures"]) == 0
    out = capsys.readouterr().out
    assert " deepseek_v32 " in out and " llama4 " in out and "  rwkv: RWKV" in out
    assert main(["config", "fit", "--preset", "paper-math-7b"]) == 0
    assert "fits: trainer" in capsys.readouterr().out
    assert main(["config", "fit", "--preset", "paper-math-72b", "--set", "cluster.gpus=16"]) == 2


def test_deepseek_v3_fp8_fits_one_8xh200_machine_as_served_in_practice():
    # SGLang and vLLM serve DeepSeek-V3 (FP8) on one 8 x H200 machine or two 8 x H100/H800.
    h200 = [*DSV3, "cluster.hardware=h200", "cluster.gpus=256"]
    fp8_cfg = load_config(preset="paper-math-7b", overrides=[*h200, "model.rollout_quant=fp8"])
    fp8 = check_fit(fp8_cfg)
    assert fp8.ok and fp8.min_replica_gpus == 8
    assert not check_fit(load_config(preset="paper-math-7b", overrides=h200)).ok  # bf16: 1.3 TB


def test_a_single_gpu_leaves_no_trainer_and_says_so():
    report = check_fit(load_config(overrides=["cluster.gpus=1"]))
    assert not report.ok and report.key_path == "cluster.gpus" and "no GPU" in report.reason
