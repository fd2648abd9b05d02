"""A handled Ctrl-C ends ``python -m laminar`` with status 130, even when the interrupt landed
inside ``exec`` of a string (CPython 3.11 then keeps a stale "unhandled interrupt" flag that
makes ``-m`` runs kill themselves with SIGINT after exiting)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MAIN = """
import sys
from laminar.cli import _forget_handled_interrupt
try:
    exec("raise KeyboardInterrupt")  # as when Ctrl-C lands while dataclasses builds a class
except KeyboardInterrupt:
    pass
if sys.argv[1] == "forget":
    _forget_handled_interrupt()
sys.exit(130)
"""


@pytest.mark.parametrize("forget, status", [("keep", -2), ("forget", 130)])
def test_a_handled_interrupt_exits_130_under_python_m(tmp_path, forget, status):
    pkg = tmp_path / "interrupted_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(MAIN)
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_pkg", forget], cwd=tmp_path, timeout=60
    )
    if forget == "keep" and done.returncode == 130:
        pytest.skip("this Python does not keep the stale flag: nothing to clear")
    assert done.returncode == status


def test_a_stop_signal_wrapped_by_ray_is_still_a_stop():
    """SIGTERM landing in Ray's C code comes back as ``SystemError`` raised from our
    ``Terminated``: still a clean stop (exit 143), not a crash (exit 1)."""
    from laminar.cli.train_cmd import Terminated, _stop_signal

    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as e:
                raise SystemError("returned a result with an exception set") from e
        except SystemError as outer:
            return outer

    assert isinstance(_stop_signal(wrapped(Terminated())), Terminated)
    assert isinstance(_stop_signal(wrapped(KeyboardInterrupt())), KeyboardInterrupt)
    assert _stop_signal(wrapped(ValueError("a real error"))) is None
