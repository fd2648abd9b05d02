"""Simulated against published step times, row by row: the picture of docs/validation.md."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.ticker import NullFormatter

from laminar.plotting.common import new_figure

VALIDATION_COLUMNS = ("id", "table", "system", "published_s", "simulated_s")
MARKERS = {"verl": "o", "partial": "^", "stream": "s", "one-step": "D", "laminar": "*"}


def _tables(rows: pd.DataFrame) -> dict[str, tuple]:
    """One colour per published table, in the rows' order (matplotlib's tab10: a table is not
    a system, so not the systems' colours)."""
    palette = colormaps["tab10"].colors
    names = list(dict.fromkeys(rows["table"]))
    return {t: palette[i % len(palette)] for i, t in enumerate(names)}


def validation_figure(rows: pd.DataFrame, goal: float = 0.20):
    """Left: simulated against published step time (log-log; the diagonal, and the band
    within ``goal`` shaded), one colour a table, one marker a system. Right: each row's
    simulated/published, sorted, with the band: where the misses are and which side."""
    missing = [c for c in VALIDATION_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"validation rows lack column '{missing[0]}'")
    rows = rows[np.isfinite(rows["simulated_s"].astype(float))]
    fig, axes = new_figure(ncols=2, width=6.4, height=5.2)
    ax, bx = axes[0]
    colours = _tables(rows)
    pub, sim = rows["published_s"].astype(float), rows["simulated_s"].astype(float)
    if len(rows):
        lo, hi = min(pub.min(), sim.min()) / 1.5, max(pub.max(), sim.max()) * 1.5
        xs = np.geomspace(lo, hi, 50)
        ax.fill_between(xs, xs * (1 - goal), xs * (1 + goal), color="#dddddd", zorder=0,
                        label=f"within {goal:.0%}")  # fmt: skip
        ax.plot(xs, xs, color="#777777", lw=1, zorder=1)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    for (table, system), g in rows.groupby(["table", "system"], sort=False):
        ax.scatter(g["published_s"], g["simulated_s"], color=colours[table],
                   marker=MARKERS.get(system, "x"), s=36, edgecolor="black", linewidth=0.4,
                   zorder=2)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("published step time (s)")
    ax.set_ylabel("simulated step time (s)")
    handles = [ax.scatter([], [], color=c, marker="o", s=36, label=t) for t, c in colours.items()]
    handles += [ax.scatter([], [], color="white", edgecolor="black", marker=m, s=36, label=s)
                for s, m in MARKERS.items() if s in set(rows["system"])]  # fmt: skip
    ax.legend(handles=handles, fontsize=6.5, loc="upper left", bbox_to_anchor=(0.0, -0.12),
              ncol=2, frameon=False)  # fmt: skip
    ratio = (sim / pub).to_numpy()
    order = np.argsort(ratio)
    x = np.arange(len(order))
    bx.axhspan(1 - goal, 1 + goal, color="#dddddd", zorder=0)
    bx.axhline(1.0, color="#777777", lw=1)
    bx.bar(x, ratio[order] - 1, bottom=1,
           color=[colours[t] for t in rows["table"].to_numpy()[order]])  # fmt: skip
    bx.set_yscale("log")
    ticks = [t for t in (0.25, 0.33, 0.5, 0.67, 0.8, 1, 1.25, 1.5, 2, 3, 4, 6)
             if len(ratio) and ratio.min() / 1.2 <= t <= ratio.max() * 1.2]  # fmt: skip
    bx.set_yticks(ticks, [f"{t:g}" for t in ticks])
    bx.yaxis.set_minor_formatter(NullFormatter())
    bx.set_xticks(x, rows["id"].to_numpy()[order], rotation=90, fontsize=5.5)
    bx.set_ylabel("simulated / published")
    bx.set_xlim(-0.6, len(order) - 0.4)
    within = float(np.mean(np.abs(ratio - 1) <= goal)) if len(ratio) else float("nan")
    median = float(np.median(np.abs(ratio - 1))) if len(ratio) else float("nan")
    fig.suptitle(f"Simulator against published step times: {len(ratio)} rows, median "
                 f"|sim/pub - 1| {median:.1%}, {within:.0%} within {goal:.0%}",
                 fontsize=11)  # fmt: skip
    return fig
