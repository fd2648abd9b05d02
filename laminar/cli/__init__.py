"""The ``laminar`` command line.

Each subcommand lives in its own module under ``laminar.cli`` with a ``register(subparsers)``
function; heavy imports (simpy, ray, torch) happen inside the handlers, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence

from laminar import __version__
from laminar.errors import LaminarError, LaminarWarning

MAX_MESSAGE_CHARS = 2000
"""Longest error message printed (input echoed in messages can be anything)."""

# Modules that add subcommands, in the order --help lists them.
SUBCOMMAND_MODULES = (
    "laminar.cli.config_cmd",
    "laminar.cli.trace_cmd",
    "laminar.cli.simulate_cmd",
    "laminar.cli.replay_cmd",
    "laminar.cli.plan_cmd",
    "laminar.cli.plot_cmd",
    "laminar.cli.train_cmd",
    "laminar.cli.calibrate_cmd",
    "laminar.cli.bench_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="laminar",
        description="Laminar: asynchronous RL post-training at cluster scale. Simulate a cluster "
        "before launch, replay traces, train for real with the same policies.",
    )
    parser.add_argument("--version", action="version", version=f"laminar {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    _SHOWN.clear()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except LaminarError as e:
        print(f"laminar: error: {_bounded(str(e))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("laminar: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error. Point stdout at devnull so
        # the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as e:
        # Not the input's fault (a full disk, a file vanishing): name the path, no traceback.
        where = f"{e.filename}: " if e.filename else ""
        print(f"laminar: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    finally:
        _forget_handled_interrupt()


def _forget_handled_interrupt() -> None:
    """Every KeyboardInterrupt that reached here was handled (exit 130). CPython 3.11 also
    records one raised inside ``exec`` of a string (e.g. ``dataclasses`` building a class when
    Ctrl-C lands) in a process-wide flag, and under ``python -m`` that stale flag makes the
    interpreter kill itself with SIGINT after exiting instead of returning our exit status.
    Clear it; a KeyboardInterrupt escaping later sets it again."""
    import contextlib
    import ctypes

    # other versions and builds have no such flag: nothing to do
    with contextlib.suppress(AttributeError, ValueError, OSError):
        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    more = len(message) - MAX_MESSAGE_CHARS
    return f"{message[:MAX_MESSAGE_CHARS]} ... ({more:,} more characters)"


_SHOWN: set[str] = set()
"""Laminar warnings printed by the command running now: each once (a plan sizes its model
at every point it simulates, and said the same thing once per point)."""


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``laminar: warning: ...`` for Laminar's warnings, each text once a command; others as
    Python shows them."""
    if issubclass(category, LaminarWarning):
        text = _bounded(str(message))
        if text not in _SHOWN:
            _SHOWN.add(text)
            print(f"laminar: warning: {text}", file=sys.stderr)
    else:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        (file or sys.stderr).write(text)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
