"""Run directories for the hostile tests, in a second or two, and a fingerprint of a tree.

- :func:`train_run`: a ``laminar train`` run directory from the real writer on the real
  runtime with fake engines (``tests/train_rundir.py``), marked as ``laminar train`` marks it,
  with a checkpoint of the run's real pools state (``--resume`` reads it);
- :func:`calibration_run`: a run directory whose ``profile/`` follows known coefficients
  (``tests/calibrate/test_calibrate_cli.py``), which ``laminar calibrate`` fits;
- :func:`tree`: every path under a directory with its bytes (or link target), to compare
  before and after a command that must change nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from laminar.rundir import MARKER
from laminar.runtime.run.ckptfiles import write_pools
from tests.calibrate.test_calibrate_cli import make_run
from tests.runtime import harness
from tests.train_rundir import run as run_system
from tests.train_rundir import write_train_run

CHECKPOINT_STEP = 2


def tree(root: Path) -> dict[str, object]:
    """Every path under ``root`` (hidden ones too): a file's bytes, a link's target, a
    directory's mode."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            key = str(p.relative_to(root))
            if p.is_symlink():
                out[key] = ("link", os.readlink(p))
            elif p.is_file():
                out[key] = p.read_bytes()
            else:
                out[key] = ("dir", p.stat().st_mode)
    return out


def real_pools(tmp_path: Path, steps: int = 3) -> dict:
    """The pools' state after ``steps`` steps of the runtime with fake engines (what a
    checkpoint holds: in-progress trajectories, finished ones consumed or not, prompts)."""
    s = harness.build(tmp_path / ".pools-system", n=4, prompts_per_step=3, max_batch=12)

    async def go() -> dict:
        await run_system(s, "laminar", steps, -1)
        buffer = await s.buffer.state()
        return {"partial": s.partial.pending(), "buffer": buffer, "prompts": s.prompts.state()}

    return asyncio.run(go())


def add_checkpoint(run_dir: Path, pools: dict, step: int = CHECKPOINT_STEP) -> Path:
    """A checkpoint of ``pools`` after ``step``, as ``RunLog.checkpoint`` writes it (the
    trainer's state is a placeholder: nothing here loads it)."""
    d = run_dir / "checkpoints" / f"step-{step:06d}"
    (d / "trainer").mkdir(parents=True)
    digest = write_pools(d, pools)
    meta = {"elapsed_s": 12.5, "wall_s": 10.0, "faults": [], "events": [], "rollouts": ["r0"],
            "step": step, "pools_sha256": digest}  # fmt: skip
    (d / "meta.json").write_text(json.dumps(meta) + "\n")
    (run_dir / "checkpoints" / "LATEST").write_text(d.name + "\n")
    return d


def train_run(tmp_path: Path, name: str = "train", *, steps: int = 5) -> Path:
    """A resumable ``laminar train`` run directory ``tmp_path/name`` (module docstring)."""
    run = write_train_run(tmp_path, name, steps=steps)
    add_checkpoint(run, real_pools(tmp_path))
    marker = json.loads((run / MARKER).read_text())
    marker.update(command="train", entries=sorted([*marker["entries"], "checkpoints"]))
    (run / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return run


def calibration_run(tmp_path: Path, name: str = "cal") -> Path:
    """A run directory ``laminar calibrate`` fits (its profile follows known coefficients),
    with the cores' CPU rows every run now records (``profile/core_cpu.csv``)."""
    run = make_run(tmp_path / name, seed=1)
    rows = ["at_s,core,what,cpu_s"]
    for i in range(1, 9):
        at = 0.25 * i
        rows += [f"{at},0,busy,0.25", f"{at},0,pinned,0.2", f"{at},0,engine,0.15",
                 f"{at},1,busy,0.25", f"{at},1,pinned,0.24", f"{at},1,engine,0.2",
                 f"{at},-1,unpinned,0.03"]  # fmt: skip
    (run / "profile" / "core_cpu.csv").write_text("\n".join(rows) + "\n")
    return run
