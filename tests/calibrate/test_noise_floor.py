"""``benchmarks/fidelity.py: noise_floor``: how often a perfect model meets the bound."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def _fidelity():
    path = ROOT / "benchmarks" / "fidelity.py"
    spec = importlib.util.spec_from_file_location("fidelity_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _runs(setting: str, tokens: list[float]) -> pd.DataFrame:
    return pd.DataFrame({
        "setting": setting,
        "measured_train_tokens_per_s": tokens,
        "measured_step_time_s": [1000.0 / t for t in tokens],
        "predicted_train_tokens_per_s": [100.0] * len(tokens),
    })  # fmt: skip


def test_steady_runs_always_meet_and_spread_runs_often_do_not():
    f = _fidelity()
    df = pd.concat([_runs("steady", [100, 101, 99, 100, 102]),
                    _runs("spread", [60, 80, 100, 130, 170])])  # fmt: skip
    noise = f.noise_floor(df, draws=4000).set_index("setting")
    assert noise.loc["steady", "p_within"] == 1.0
    assert noise.loc["spread", "p_within"] < 0.6
    assert noise.loc["all rows", "p_within"] <= noise.loc["spread", "p_within"]
    assert noise.loc["steady", "measured_cv"] < 0.02 < noise.loc["spread", "measured_cv"]
    assert noise.loc["steady", "predicted_cv"] == 0.0
    text = "\n".join(f.noise_markdown(noise.reset_index()))
    assert "every row at once" in text and "| spread |" in text
