"""What every figure of :mod:`laminar.plotting` shares: colours, figure creation, saving, and
reading a run directory's files with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from laminar.errors import LaminarError
from laminar.rundir import staged_file

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


class RunDirError(LaminarError):
    """A directory is not a readable run directory; the message names the directory or file."""


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


def _unreadable(path: Path, e: Exception) -> RunDirError:
    return RunDirError(f"{path}: unreadable ({type(e).__name__}: {e})")


def _require(frame: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise RunDirError(f"{path}: missing column(s) {', '.join(missing)}")
    return frame


def read_csv(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """``path`` as a table with at least ``columns``; an empty file is an empty table (the
    runtime writes one when there is nothing to record)."""
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame(columns=list(columns))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise _unreadable(path, e) from None
    if frame.empty:  # header only, e.g. ``kind`` when there were no events
        return frame.reindex(columns=[*frame.columns, *(c for c in columns if c not in frame)])
    return _require(frame, path, columns)


def read_parquet(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """``path`` (Parquet) as a table with at least ``columns``."""
    import pyarrow as pa

    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise _unreadable(path, e) from None
    return _require(frame, path, columns)


def read_json(path: Path) -> dict:
    """``path`` as a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise _unreadable(path, e) from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def read_yaml(path: Path) -> dict:
    """``path`` as a YAML mapping (``{}`` when the file is absent)."""
    import yaml

    from laminar.config.loader import load_yaml
    from laminar.errors import ConfigError

    if not path.exists():
        return {}
    try:
        data = load_yaml(path.read_text(), str(path))  # no alias bombs from a damaged file
    except ConfigError as e:
        raise RunDirError(str(e)) from None
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise _unreadable(path, e) from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a YAML mapping, found {type(data).__name__}")
    return data
