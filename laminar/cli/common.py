"""Arguments shared by every command that takes a config."""

from __future__ import annotations

import argparse

from laminar.config import LaminarConfig, load_config


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
    parser.add_argument("--seed", type=int, help="shorthand for --set seed=N")


def config_from_args(args: argparse.Namespace, extra: list[str] | None = None) -> LaminarConfig:
    """The validated config the arguments describe; ``extra`` overrides are applied last."""
    overrides = list(args.overrides)
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    overrides += extra or []
    return load_config(args.config, preset=args.preset, overrides=overrides)
