"""Cost files, ``config.json`` (``model.hf_config`` / ``model.spec``), ``cluster.hardware_spec``,
config files and ``--set`` values, tried as a hostile user would (issue 32): every bad one ends
in exit 2 with one line naming the file and the key, what is wrong and what would be right, and
nothing written; never a traceback, a hang or nonsense accepted. The fuzzes mutate a valid
input and ask: refused naming the key, or accepted with finite results.

Runs use a tiny cluster (a few trajectories, two steps) and run in process through
``laminar.cli.main``; the fuzzes call the one checked reader of each kind of input directly and
simulate what it accepts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from laminar.cli import main
from laminar.config import load_config
from laminar.costfile import COEFFICIENTS, OPTIONAL, read_cost_file
from laminar.errors import ConfigError
from laminar.sim import simulate
from laminar.sim.cost import load_cost_file
from laminar.sim.costdata import derive
from laminar.specs.model import from_hf_config

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "laminar" / "data" / "models"
CALIBRATED = ROOT / "docs" / "fidelity" / "cost.json"  # a `laminar calibrate` file
TINY = [
    "cluster.gpus=8",
    "workload.prompts_per_step=3",
    "workload.samples_per_prompt=2",
    "workload.steps=2",
    "workload.max_prompt_len=64",
    "workload.max_response_len=256",
]
FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples each run
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def run(tmp_path: Path, *args: str, out: str = "out") -> tuple[int, str]:
    """``laminar simulate --out tmp/out ARGS`` in process; checks the contract (no traceback;
    exit 2: one error line, nothing written) and returns (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["simulate", *args, "--out", str(tmp_path / out)])
    text = err.getvalue()
    assert "Traceback" not in text, text[-3000:]
    assert code in (0, 2), (code, text[-2000:])
    if code == 2:
        lines = text.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("laminar: error: "), text[-2000:]
        assert len(lines[0]) < 2100
        assert not (tmp_path / out).exists()
        assert not [p for p in tmp_path.iterdir() if "staging" in p.name]
    return code, text


def sets(*extra: str) -> list[str]:
    return [x for s in (*TINY, *extra) for x in ("--set", s)]


def good_cost() -> dict:
    return json.loads(derive("h800", "qwen2.5-7b", tp=1).to_json())


def write(path: Path, data=None, *, raw: str | bytes | None = None) -> str:
    if isinstance(raw, bytes):
        path.write_bytes(raw)
    else:
        path.write_text(raw if raw is not None else json.dumps(data))
    return str(path)


def with_value(name: str, text: str) -> str:
    """A valid cost file's JSON with coefficient ``name``'s value written as ``text``."""
    data = good_cost()
    data["coefficients"][name]["value"] = "@@"
    return json.dumps(data).replace('"@@"', text)


# Cost files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("decode_base_s", "NaN", "nan is not a finite number"),
        ("decode_base_s", "Infinity", "inf is not a finite number"),
        ("decode_base_s", "1e400", "inf is not a finite number"),
        ("decode_base_s", "-1", "-1 s is out of range; expected 0..10 s"),
        ("decode_base_s", "1e308", "out of range; expected 0..10 s"),
        ("decode_base_s", '"0.01"', "expected a number, got '0.01'"),
        ("decode_base_s", "true", "expected a number, got True"),
        ("decode_base_s", "[[1]]", "expected a number, got list"),
        ("train_flop_per_s_per_gpu", "0", "0 FLOP/s is out of range; expected 1e+08..1e+17"),
        ("train_flop_per_s_per_gpu", "1e-300", "out of range"),
        ("kv_capacity_tokens", "0.5", "out of range; expected 1..1e+11 tokens"),
        ("replica_gpus", "1.5", "1.5 must be a whole number"),
        ("machine_gpus", "1e-300", "out of range; expected 1..64 GPUs"),
        ("rdma_bytes_per_s", "0", "out of range; expected 1e+06..1e+14 bytes/s"),
        ("moe_experts", "1e308", "out of range; expected 0..65536 experts"),
        ("moe_experts_per_token", "4", "4 with moe_experts 0: expected 1..moe_experts"),
    ],
)
def test_a_bad_coefficient_is_refused_by_name_with_its_range(tmp_path, name, text, message):
    path = write(tmp_path / "c.json", raw=with_value(name, text))
    code, err = run(tmp_path, *sets(), "--cost", path)
    assert code == 2 and f"c.json: coefficients.{name}: " in err and message in err, err


def test_missing_unknown_and_inconsistent_coefficients(tmp_path):
    data = good_cost()
    del data["coefficients"]["decode_base_s"]
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "a.json", data))
    assert code == 2 and "decode_base_s: missing; expected {value: ..., unit: 's'}" in err
    data = good_cost()
    data["coefficients"]["warp_factor"] = {"value": 9}
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "b.json", data))
    assert code == 2 and "coefficients.warp_factor: unknown coefficient" in err
    data = good_cost()
    data["colour"] = "blue"
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "c.json", data))
    assert code == 2 and "c.json: colour: unknown key; expected label, coefficients" in err
    data = good_cost()
    for name in ("decode_base_s", "decode_per_seq_s"):
        data["coefficients"][name]["value"] = 0
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "d.json", data))
    assert code == 2 and "a decode step must take time" in err
    data = good_cost()
    data["coefficients"]["train_flop_per_s_per_gpu"]["value"] = 1e8  # in range, but with 7B ...
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "e.json", data))
    assert code == 2 and "s a token on one GPU; expected <= 1 s" in err  # ... 170 s a token
    data = good_cost()
    data["coefficients"]["pcie_bytes_per_s"]["value"] = 1e6  # 15 GB at 1 MB/s: 4 hours
    code, err = run(tmp_path, *sets(), "--cost", write(tmp_path / "f.json", data))
    assert code == 2 and "the weights take 1.52e+04 s" in err


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: os.mkfifo(d / "c.json"), "not a regular file (a FIFO, device or socket)"),
        (lambda d: None, "not a regular file"),  # /dev/zero
        (lambda d: (d / "c.json").mkdir(), "is a directory; expected a cost file"),
        (lambda d: write(d / "c.json", raw="[" * 100_000 + "]" * 100_000), "nested more than 64"),
        (lambda d: write(d / "c.json", raw=" " * (2 << 20)), "larger than 1,048,576"),
        (lambda d: write(d / "c.json", raw=b"{}\xe9"), "not UTF-8 text"),
        (lambda d: write(d / "c.json", raw='{"a": 1' + "0" * 5000 + "}"), "4,300 digits"),
        (lambda d: write(d / "c.json", raw="[1, 2]"), "expected a JSON object, got list"),
        (lambda d: write(d / "c.json", raw="{nope"), "not valid JSON"),
    ],
)
def test_a_cost_file_is_read_with_bounds(tmp_path, make, message):
    make(tmp_path)
    path = "/dev/zero" if message == "not a regular file" else str(tmp_path / "c.json")
    code, err = run(tmp_path, *sets(), "--cost", path)
    assert code == 2 and message in err, err


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("refill_latency_s", -5, "runtime.refill_latency_s: -5 is out of range; expected 0..3600"),
        ("refill_latency_s", "x", "runtime.refill_latency_s: expected a number, got 'x'"),
        ("refill_latency_s", 1e308, "out of range"),
        ("core_sharing_alpha", -3, "runtime.core_sharing_alpha: -3 is out of range"),
        ("core_sharing_alpha_batch", True, "expected a number, got True"),
        ("cross_core_gamma_within_runs", float("nan"), "runtime.cross_core_gamma_within_runs: "),
        ("cross_core_gamma_within_runs", -0.1, "cross_core_gamma_within_runs: -0.1 is out of"),
        ("placements", {"mode": "sync"}, "runtime.placements: expected a list"),
        ("placements", [{"mode": "async", "rollouts": 1}], "runtime.placements[0].mode: "),
        ("placements", [{"mode": "sync", "rollouts": 0}], "runtime.placements[0].rollouts: "),
        ("placements", [{"mode": "sync", "rollouts": True}], "placements[0].rollouts: expected"),
        ("placements", [["sync", 1]], "runtime.placements[0]: expected a mapping"),
        ("engine_spin_s", 1e308, "runtime.engine_spin_s: 1e+308 is out of range"),
        ("trainer_flop_per_s_by_threads", {"1": 0}, "by_threads.1: 0 is out of range"),
        ("trainer_flop_per_s_by_threads", {"x": 1e9}, "a trainer thread count 1..4096"),
        ("trainer_flop_per_s_by_threads", [1], "expected a mapping, got list"),
        ("trainer_step_base_s_by_threads", {"1": -1}, "by_threads.1: -1 is out of range"),
        ("engine_load_per_rollout_by_mode", {"laminar": -1}, "by_mode.laminar: -1 is out"),
        ("engine_load_per_rollout_by_mode", {"turbo": 1}, "a runtime mode (laminar or sync)"),
        ("core_sharing_alpah", 1.0, "runtime.core_sharing_alpah: unknown key"),
    ],
)
def test_a_bad_runtime_block_is_refused_by_name(tmp_path, key, value, message):
    data = json.loads(CALIBRATED.read_text())
    data["runtime"][key] = value
    path = write(tmp_path / "cal.json", data)
    code, err = run(tmp_path, "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost", path)
    assert code == 2 and message in err, err


def test_a_calibrated_cost_file_never_silently_shrinks_a_cluster(tmp_path):
    # the 1024-GPU default with a CPU calibration: refused, naming the mismatch and the way out
    code, err = run(tmp_path, "--cost", str(CALIBRATED))
    assert code == 2 and "config: sim.setting: " in err
    assert "calibrated on a local `laminar train` job" in err and "model qwen2.5-7b" in err
    assert "sim.setting=runtime" in err and "sim.setting=cluster" in err
    code, err = run(tmp_path, "--preset", "tiny-cpu", "--set", "cluster.gpus=64", "--cost",
                    str(CALIBRATED))  # fmt: skip
    assert code == 2 and "cluster 64 x h800" in err
    # the train job's own config: simulated as that job, quietly
    code, err = run(tmp_path, "--preset", "tiny-cpu", "--set", "workload.steps=3", "--cost",
                    str(CALIBRATED), out="job")  # fmt: skip
    assert code == 0 and "error" not in err
    # said explicitly: the coefficients on the cluster
    code, _ = run(tmp_path, *sets("sim.setting=cluster"), "--cost", str(CALIBRATED), out="cl")
    assert code == 0


def test_a_run_directorys_cost_model_json_is_a_cost_file(tmp_path):
    assert run(tmp_path, *sets("sim.systems=[laminar, verl]"), out="run")[0] == 0
    again = load_cost_file(tmp_path / "run" / "cost_model.json")  # one model per system
    one = load_cost_file(write(tmp_path / "one.json", good_cost()))
    assert again.coefficients == one.coefficients


def test_calibrate_never_writes_nan(tmp_path):
    from laminar.calibrate import cost_file_json

    text = cost_file_json({"fit": {"refill latency": {"r2": float("nan")}}})
    assert "NaN" not in text and json.loads(text)["fit"]["refill latency"]["r2"] is None


# config.json: model.hf_config and model.spec ---------------------------------------------------


def hf(name: str = "qwen2.5-7b") -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())


@pytest.mark.parametrize(
    "key, text, message",
    [
        # NaN and Infinity parse (transformers writes a Mamba-2 time_step_limit's Infinity)
        # and are refused by key
        ("hidden_size", "NaN", "hidden_size: nan is not a finite number"),
        ("rope_theta", "Infinity", "rope_theta: inf is not a finite number"),
        ("time_step_limit", "[0.0, NaN]", "time_step_limit[1]: nan is not a finite number"),
        ("rope_theta", "1e400", "rope_theta: inf is not a finite number"),
        ("hidden_size", "1000000000000", "hidden_size: expected a whole number 1..1,048,576"),
        ("num_hidden_layers", "1e12", "1..10,000 (got 1000000000000.0)"),
        ("vocab_size", "[1, 2, 3]", "vocab_size: expected a whole number 1..16,777,216 (got list)"),
        ("num_attention_heads", '"28"', "expected a whole number 1..16,384 (got '28')"),
        ("num_key_value_heads", "0", "num_key_value_heads: expected a whole number 1..16,384"),
        ("num_hidden_layers", "1" + "0" * 5000, "more than 4,300 digits"),
        ("model_type", "[1]", "model_type: expected text, got list"),
    ],
)
def test_a_bad_config_json_is_refused_by_key(tmp_path, key, text, message):
    data = hf()
    data[key] = "@@"
    path = write(tmp_path / "config.json", raw=json.dumps(data).replace('"@@"', text))
    code, err = run(tmp_path, *sets(f"model.hf_config={path}"))
    assert code == 2 and "config.json: " in err and message in err, err


def test_a_moe_config_json_cannot_expand_a_list(tmp_path):
    for value, message in [
        (list(range(10_000)), "mlp_only_layers: expected a list of at most 48 layer indices"),
        ("abc", "mlp_only_layers: expected a list of at most 48"),
        ([0, 99], "mlp_only_layers: 99 is not a layer index 0..47"),
    ]:
        data = hf("qwen3-30b-a3b")
        data["mlp_only_layers"] = value
        path = write(tmp_path / "moe.json", data)
        code, err = run(tmp_path, *sets(f"model.hf_config={path}", "model.rollout_tp=4"))
        assert code == 2 and message in err, err
    data = hf("qwen3-30b-a3b")
    data["num_hidden_layers"] = 10**12  # was a 10^12-entry list of MoE layers
    path = write(tmp_path / "moe.json", data)
    code, err = run(tmp_path, *sets(f"model.hf_config={path}"))
    assert code == 2 and "num_hidden_layers: expected a whole number 1..10,000" in err


@pytest.mark.timeout(60)
def test_config_json_is_read_with_bounds(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")
    latin = json.dumps(hf()).replace("qwen2", "q\xe9").encode("latin-1")
    (tmp_path / "latin.json").write_bytes(latin)
    write(tmp_path / "deep.json", raw='{"a":' * 5000 + "1" + "}" * 5000)
    for path, message in [
        (tmp_path / "fifo.json", "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (tmp_path, "is a directory"),
        (tmp_path / "latin.json", "is not UTF-8 text"),
        (tmp_path / "deep.json", "nested more than 64 deep"),
        (tmp_path / "missing.json", "no such file"),
    ]:
        code, err = run(tmp_path, *sets(f"model.hf_config={path}"))
        assert code == 2 and message in err, err


@pytest.mark.parametrize(
    "spec, message",
    [
        ("{hidden_size: .nan}", "model.spec.hidden_size: nan is not a finite number"),
        ("{hidden_size: .inf}", "model.spec.hidden_size: inf is not a finite number"),
        ("{hidden_size: 1000000000000}", "model.spec.hidden_size: expected a whole number"),
        ("{rope_scaling: {factor: .nan}}", "model.spec.rope_scaling.factor: nan is not a finite"),
    ],
)
def test_a_bad_inline_spec_is_refused_by_key(tmp_path, spec, message):
    code, err = run(tmp_path, *sets(f"model.spec={spec}"))
    assert code == 2 and message in err, err


# cluster.hardware_spec -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, message",
    [
        ("{hbm_bytes_per_s: 2.4e14}", "hbm_bytes_per_s: 2.4e+14 bytes/s is outside 2.04e+11..8e"),
        ("{bf16_flops: 1e40}", "bf16_flops: 1e+40 FLOP/s is outside"),
        ("{decode_weight_bw_efficiency: 0}", "decode_weight_bw_efficiency: 0 is outside >0..1"),
        ("{decode_weight_bw_efficiency: 5}", "is outside >0..1"),
        ("{nvlink_domain_gpus: 2.5}", "nvlink_domain_gpus: 2.5 must be a whole number"),
        ("{tp_allreduce_s: 1e9}", "tp_allreduce_s: 1e+09 s is outside 0..0.001 s"),
        ("{gpu_memory_bytes: yes}", "gpu_memory_bytes: expected a finite number (got 'yes')"),
        ("{gpu_memory_bytes: true}", "gpu_memory_bytes: expected a finite number (got True)"),
        ("{gpu_memory_bytes: .nan}", "cluster.hardware_spec.gpu_memory_bytes: Input should be a"),
        ("{warp_drive: 1}", "warp_drive: unknown fact; known: arch,"),
        ("{arch: [1]}", "cluster.hardware_spec.arch: Input should be"),
    ],
)
def test_a_hardware_spec_fact_must_be_plausible(tmp_path, spec, message):
    code, err = run(tmp_path, *sets(f"cluster.hardware_spec={spec}"))
    assert code == 2 and message in err, err
    assert "--set cluster.hardware_spec=" in err  # the source named


def test_a_plausible_hardware_spec_runs(tmp_path):
    spec = "{gpu_memory_bytes: 96e9, hbm_bytes_per_s: 4.0e12, fp8_flops: 0, arch: hopper}"
    assert run(tmp_path, *sets(f"cluster.hardware_spec={spec}"))[0] == 0


# Config files and --set values -----------------------------------------------------------------


@pytest.mark.parametrize(
    "override, message",
    [
        ("cluster.gpus=yes", "cluster.gpus: Input should be a valid integer"),
        ("cluster.gpus=on", "(got 'on')"),
        ("cluster.gpus=true", "(got 'true')"),
        ("workload.steps=no", "workload.steps: Input should be a valid integer"),
        ("workload.max_response_len=8:00", "(got '8:00')"),  # YAML 1.1: 480
        ("cluster.trainer_fraction=.nan", "Input should be a finite number (got nan)"),
        ("sim.max_sim_time_s=1e400", "Input should be a finite number (got inf)"),
        ("seed=1" + "0" * 5000, "a whole number of 5,001 digits is out of range"),
        ("seed=1" + "0" * 40, "a whole number of 41 digits"),
        ("sim.warmup_steps=true", "sim.warmup_steps: Input should be a valid integer, unable to"),
        ("workload.source={type: synthetic, preset: math, params: {a: true}}", "params.a"),
        ("faults.events=[{type: relay, at_s: false}]", "faults.events[0].at_s"),
    ],
)
def test_a_set_value_is_what_it_says(tmp_path, override, message):
    code, err = run(tmp_path, *sets(override))
    assert code == 2 and message in err, err


def test_numbers_yaml_1_2_reads_as_numbers():
    cfg = load_config(overrides=["sim.max_sim_time_s=1e7", "cluster.gpus=0x10", "seed=010"])
    assert (cfg.sim.max_sim_time_s, cfg.cluster.gpus, cfg.seed) == (1e7, 16, 10)
    assert load_config(overrides=["model.name=no"]).model.name == "no"  # text, not false


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("big.toml", "seed = 1" + "0" * 5000 + "\n", "more than 4,300 digits"),
        ("big2.toml", "seed = 1" + "0" * 100 + "\n", "seed: a whole number of 101 digits"),
        ("nan.toml", "[cluster]\ntrainer_fraction = nan\n", "Input should be a finite number"),
        ("inf.toml", "[sim]\nmax_sim_time_s = inf\n", "Input should be a finite number"),
        ("bool.toml", "seed = true\n", "seed: Input should be a valid integer"),
        ("big.yaml", "cluster:\n  gpus: 1" + "0" * 5000 + "\n", "line 2: a whole number of"),
        ("yes.yaml", "seed: yes\n", "seed: Input should be a valid integer"),
        ("deep.toml", "a = " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_a_config_file_value_is_refused_by_key(tmp_path, name, text, message):
    path = write(tmp_path / name, raw=text)
    code, err = run(tmp_path, path, *sets())
    assert code == 2 and message in err and name in err, err


def test_a_resolved_config_reads_back_under_yaml_1_2(tmp_path):
    from laminar.config import dump_config

    cfg = load_config(overrides=["model.name='1e3'", "model.hf_config='0o17'"])
    assert (cfg.model.name, cfg.model.hf_config) == ("1e3", "0o17")
    path = write(tmp_path / "r.yaml", raw=dump_config(cfg))
    assert load_config(path) == cfg


# Fuzzes ----------------------------------------------------------------------------------------

ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "-1", "0", "1e308", "1e-300", '"x"', "true",
               "null", "[[1]]", "{}", "1e400", "0.5", "3"]  # fmt: skip
HOSTILE_VALUES = st.one_of(
    st.sampled_from(ODD_NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.integers(-(2**70), 2**70).map(str),
)
COEFF_NAMES = sorted([*COEFFICIENTS, *OPTIONAL])


@st.composite
def cost_mutations(draw) -> tuple[str, list[str]]:
    """A valid cost file's text with 1-3 coefficients dropped, set to a hostile value or scaled
    by up to 30x either way; returns (text, the names changed)."""
    data = good_cost()
    names = draw(st.lists(st.sampled_from(COEFF_NAMES), min_size=1, max_size=3, unique=True))
    texts = {}
    for name in names:
        how = draw(st.sampled_from(["drop", "hostile", "hostile", "scale", "scale"]))
        if how == "drop":
            data["coefficients"].pop(name, None)
        elif how == "scale" and name in data["coefficients"]:  # a plausible hand edit
            factor = 10 ** draw(st.floats(-1.5, 1.5))
            data["coefficients"][name]["value"] *= factor
        else:
            data["coefficients"].setdefault(name, {"value": 0, "unit": _unit(name)})
            data["coefficients"][name]["value"] = f"@{name}@"
            texts[name] = draw(HOSTILE_VALUES)
    text = json.dumps(data)
    for name, value in texts.items():
        text = text.replace(f'"@{name}@"', value)
    return text, names


def _unit(name: str) -> str:
    return COEFFICIENTS[name][0] if name in COEFFICIENTS else OPTIONAL[name][0]


@settings(FUZZ, max_examples=100)
@given(cost_mutations())
def test_fuzz_cost_files_refuse_by_key_or_simulate_finite(tmp_path, mutated):
    text, names = mutated
    path = write(tmp_path / "fuzz.json", raw=text)
    try:
        cost = load_cost_file(path)
    except ConfigError as e:
        event("refused")
        assert "fuzz.json" in str(e)
        assert any(n in str(e) for n in names) or "not valid JSON" in str(e) or "4,300" in str(
            e
        ), str(e)
        return
    for name, c in cost.coefficients.items():
        assert math.isfinite(c.value), name
    for b, kv in [(1, 0), (256, 1e6)]:
        assert 0 < cost.decode_step_s(b, kv) < math.inf
    assert 0 <= cost.train_s([4096] * 8, 8) < math.inf
    assert 0 <= cost.transfer_s(cost.weight_bytes, "rdma") < math.inf
    try:
        result = simulate(load_config(overrides=[*TINY, f"sim.cost_file={path}"]),
                          summary_only=True)  # fmt: skip
    except ConfigError as e:  # e.g. a trajectory that does not fit a tiny KV cache
        event("accepted, the job refused")
        assert str(e).startswith("config: "), str(e)
        return
    event("accepted and simulated")
    row = result.summary.iloc[0]
    assert row["steps"] == 2 and math.isfinite(row["train_tokens_per_s"])
    assert math.isfinite(row["sim_time_s"]) and row["sim_time_s"] > 0


DIMENSIONS = ["hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads",
              "num_key_value_heads", "intermediate_size", "head_dim", "num_experts",
              "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step",
              "mlp_only_layers", "rope_theta", "tie_word_embeddings", "model_type",
              "mlp_layer_types", "layer_types", "interleave_moe_layer_step", "moe_layers",
              "attention_chunk_size", "intermediate_size_mlp", "index_topk", "index_head_dim",
              "index_n_heads", "indexer_types", "shared_intermediate_size",
              "num_shared_experts"]  # fmt: skip


@FUZZ
@given(
    st.sampled_from(["qwen2.5-7b", "qwen3-30b-a3b", "deepseek-v3", "llama-3.1-8b"]),
    st.lists(st.tuples(st.sampled_from(DIMENSIONS), HOSTILE_VALUES), min_size=1, max_size=3),
)
def test_fuzz_config_json_refuses_by_key_or_gives_a_sane_model(model, changes):
    data = hf(model)
    for key, value in changes:
        data[key] = json.loads(value.replace("NaN", "1e400").replace("Infinity", "1e400"))
    try:
        spec = from_hf_config(copy.deepcopy(data), name=model, source="fuzz.json")
    except ConfigError as e:
        event("refused")
        assert str(e).startswith("fuzz.json: ")
        keys = {k for k, _ in changes} | {"head_dim", "num_key_value_heads", "n_routed_experts",
                                          "num_experts", "num_experts_per_tok", "mlp_only_layers",
                                          "moe_intermediate_size", "intermediate_size",
                                          "index_head_dim", "index_n_heads"}  # fmt: skip
        assert any(f": {k}" in str(e) or f".{k}" in str(e) for k in keys), str(e)
        return
    event("accepted")
    assert spec.total_params > 0 and spec.active_params > 0
    assert 0 < spec.kv_bytes_per_token(2) < 2**63
    assert math.isfinite(spec.linear_flop_per_token) and spec.linear_flop_per_token > 0
    assert 0 <= spec.experts_per_token <= spec.experts or not spec.is_moe


NUMBER_KEYS = ["cluster.gpus", "cluster.trainer_fraction", "workload.steps", "seed",
               "sim.max_sim_time_s", "sim.warmup_steps", "repack.interval_s",
               "workload.max_response_len", "sim.gpu_memory_utilization",
               "runtime.engine_spin_s", "relay.chunks"]  # fmt: skip
ODD_TEXTS = ["yes", "no", "on", "off", "true", "False", "~", "null", ".nan", ".inf", "-.inf",
             "8:00", "0x10", "0o17", "010", "1e3", "1_000", "'8'", "[8]", "{a: 1}", "2001-01-01",
             "1" + "0" * 5000, "1e99999", "!!int x", "&a 1", "*a", "8.0", "0.5", "-1"]  # fmt: skip
SET_TEXTS = st.one_of(
    st.sampled_from(ODD_TEXTS),
    st.integers(-(2**80), 2**80).map(str),
    st.floats(width=64).map(repr),
)


@FUZZ
@given(st.sampled_from(NUMBER_KEYS), SET_TEXTS)
def test_fuzz_set_values_are_numbers_or_refused_by_key(key, text):
    try:
        cfg = load_config(overrides=[f"{key}={text}"])
    except ConfigError as e:
        event("refused")
        assert str(e).startswith(f"--set {key}="[:60]), str(e)
        return
    event("accepted")
    value = cfg
    for part in key.split("."):
        value = getattr(value, part)
    assert not isinstance(value, bool)
    assert value == "auto" or (isinstance(value, int | float) and math.isfinite(value)) or (
        value is None and key == "runtime.engine_spin_s"
    ), (key, text, value)


def test_fuzz_a_few_through_the_cli(tmp_path):
    """The same surfaces end to end: one bad input of each kind, exit 2, nothing written."""
    bad_cost = write(tmp_path / "c.json", raw=with_value("decode_per_seq_s", "NaN"))
    bad_hf = write(tmp_path / "h.json", raw=json.dumps({**hf(), "hidden_size": True}))
    bad_hw = "cluster.hardware_spec={hbm_bytes_per_s: 1e30}"
    for args in (["--cost", bad_cost], sets(f"model.hf_config={bad_hf}"), sets(bad_hw)):
        assert run(tmp_path, *args)[0] == 2
    assert read_cost_file(write(tmp_path / "ok.json", good_cost())).runtime is None


HYBRID_DIMENSIONS = ["linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
                     "linear_value_head_dim", "linear_conv_kernel_dim", "full_attention_interval",
                     "layer_types", "hybrid_override_pattern", "layers_block_type",
                     "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
                     "conv_kernel", "expand", "moe_latent_size", "n_routed_experts",
                     "moe_shared_expert_intermediate_size", "mamba_ssm_cache_dtype",
                     "time_step_limit", "num_hidden_layers", "attn_type_list", "model_type",
                     "head_dim", "num_key_value_heads", "linear_attn_config"]  # fmt: skip
HYBRID_VALUES = st.one_of(HOSTILE_VALUES, st.sampled_from([
    '"M*-E"', '"MMMM"', '"M*X"', '""', '["linear_attention", "full_attention"]', '["mamba"]',
    '"float32"', '"int8"', '[0, 1]', '[0.0, Infinity]', '"minimax"', '"nemotron_h"',
    '"qwen3_next"', '"bamba"', '"granitemoehybrid"', '"kimi_linear"', '"falcon_h1"',
    '{"full_attn_layers": [4], "kda_layers": [1, 2, 3]}', '{"num_heads": "x"}']))  # fmt: skip
CONFIGS = Path(__file__).parents[1] / "specs" / "configs"


@FUZZ
@given(
    st.sampled_from(["qwen3-next-80b-a3b", "nemotron-3-nano-30b-a3b", "jamba-v0.1"]),
    st.lists(st.tuples(st.sampled_from(HYBRID_DIMENSIONS), HYBRID_VALUES), min_size=1,
             max_size=3),
)  # fmt: skip
def test_fuzz_hybrid_config_json_refuses_by_key_or_sizes_its_state(model, changes):
    """Hybrids (linear-attention / state-space layers with attention) under hostile values: a
    refusal names a key, or the model has parameters, a KV cache and a finite state."""
    data = json.loads((CONFIGS / f"{model}.json").read_text())
    for key, value in changes:
        data[key] = json.loads(value.replace("NaN", "1e400"))
    try:
        spec = from_hf_config(copy.deepcopy(data), name=model, source="fuzz.json")
    except ConfigError as e:
        event("refused")
        assert re.match(r"fuzz\.json: [\w.\[\]]+: ", str(e)), str(e)
        return
    event("accepted")
    assert spec.total_params > 0 and spec.active_params > 0 and spec.attention_layers > 0
    assert 0 < spec.kv_bytes_per_token(2) < 2**63
    assert 0 <= spec.state_bytes_per_sequence(2) < 2**63
    assert spec.state_layers == 0 or spec.state_bytes_per_sequence(2) > 0
    for tp in (1, 2, 8):
        assert 0 < spec.kv_bytes_per_token_per_gpu(2, 4096, tp) < math.inf
