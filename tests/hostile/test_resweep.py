"""Regressions from the hostile re-sweep of issue 32 (benchmarks/hostile_sweep.py).

Each test is a case the sweep found ending in a traceback, a hang, a loss of data or a
nonsense input accepted, reduced to its boundary: exit 2 and one line naming what is wrong.
"""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from laminar.cli import main
from tests.hostile.rundirs import tree


def _refused(capsys, args: list[str], *words: str) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("laminar: error: ") and err.count("\n") == 1, err
    for w in words:
        assert w in err, err
    return err


def _special(path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--out", "node", "--force"],
        ["trace", "synth", "dapo-math", "--steps", "1", "-o", "node"],
        ["trace", "show", "t.csv", "--plot", "node"],
    ],
)
def test_an_output_never_replaces_a_device_or_fifo(tmp_path, monkeypatch, capsys, kind, args):
    """`simulate --out /dev/null --force` replaced /dev/null with a run directory (found by the
    re-sweep, as root); `-o /dev/null` would have made it a regular file."""
    monkeypatch.chdir(tmp_path)
    _special(tmp_path / "node", kind)
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "..", "traces",
                             "dapo-math-small.csv"), tmp_path / "t.csv")  # fmt: skip
    before = tree(tmp_path)
    _refused(capsys, args, "node", "never replaces")
    assert tree(tmp_path) == before
    mode = os.lstat(tmp_path / "node").st_mode
    assert stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)
