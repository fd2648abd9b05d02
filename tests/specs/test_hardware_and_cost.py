"""Hardware catalog, inline overrides, and what the cost model derives for MoE, EP and fp8."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pandas as pd
import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.sim.costdata import cost_model_for, derive, derive_specs
from laminar.specs.hardware import FACT_UNITS, catalog_hardware, hardware_names, hardware_spec
from laminar.specs.model import catalog_spec

GPUS = ["a100-80g", "b200", "b300", "gb200", "gb300", "h100-sxm", "h20", "h200", "h800", "mi300x"]
SHORT = ["cluster.gpus=16", "workload.steps=2", "sim.warmup_steps=1",
         "workload.prompts_per_step=16", "sim.replica_series=false"]  # fmt: skip


def test_catalog_has_every_gpu_with_a_source_per_fact():
    assert hardware_names() == GPUS
    table = json.loads((resources.files("laminar") / "data" / "hardware.json").read_text())
    for name in GPUS:
        hw = catalog_hardware(name)
        assert set(FACT_UNITS) <= set(hw.facts)
        for key, fact in hw.facts.items():
            assert len(fact.source) > 10, (name, key)
            assert fact.basis in ("datasheet", "calibrated", "assumed"), (name, key)
            assert fact.basis != "calibrated" or fact.where, (name, key)
        assert table["gpus"][name]["facts"]["gpu_memory_bytes"]["unit"] == "bytes"
    assert (
        catalog_hardware("h800")["nvlink_bytes_per_s"]
        < catalog_hardware("h100-sxm")["nvlink_bytes_per_s"]
    )


def test_inline_hardware_spec_overrides_facts_and_is_marked_config():
    inline = "cluster.hardware_spec={gpu_memory_bytes: 96e9, rdma_efficiency: 0.8}"
    cfg = load_config(overrides=["cluster.hardware=h100-sxm", inline])
    hw = hardware_spec(cfg.cluster)
    assert hw["gpu_memory_bytes"] == 96e9 and hw.facts["rdma_efficiency"].basis == "config"
    assert hw["hbm_bytes_per_s"] == catalog_hardware("h100-sxm")["hbm_bytes_per_s"]
    with pytest.raises(ConfigError, match=r"cluster\.hardware_spec: warp_drive: unknown fact"):
        load_config(overrides=["cluster.hardware_spec={warp_drive: 1}"])  # refused as it loads
    bad = load_config().cluster.model_construct(hardware="h800", hardware_spec={"warp_drive": 1})
    with pytest.raises(ConfigError, match=r"cluster\.hardware_spec\.warp_drive"):
        hardware_spec(bad)  # and where a section was built without validation
    with pytest.raises(ConfigError, match=r"cluster\.hardware"):
        hardware_spec(load_config(overrides=["cluster.hardware=tpu-v9"]).cluster)


def test_summary_says_which_efficiencies_were_calibrated_and_assumed(tmp_path):
    res = simulate(load_config(preset="paper-math-7b", overrides=SHORT))
    s = res.summary.iloc[0]
    assert "decode_weight_bw_efficiency" in s["efficiencies_calibrated"]
    assert "rdma_efficiency" in s["efficiencies_assumed"]
    res.write(tmp_path / "run")
    back = pd.read_csv(tmp_path / "run" / "summary.csv")
    assert back.loc[0, "hardware"] == "h800" and back.loc[0, "model"] == "qwen2.5-7b"
    # No published training run on MI300X: its trainer MFU is borrowed, and says so.
    amd = simulate(
        load_config(preset="paper-math-7b", overrides=[*SHORT, "cluster.hardware=mi300x"])
    )
    assert "train_mfu" in amd.summary.iloc[0]["efficiencies_assumed"]


def test_moe_decode_reads_more_experts_as_the_batch_grows():
    m = derive("h800", "qwen3-30b-a3b", tp=1)
    spec = catalog_spec("qwen3-30b-a3b")
    fixed = [m.decode_fixed_s(b) for b in (1, 4, 16, 64, 256)]
    assert fixed == sorted(fixed)
    # The growth beyond the linear FLOP term is the experts touched.
    extra = m.decode_fixed_s(64) - m.decode_base_s - 64 * m.decode_per_seq_s
    assert extra == pytest.approx(spec.experts_touched(64) * m.decode_per_expert_s)
    all_experts = spec.experts * m.decode_per_expert_s  # every expert of every MoE layer
    assert m.decode_base_s + all_experts == pytest.approx(m.prefill_base_s, rel=1e-6)
    dense = derive("h800", "qwen3-8b", tp=1)
    assert dense.decode_fixed_s(64) == pytest.approx(
        dense.decode_base_s + 64 * dense.decode_per_seq_s
    )


def test_expert_parallelism_and_fp8():
    ep1 = derive("h800", "qwen3-30b-a3b", tp=1)
    ep4 = derive("h800", "qwen3-30b-a3b", tp=1, ep=4)
    assert ep4.replica_gpus == 4
    assert ep4.kv_capacity_tokens > 3 * ep1.kv_capacity_tokens  # four attention groups
    assert ep4.decode_per_expert_s == pytest.approx(ep1.decode_per_expert_s / 4)
    assert ep4.decode_base_s > ep1.decode_base_s  # all-to-all latency per MoE layer
    fp8 = derive("h800", "qwen2.5-7b", tp=1, quant="fp8")
    bf16 = derive("h800", "qwen2.5-7b", tp=1)
    assert (
        fp8.weight_bytes < 0.6 * bf16.weight_bytes
        and fp8.kv_capacity_tokens > bf16.kv_capacity_tokens
    )
    assert fp8.decode_per_seq_s == pytest.approx(bf16.decode_per_seq_s / 2, rel=1e-3)  # FP8 cores
    a100 = derive("a100-80g", "qwen2.5-7b", tp=1, quant="fp8")
    a100_bf16 = derive("a100-80g", "qwen2.5-7b", tp=1)
    assert a100.decode_per_seq_s == pytest.approx(a100_bf16.decode_per_seq_s)  # no FP8 cores
    with pytest.raises(ConfigError, match="rollout_ep"):
        derive("h800", "qwen2.5-7b", tp=1, ep=2)


def test_kv_is_replicated_beyond_the_kv_heads():
    tp4 = derive("h800", "qwen2.5-7b", tp=4)  # 4 KV heads: split 4 ways
    tp8 = derive("h800", "qwen2.5-7b", tp=8)  # still 4 ways: each head on two GPUs
    assert tp8.decode_per_kv_token_s == pytest.approx(tp4.decode_per_kv_token_s)
    assert tp8.kv_capacity_tokens < 1.2 * tp4.kv_capacity_tokens


def test_hf_config_and_inline_spec_simulate(tmp_path):
    text = (resources.files("laminar") / "data" / "models" / "llama-3.1-8b.json").read_text()
    path = tmp_path / "config.json"
    path.write_text(text)
    by_file = load_config(overrides=[*SHORT, "model.name=mine", f"model.hf_config={path}"])
    by_name = load_config(overrides=[*SHORT, "model.name=llama-3.1-8b"])
    values = [
        {k: c.value for k, c in cost_model_for(x).coefficients.items()} for x in (by_file, by_name)
    ]
    assert values[0] == values[1]
    spec = json.loads(text)
    inline = load_config(overrides=SHORT).model_copy()
    inline.model.spec = spec
    inline.model.name = "inline"
    assert simulate(inline).summary.iloc[0]["train_tokens_per_s"] > 0
    moe = load_config(overrides=[*SHORT, "model.name=qwen3-30b-a3b", "model.rollout_ep=2"])
    assert simulate(moe).summary.iloc[0]["replicas"] == 8 // 2 * 1


def test_data_parallel_sync_is_charged_and_grows_across_machines():
    m = derive("h800", "qwen2.5-7b", tp=1)
    assert m.train_sync_s(1) == 0.0
    inside, across = m.train_sync_s(8), m.train_sync_s(16)
    assert 0 < inside < across  # NVLink inside a machine, a share of the NICs across
    grads = catalog_spec("qwen2.5-7b").total_params * 2
    assert across == pytest.approx(2 * 15 / 16 * grads / (m.rdma_bytes_per_s / 8))
    # Training no longer scales perfectly: 32x the GPUs is less than 32x faster.
    lens = [4096] * 512
    assert m.train_s(lens, 8) / m.train_s(lens, 256) < 32


def test_cost_files_without_the_optional_coefficients_keep_their_meaning(tmp_path):
    from laminar.sim.cost import OPTIONAL_UNITS, load_cost_file

    data = json.loads(derive("h800", "qwen2.5-7b", tp=1).to_json())
    for name in OPTIONAL_UNITS:
        data["coefficients"].pop(name)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = load_cost_file(path)
    flop = 1000 * old.train_flop_per_token + 1000**2 * old.train_flop_per_token_sq
    assert old.train_s([1000], 4) == pytest.approx(flop / (4 * old.train_flop_per_s_per_gpu))
    assert old.decode_fixed_s(64) == pytest.approx(old.decode_base_s + 64 * old.decode_per_seq_s)


def test_trainer_mfu_comes_from_published_runs():
    from laminar.specs.trainer import train_mfu

    runs = json.loads((resources.files("laminar") / "data" / "train_mfu.json").read_text())
    assert all(len(r["source"]) > 20 for r in runs["runs"])
    small, mid, big = (train_mfu("hopper", n).value for n in (1e9, 72e9, 1e12))
    assert small == pytest.approx(0.36) and big == pytest.approx(0.42)  # clamped at the ends
    assert small < mid < big
    assert train_mfu("ampere", 8.03e9).value == pytest.approx(0.582)
    borrowed = train_mfu("cdna3", 8e9)
    assert borrowed.basis == "assumed" and "no published cdna3 run" in borrowed.where


def test_gb200_nvlink_domain_spans_its_4_gpu_machines():
    gb, b = catalog_hardware("gb200"), catalog_hardware("b200")
    assert gb.nvlink_spans_machines and gb.machine_gpus == 4
    assert gb.nvlink_gpus(4) == 72 and b.nvlink_gpus(8) == 8
    assert b.nvlink_gpus(4) == 4  # an 8-GPU domain inside 4-GPU machines: the machine
    # The config takes the tray's 4 GPUs unless told otherwise; told, it keeps the user's.
    assert load_config(overrides=["cluster.hardware=gb200"]).cluster.gpus_per_machine == 4
    told = load_config(overrides=["cluster.hardware=gb200", "cluster.gpus_per_machine=8"])
    assert told.cluster.gpus_per_machine == 8 and hardware_spec(told.cluster).machine_gpus == 4
    # A section built without validation at the default 8 is refused, naming the key.
    bare = load_config().cluster.model_construct(hardware="gb200", gpus=64)
    with pytest.raises(ConfigError, match=r"cluster\.gpus_per_machine: gb200 machines hold 4"):
        hardware_spec(bare)
    # The override: true/false only, and it reaches the spec.
    spans = "cluster.hardware_spec={nvlink_spans_machines: false}"
    off = load_config(overrides=["cluster.hardware=gb200", spans])
    assert hardware_spec(off.cluster).nvlink_gpus(4) == 4
    with pytest.raises(ConfigError, match="nvlink_spans_machines: expected true or false"):
        load_config(overrides=["cluster.hardware_spec={nvlink_spans_machines: 2}"])


def test_collectives_inside_an_nvl72_rack_stay_on_nvlink():
    gb = catalog_hardware("gb200")
    spec = catalog_spec("qwen3-30b-a3b")
    rack = derive_specs(gb, spec, tp=16, gpus_per_machine=4)
    assert rack.nvlink_gpus == 72 and rack.machine_gpus == 4
    # The same GPUs as separate 4-GPU machines: TP 16 rings over their NICs every layer.
    apart = derive_specs(replace(gb, nvlink_spans_machines=False), spec, tp=16, gpus_per_machine=4)
    assert apart.nvlink_gpus == 4
    assert rack.decode_base_s < apart.decode_base_s
    assert rack.decode_per_seq_s < apart.decode_per_seq_s
    # A trainer's gradient sync over 64 GPUs: NVLink in the rack, the NICs across trays.
    assert rack.train_sync_s(64) < apart.train_sync_s(64)
    assert rack.train_sync_s(64) == pytest.approx(
        2 * 63 / 64 * rack.train_sync_bytes / rack.nvlink_bytes_per_s
    )
    assert rack.train_sync_s(128) == pytest.approx(apart.train_sync_s(128))  # beyond a rack
    # Past the rack (128 GPUs over 72-GPU racks: two of them), a TP group rings over racks.
    dsv3 = catalog_spec("deepseek-v3")
    wider = {**gb.facts, "nvlink_domain_gpus": replace(gb.facts["nvlink_domain_gpus"], value=256)}
    big = derive_specs(gb, dsv3, tp=128, gpus_per_machine=4)
    one_domain = derive_specs(replace(gb, facts=wider), dsv3, tp=128, gpus_per_machine=4)
    assert big.decode_base_s > one_domain.decode_base_s
    assert big.decode_per_seq_s > one_domain.decode_per_seq_s


def test_a_gb200_run_simulates_and_says_its_machine():
    res = simulate(load_config(overrides=[*SHORT, "cluster.hardware=gb200",
                                          "model.rollout_tp=8"]))  # fmt: skip
    s = res.summary.iloc[0]
    assert s["hardware"] == "gb200" and s["step_time_s_mean"] > 0


def test_a_cost_file_without_nvlink_gpus_keeps_nvlink_inside_a_machine():
    from laminar.sim.cost import CostModel

    full = derive("h800", "qwen2.5-7b", tp=1)
    assert full.nvlink_gpus == full.machine_gpus == 8
    older = {k: v for k, v in full.coefficients.items() if k != "nvlink_gpus"}
    back = CostModel(older, "written before nvlink_gpus")
    assert back.nvlink_gpus == back.machine_gpus
    assert back.train_sync_s(8) == full.train_sync_s(8) < full.train_sync_s(16)


def test_small_active_moe_trains_at_the_published_production_mfu():
    """Megatron-Bridge's published BF16 pretraining runs: a 5B-active MoE (GPT-OSS 120B) at 0.16
    of an H100, far below the 14B- and 39B-active research points; Blackwell has MoE runs of
    its own (B200, GB200), so it no longer borrows Hopper's."""
    from laminar.specs.trainer import train_mfu

    qwen3_30b = train_mfu("hopper", 3.35e9, moe=True)
    assert qwen3_30b.value == pytest.approx(0.160) and qwen3_30b.basis == "calibrated"
    assert train_mfu("hopper", 37.5e9, moe=True).value > 0.45  # the research points stand
    blackwell = [train_mfu("blackwell", n, moe=True) for n in (5.1e9, 22e9, 37e9)]
    assert all(f.basis == "calibrated" and "blackwell" in f.where for f in blackwell)
    assert [round(f.value, 3) for f in blackwell] == [round((0.164 + 0.181) / 2, 3), 0.291, 0.313]
    assert train_mfu("blackwell", 8e9).basis == "assumed"  # no BF16 dense Blackwell run yet


def test_a_moe_with_published_runs_of_its_own_size_takes_them_over_interpolation():
    """Qwen3-235B-A22B (22B active) has BF16 H100 runs of its own (Megatron-MoE-ModelZoo, seven
    layouts and lengths, 167-277 model TFLOP/s a GPU): its MFU is their mean, not a value
    interpolated between other models' research points (14B: 0.39, 39B: 0.49), and it stays at
    or below its own FP8 figure (0.256 of the BF16 peak), as FP8 GEMMs are not slower."""
    import json
    from importlib import resources

    from laminar.specs.trainer import train_mfu

    runs = json.loads((resources.files("laminar") / "data" / "train_mfu.json").read_text())
    own = [r["mfu"] for r in runs["runs"] if r.get("moe") and r.get("params") == 22e9
           and r["arch"] == "hopper" and r.get("precision", "bf16") == "bf16"]  # fmt: skip
    assert len(own) >= 5
    q235 = train_mfu("hopper", 22e9, moe=True)
    assert q235.value == pytest.approx(sum(own) / len(own))
    assert 0.15 < q235.value <= train_mfu("hopper", 22e9, moe=True, precision="fp8").value
    assert "22B" in q235.where


def test_fp8_training_takes_published_fp8_runs_and_needs_fp8_tensor_cores():
    from laminar.specs.trainer import train_mfu

    dense = train_mfu("hopper", 8.03e9, precision="fp8")
    assert dense.value == pytest.approx(0.752, abs=1e-3) and "FP8" in dense.where
    # Each precision its own runs: DeepSeek-V3's FP8 figure, not Mixtral's BF16 research point.
    assert train_mfu("hopper", 37e9, moe=True, precision="fp8").value == pytest.approx(0.342)
    # An H20's FP8 figure comes from H100s; it is not taken below the H20's own BF16 runs.
    h20 = train_mfu("hopper", 3.3e9, moe=True, precision="fp8", hardware="h20")
    assert h20.value == pytest.approx(train_mfu("hopper", 3.3e9, moe=True, hardware="h20").value)
    assert "which stand" in h20.where
    base = [*SHORT, "cluster.hardware=h100-sxm"]
    bf16 = cost_model_for(load_config(overrides=base))
    fp8 = cost_model_for(load_config(overrides=[*base, "trainer.precision=fp8"]))
    assert fp8.train_flop_per_s_per_gpu > 1.5 * bf16.train_flop_per_s_per_gpu
    assert fp8.train_flop_per_token == bf16.train_flop_per_token  # the same model FLOPs
    with pytest.raises(ConfigError, match=r"trainer\.precision: fp8 needs FP8 tensor cores"):
        cost_model_for(load_config(overrides=[*SHORT, "cluster.hardware=a100-80g",
                                              "trainer.precision=fp8"]))  # fmt: skip


def test_a_gpus_own_published_runs_win_over_its_architectures():
    """verl publishes its trainer's MFU on H20 (docs/perf/dpsk.md); an H100 keeps the Hopper
    runs, an H20 takes its own, in the cost model and in summary.csv's basis alike."""
    from laminar.specs.trainer import train_mfu

    h20 = train_mfu("hopper", 3.3e9, moe=True, hardware="h20")
    h100 = train_mfu("hopper", 3.3e9, moe=True, hardware="h100-sxm")
    assert h20.value == pytest.approx((0.40 + 0.37 + 0.31) / 3, abs=1e-3)
    assert "h20" in h20.where and h100.value == pytest.approx(0.160)
    assert train_mfu("hopper", 37e9, moe=True, hardware="h20").value == pytest.approx(0.19)
    # No dense H20 run: the dense H20 trainer keeps the Hopper runs.
    assert train_mfu("hopper", 8e9, hardware="h20").value == train_mfu("hopper", 8e9).value
    on = [*SHORT, "model.name=qwen3-30b-a3b", "trainer.ep=8"]
    rate = {hw: cost_model_for(load_config(overrides=[*on, f"cluster.hardware={hw}"]))
            .train_flop_per_s_per_gpu for hw in ("h20", "h100-sxm")}  # fmt: skip
    n = catalog_spec("qwen3-30b-a3b").active_params
    own = train_mfu("hopper", n, moe=True, hardware="h20").value
    assert rate["h20"] == pytest.approx(148e12 * own)
    assert rate["h100-sxm"] == pytest.approx(989.4e12 * 0.160)


def _cost(*overrides):
    return cost_model_for(load_config(overrides=["cluster.hardware=h100-sxm", *overrides]))


def _base(*overrides):
    return _cost(*overrides).decode_base_s


def test_decode_base_is_bytes_plus_a_floor_a_layer_plus_the_all_reduces_between_machines():
    hw = catalog_hardware("h100-sxm")
    spec = catalog_spec("qwen3-8b")
    one = ["model.name=qwen3-8b", "model.rollout_tp=1"]
    floor = _base(*one) - _base(*one, "cluster.hardware_spec={decode_layer_floor_s: 0}")
    assert floor == pytest.approx(spec.layers * hw["decode_layer_floor_s"])
    # a replica of 16 GPUs spans two 8-GPU machines: 2 all-reduces a layer, 2 ring steps each
    wide = ["model.name=deepseek-v3", "model.rollout_tp=16", "model.rollout_quant=fp8",
            "cluster.gpus=16", "sim.gpu_memory_utilization=0.9"]  # fmt: skip
    cross = _base(*wide) - _base(*wide, "cluster.hardware_spec={tp_allreduce_cross_s: 0}")
    ds = catalog_spec("deepseek-v3")
    assert cross == pytest.approx(2 * ds.layers * 2 * hw["tp_allreduce_cross_s"])
    # inside one machine the step between machines is not charged
    eight = ["model.name=qwen3-8b", "model.rollout_tp=8"]
    assert _base(*eight) == _base(*eight, "cluster.hardware_spec={tp_allreduce_cross_s: 0}")


def test_experts_read_at_their_own_rate():
    moe = ["model.name=qwen3-30b-a3b", "model.rollout_tp=2"]
    hw = catalog_hardware("h100-sxm")
    half = hw["decode_expert_bw_efficiency_16bit"] / 2
    slow = _cost(*moe, f"cluster.hardware_spec={{decode_expert_bw_efficiency_16bit: {half}}}")
    fast = _cost(*moe)
    assert slow.decode_per_expert_s == pytest.approx(2 * fast.decode_per_expert_s)
    # the dense weights' rate is another fact, and so is the quantized experts' one
    assert slow.decode_base_s == fast.decode_base_s
    assert _cost(*moe, "cluster.hardware_spec={decode_expert_bw_efficiency: 0.1}"
                 ).decode_per_expert_s == fast.decode_per_expert_s  # fmt: skip


def test_quantized_experts_read_at_the_quantized_kernels_rate():
    # BF16 experts at the 16-bit kernels' rate, FP8 ones at the block-scaled kernels': half the
    # bytes an expert, each at its own fraction of HBM
    hw = catalog_hardware("h100-sxm")
    moe = ["model.name=qwen3-30b-a3b", "model.rollout_tp=2"]
    bf16, fp8 = _cost(*moe), _cost(*moe, "model.rollout_quant=fp8")
    ratio = hw["decode_expert_bw_efficiency_16bit"] / hw["decode_expert_bw_efficiency"]
    assert fp8.decode_per_expert_s == pytest.approx(bf16.decode_per_expert_s / 2 * ratio)
    assert bf16.prefill_base_s > fp8.prefill_base_s
    # a checkpoint quantized already (gpt-oss's MXFP4 experts) is read at the quantized rate
    oss = ["model.hf_config=tests/specs/configs/gpt-oss-20b.json", "model.rollout_tp=1"]
    base = _cost(*oss)
    assert _cost(*oss, "cluster.hardware_spec={decode_expert_bw_efficiency_16bit: 0.1}"
                 ).decode_per_expert_s == base.decode_per_expert_s  # fmt: skip
    assert _cost(*oss, "cluster.hardware_spec={decode_expert_bw_efficiency: 0.1}"
                 ).decode_per_expert_s > base.decode_per_expert_s  # fmt: skip


def test_summary_names_the_expert_rate_a_moe_reads_at():
    from laminar.sim.costdata import efficiency_basis

    def named(*overrides):
        b = efficiency_basis(load_config(overrides=list(overrides)))
        return set((b["calibrated"] + ";" + b["assumed"]).split(";"))

    rates = {"decode_expert_bw_efficiency", "decode_expert_bw_efficiency_16bit"}
    assert not named() & rates  # the default model is dense
    moe = ["model.name=qwen3-30b-a3b", "model.rollout_tp=2", "cluster.hardware=h100-sxm"]
    assert named(*moe) & rates == {"decode_expert_bw_efficiency_16bit"}
    assert named(*moe, "model.rollout_quant=fp8") & rates == {"decode_expert_bw_efficiency"}
