"""Arguments shared by every command that takes a config or writes a run directory."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from laminar.config import LaminarConfig, load_config


def int_in(low: int, high: int):
    """An argparse ``type``: a whole number in ``low..high`` (argparse's own error, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a whole number, got {text[:40]!r}"
            ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low:,}..{high:,}")
        return value

    parse.__name__ = "integer"
    return parse


def float_in(low: float, high: float):
    """An argparse ``type``: a finite number in ``low..high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
        if not low <= value <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{text[:40]} is outside {low:g}..{high:g}")
        return value

    parse.__name__ = "number"
    return parse


def add_config_args(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """CONFIG (or ``--config CONFIG`` when the positional slot is taken), --preset NAME,
    --set KEY=VALUE (repeatable), --seed N."""
    help_ = "config file (.yaml, .yml or .toml)"
    if positional:
        parser.add_argument("config", nargs="?", help=help_)
    else:
        parser.add_argument("--config", help=help_)
    parser.add_argument(
        "--preset", help="start from a shipped preset (see `laminar config presets`)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one field, e.g. --set cluster.gpus=64 (repeatable)",
    )
    parser.add_argument(
        "--seed", type=int_in(0, 2**32 - 1), help="shorthand for --set seed=N (0..2^32-1)"
    )


def config_from_args(args: argparse.Namespace, extra: list[str] | None = None) -> LaminarConfig:
    """The validated config the arguments describe; ``extra`` overrides are applied last."""
    overrides = list(args.overrides)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    overrides += extra or []
    return load_config(args.config, preset=args.preset, overrides=overrides)


def add_out_args(parser: argparse.ArgumentParser, default: str) -> None:
    """``--out DIR`` and ``--force`` with the rules of :mod:`laminar.rundir` (new commands that
    write a run directory call this, then :func:`out_target` before any work)."""
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"run directory to write (default: {default}); a previous Laminar run directory "
        "there is replaced, any other existing file or non-empty directory is refused",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write --out even where it is refused: into a directory that holds other files "
        "(those are kept; files of the same name are replaced), or over a file",
    )


def out_target(args: argparse.Namespace, default_prefix: str, cfg: LaminarConfig | None = None):
    """The checked :class:`~laminar.rundir.OutputTarget` of ``--out`` (default
    ``runs/<prefix>-<time>``); raises ``OutputError`` (exit 2) at once when it cannot be used,
    or when it is, holds or lies inside a file the command reads (the config file and the
    files ``cfg`` names: :func:`config_inputs`). Write into it with ``with
    laminar.rundir.staged_output(target) as stage: ...``."""
    from laminar.rundir import prepare_out

    out = args.out or f"runs/{default_prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    inputs = config_inputs(getattr(args, "config", None), cfg)
    return prepare_out(Path(out), force=args.force, command=args.command, inputs=inputs)


def config_inputs(config_path: str | None, cfg: LaminarConfig | None) -> list[str]:
    """Every file or directory a run of ``cfg`` reads: its config file, cost file, model
    (``hf_config``, a pretrained directory), trace and task file."""
    paths = [config_path or ""]
    if cfg is not None:
        paths += [cfg.sim.cost_file, cfg.model.hf_config]
        paths.append(getattr(cfg.workload.source, "path", ""))
        paths.append(getattr(cfg.runtime.model, "path", ""))
        paths.append(getattr(cfg.runtime.task, "path", ""))
    return [p for p in paths if p]
