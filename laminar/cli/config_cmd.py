"""``laminar config``: inspect and validate configs."""

from __future__ import annotations

import argparse

from laminar.cli.common import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show, validate and list configs")
    cmds = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = cmds.add_parser("show", help="print the fully resolved config (validates it)")
    add_config_args(show)
    show.set_defaults(func=_show)
    presets = cmds.add_parser("presets", help="list the shipped presets")
    presets.set_defaults(func=_presets)


def _show(args: argparse.Namespace) -> int:
    from laminar.config import dump_config

    print(dump_config(config_from_args(args)), end="")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from laminar.config import list_presets

    for name in list_presets():
        print(name)
    return 0
