"""What every figure of :mod:`laminar.plotting` shares: colours, figure creation, saving, and
reading a run directory's files with errors that name the file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from laminar.rundir import staged_file
from laminar.runfiles import tables
from laminar.runfiles.tables import RunDirError

__all__ = ["COLORS", "SPARE_COLORS", "RunDirError", "color", "new_figure", "read_csv",
           "save_figure"]  # fmt: skip

# One colour per system, the same in every figure (matplotlib's tab10 order). ``sync`` is
# `laminar train --mode sync`, the verl-like baseline, hence verl's colour.
COLORS = {
    "laminar": "#1f77b4",
    "verl": "#d62728",
    "sync": "#d62728",
    "one-step": "#ff7f0e",
    "stream": "#2ca02c",
    "partial": "#9467bd",
}

# For runs whose system is shared or unknown: tab10 without the colours above.
SPARE_COLORS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def color(system: str) -> str:
    """The colour of ``system`` (grey for systems outside :data:`COLORS`)."""
    return COLORS.get(system, "#7f7f7f")


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 4.2):
    """A constrained-layout figure with a ``nrows`` x ``ncols`` array of axes, no pyplot state
    (a notebook displays it, the CLI saves it)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix), atomically."""
    path = Path(path)
    with staged_file(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    return path


# Reading ---------------------------------------------------------------------------------------


def read_csv(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """``path`` as a table with at least ``columns``, read with bounds
    (``laminar.runfiles.tables``); an empty file is an empty table. The files of run
    directories have checked readers of their own (``laminar.runfiles``)."""
    return tables.read_csv(path, {c: tables.Text() for c in columns}, kind="table")
