"""Random valid configurations of real sizes (catalog models and real config.json files, every
GPU of the catalog, trainer layouts, precisions, lengths) simulate every system without a crash
and keep the simulator's documented invariants; a configuration that cannot run is refused with
a ConfigError naming its key. The fixed seeds make CI draw the same configurations each run;
``LAMINAR_SWEEP_SEEDS=500`` draws more."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest

from laminar.config import load_config
from laminar.errors import ConfigError
from laminar.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted(json.loads((ROOT / "laminar/data/models/catalog.json").read_text()))
CONFIGS = sorted(str(p) for p in (ROOT / "tests/specs/configs").glob("*.json"))
GPUS = sorted(json.loads((ROOT / "laminar/data/hardware.json").read_text())["gpus"])
SYSTEMS = ("laminar", "verl", "one-step", "stream", "partial")
STAGES = ("gen_s", "old_logprob_s", "ref_s", "update_s", "weight_sync_s")
SEEDS = range(int(os.environ.get("LAMINAR_SWEEP_SEEDS", "24")))


def draw(seed: int) -> list[str]:
    """One configuration's ``--set`` overrides, drawn from ``seed``."""
    r = random.Random(seed)
    model = (f"model.hf_config={r.choice(CONFIGS)}" if r.random() < 0.3
             else f"model.name={r.choice(MODELS)}")  # fmt: skip
    hw = r.choice(GPUS)
    per_machine = 4 if hw.startswith("gb") else 8
    sets = [model, f"cluster.hardware={hw}",
            f"cluster.gpus={per_machine * r.choice([1, 2, 4, 8, 16, 32])}",
            f"cluster.trainer_fraction={r.choice([0.125, 0.25, 0.5])}",
            f"model.rollout_tp={r.choice([1, 1, 2, 4, 8])}",
            f"trainer.tp={r.choice([1, 1, 2, 4])}", f"trainer.pp={r.choice([1, 1, 2])}",
            f"trainer.ep={r.choice([1, 1, 1, 8])}", f"trainer.cp={r.choice([1, 1, 2])}",
            f"trainer.mini_batches={r.choice([1, 2, 4])}",
            f"trainer.old_logprob={r.choice(['system', 'recompute', 'rollout'])}",
            f"trainer.reference={r.choice(['true', 'false'])}",
            f"trainer.precision={r.choice(['bf16', 'bf16', 'fp8'])}",
            f"model.rollout_quant={r.choice(['none', 'none', 'fp8'])}",
            f"model.rollout_eager={r.choice(['true', 'false', 'false'])}",
            f"workload.prompts_per_step={r.choice([8, 16, 32])}",
            f"workload.samples_per_prompt={r.choice([1, 4, 8])}",
            f"workload.max_response_len={r.choice([1024, 4096, 16384])}",
            f"workload.steps={r.choice([4, 6])}",
            f"repack.enabled={r.choice(['true', 'false'])}",
            f"sim.max_batch={r.choice([32, 256, 1024])}",
            f"sim.systems=[{', '.join(SYSTEMS)}]", f"seed={seed}"]  # fmt: skip
    if r.random() < 0.3:
        sets.append(f"workload.response_len_mean={r.choice([300, 900])}")
    return sets


def first_valid(seed: int, tries: int = 12):
    """(overrides, config, result) of the first of ``tries`` draws that simulates; every draw
    refused on the way must be refused with a ConfigError naming a key of the config."""
    for k in range(tries):
        sets = draw(seed * 1000 + k)
        try:
            cfg = load_config(overrides=sets)
            return sets, cfg, simulate(cfg)
        except ConfigError as e:  # a layout that does not fit, a dense model given EP, ...
            text = str(e)
            assert text.startswith("config: ") or "--set" in text, text
            assert any(key in text for key in ("cluster.", "model.", "trainer.", "workload.")), text
    pytest.fail(f"{tries} draws from seed {seed}, every one refused")


@pytest.mark.filterwarnings("ignore::laminar.errors.LaminarWarning")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_valid_configuration_simulates_every_system_within_its_invariants(seed):
    sets, cfg, result = first_valid(seed)
    s = result.summary.set_index("system")
    assert sorted(s.index) == sorted(SYSTEMS)
    for col in s.columns:
        for system, v in s[col].items():
            if isinstance(v, float) and not math.isnan(v):
                assert math.isfinite(v) and v >= 0, (system, col, v, sets)
    assert (s["train_tokens_per_s"] > 0).all() and (s["step_time_s_mean"] > 0).all(), sets
    # Every system trains every step on whole batches, each trajectory once.
    w = cfg.workload
    t = result.trajectories
    consumed = t[t["consumed_version"] >= 0]
    per_system = consumed.groupby("system")["traj_id"].count()
    assert (per_system == w.steps * w.prompts_per_step * w.samples_per_prompt).all(), sets
    assert not consumed.duplicated(["system", "traj_id"]).any()
    # The stages are serial on the trainer's timeline: they add up to the step.
    st = result.steps
    assert (st[list(STAGES)].sum(axis=1) - st["step_time_s"]).abs().max() < 1e-6, sets
    assert (st[list(STAGES)] >= 0).all().all()
    # A replica never holds more KV than its cache; staleness bounds hold by system.
    r = result.replicas
    assert (r["kv_tokens"] <= r["kv_capacity_tokens"]).all(), sets
    worst = consumed.groupby("system")["staleness"].max()
    assert worst["verl"] == 0 and worst["stream"] == 0 and worst["one-step"] <= 1, sets
    assert worst["partial"] <= cfg.baselines.partial_eta, sets
