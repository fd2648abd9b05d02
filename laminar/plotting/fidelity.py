"""Simulator fidelity: predicted against measured, per setting (``benchmarks/fidelity.py``
writes ``settings.csv``; ``docs/fidelity.md`` and ``notebooks/fidelity.ipynb`` draw it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from laminar.plotting.common import RunDirError, new_figure

FIDELITY_METRICS = {
    "train_tokens_per_s": "train tokens/s",
    "step_time_s": "mean step time (s)",
    "gen_tokens_per_s": "generation tokens/s",
    "staleness_mean": "staleness, mean",
    "staleness_max": "staleness, max",
    "kv_tokens_mean": "KV tokens per replica, mean",
}


def load_fidelity(path: str | Path) -> pd.DataFrame:
    """``settings.csv`` of a fidelity study (one row per setting), checked for its columns."""
    p = Path(path)
    try:
        df = pd.read_csv(p)
    except (OSError, pd.errors.ParserError) as e:
        raise RunDirError(f"{p}: cannot read: {e}") from None
    need = ["setting", "held_out"] + [f"{w}_{m}" for m in FIDELITY_METRICS
                                      for w in ("measured", "predicted")]  # fmt: skip
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise RunDirError(f"{p}: missing column '{missing[0]}'")
    return df


def fidelity_table(settings: pd.DataFrame, metric: str = "train_tokens_per_s") -> pd.DataFrame:
    """Measured median (with the repeats' min and max), predicted, and the prediction's error."""
    cols = {"setting": "setting", "held_out": "held out"}
    out = settings[list(cols)].rename(columns=cols)
    m = f"measured_{metric}"
    out["measured"] = settings[m]
    out["min"], out["max"] = settings.get(f"{m}_min"), settings.get(f"{m}_max")
    out["predicted"] = settings[f"predicted_{metric}"]
    out["error"] = settings[f"predicted_{metric}"] / settings[m] - 1
    return out


def fidelity_figure(settings: pd.DataFrame):
    """Measured (bars: median, whiskers: min-max of the repeats) against predicted (dots), one
    panel per figure; held-out settings are hatched."""
    fig, axes = new_figure(ncols=3, nrows=2, width=4.6, height=3.4)
    x = np.arange(len(settings))
    held = settings["held_out"].astype(bool).to_numpy()
    for ax, (metric, label) in zip(np.ravel(axes), FIDELITY_METRICS.items(), strict=False):
        m = settings[f"measured_{metric}"].to_numpy(float)
        lo = settings.get(f"measured_{metric}_min", pd.Series(m)).to_numpy(float)
        hi = settings.get(f"measured_{metric}_max", pd.Series(m)).to_numpy(float)
        bars = ax.bar(x, m, color="#9ecae1", edgecolor="#3182bd", label="measured (median)")
        for b, h in zip(bars, held, strict=True):
            if h:
                b.set_hatch("//")
        ax.errorbar(x, m, yerr=[m - lo, hi - m], fmt="none", ecolor="#08519c", capsize=3)
        ax.plot(x, settings[f"predicted_{metric}"], "o", color="#d62728", label="predicted")
        ax.set_title(label, fontsize=10)
        ax.set_xticks(x, settings["setting"], rotation=60, ha="right", fontsize=8)
    np.ravel(axes)[0].legend(fontsize=8)
    fig.suptitle("Simulator vs real runs (hatched: held out from calibration)", fontsize=11)
    return fig
