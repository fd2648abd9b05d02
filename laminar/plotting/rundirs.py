"""``laminar plot RUN_DIR [RUN_DIR ...]``: tell simulated from trained run directories, read them
all, then draw every figure, written all together or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from laminar.plotting.common import RunDirError
from laminar.plotting.sim import SIM_FILES, load_run, sim_figures
from laminar.plotting.train import TRAIN_FILES, load_train_run, train_figures
from laminar.rundir import run_output

# What each kind of run directory must hold (written by laminar/sim/api.py and
# laminar/runtime/run/outputs.py); the first file tells the kinds apart.
KIND_FILES = {"train": tuple(TRAIN_FILES), "sim": tuple(SIM_FILES)}
KIND_NAMES = {"train": "`laminar train`", "sim": "`laminar simulate` / `laminar replay`"}


def run_kind(run_dir: str | Path) -> str:
    """``train`` or ``sim``; :class:`RunDirError` naming the directory and the missing files
    when it is neither."""
    p = Path(run_dir)
    if not p.is_dir():
        what = "a file" if p.exists() else "no such directory"
        raise RunDirError(f"{p}: not a run directory ({what})")
    missing = {k: [f for f in files if not (p / f).is_file()] for k, files in KIND_FILES.items()}
    for kind, files in KIND_FILES.items():
        if (p / files[0]).is_file():
            if missing[kind]:
                raise RunDirError(
                    f"{p}: not a complete {KIND_NAMES[kind]} run directory "
                    f"(missing {', '.join(missing[kind])})"
                )
            return kind
    wanted = "; ".join(f"for a {KIND_NAMES[k]} run: {', '.join(m)}" for k, m in missing.items())
    raise RunDirError(f"{p}: not a run directory; missing {wanted}")


def _names(paths: Sequence[Path]) -> list[str]:
    """A subdirectory name per run directory: its name, numbered where names repeat."""
    names = [p.resolve().name or "run" for p in paths]
    return [n if names.count(n) == 1 else f"{n}-{i + 1}" for i, n in enumerate(names)]


def plot_runs(
    run_dirs: Sequence[str | Path], out_dir: str | Path | None = None, *, force: bool = False
) -> list[Path]:
    """Every figure of the run directories as PNG files in ``out_dir``; return their paths.

    ``out_dir`` follows the rules of :mod:`laminar.rundir` (a new directory, or a previous
    plot directory replaced; another directory or a file only with ``force``).

    One directory: its figures (default ``out_dir``: ``RUN_DIR/plots``). Several training runs:
    one figure per metric with every run in it. Several simulated runs (each may hold several
    systems already): each run's figures in ``out_dir/<directory name>/``. Every directory is
    read before anything is drawn, and the PNGs appear together or not at all.
    """
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise RunDirError("no run directory given")
    kinds = [run_kind(p) for p in paths]
    if len(set(kinds)) > 1:
        listing = ", ".join(f"{p} ({k})" for p, k in zip(paths, kinds, strict=True))
        raise RunDirError(f"simulated and trained runs are plotted separately: {listing}")
    if out_dir is None:
        if len(paths) > 1:
            raise RunDirError("several run directories need an output directory (--out DIR)")
        out_dir = paths[0] / "plots"
    out = Path(out_dir)
    with run_output(out, force=force, command="plot", inputs=paths) as stage:
        if kinds[0] == "train":
            written = train_figures([load_train_run(p) for p in paths], stage)
        else:
            written = _sim_figures(paths, stage)
    return [out / p.relative_to(stage) for p in written]


def _sim_figures(paths: list[Path], stage: Path) -> list[Path]:
    sims = [load_run(p) for p in paths]  # all read before any is drawn
    if len(sims) == 1:
        return sim_figures(sims[0], stage)
    return [p for run, sub in zip(sims, _names(paths), strict=True)
            for p in sim_figures(run, _mkdir(stage / sub))]  # fmt: skip


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
