"""Errors a user can act on. The CLI prints them without a traceback and exits with code 2."""

from __future__ import annotations


class LaminarError(Exception):
    """Base class for errors caused by user input (config, trace file, CLI argument)."""

    exit_code = 2


class OutputError(LaminarError):
    """``--out`` cannot be written as asked; the message names the path and what to do."""


class LaminarWarning(UserWarning):
    """Input that works but probably not as meant; the CLI prints ``laminar: warning: ...``."""


class ConfigError(LaminarError):
    """A config file or ``--set`` override is invalid; the message names the source and key path."""

    def __init__(self, source: str, key_path: str, message: str):
        self.source = source
        self.key_path = key_path
        self.detail = message
        where = f"{source}: {key_path}" if key_path else source
        self.message = f"{where}: {message}"
        # args are the constructor's, so type(e)(*e.args) rebuilds the error: SimPy re-raises a
        # failed process's error so, and pickling (a Ray worker's error) does too
        super().__init__(source, key_path, message)

    def __str__(self) -> str:
        return self.message


class TraceError(LaminarError):
    """A trace file is invalid; the message names the file, and the row and column where known."""

    def __init__(self, path: str, message: str, row: int | None = None, column: str | None = None):
        self.path = path
        self.row = row
        self.column = column
        self.detail = message
        parts = [str(path)]
        if row is not None:
            parts.append(f"row {row}")
        if column is not None:
            parts.append(f"column '{column}'")
        self.message = f"{', '.join(parts)}: {message}"
        super().__init__(path, message, row, column)  # rebuildable, as ConfigError's

    def __str__(self) -> str:
        return self.message
