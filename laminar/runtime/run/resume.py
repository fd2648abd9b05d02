"""The live run directory of ``laminar train`` and resuming a run from it.

The directory grows as the run goes, so a crash, SIGTERM or Ctrl-C of the driver keeps
everything up to the last step: ``config.yaml`` at the start, ``steps.csv`` and ``faults.json``
after every step, and every ``runtime.checkpoint_every`` steps a checkpoint under
``checkpoints/step-NNNNNN/``: the trainer's state (``trainer``), the pools' state
(``pools.pkl``: prompts handed out, partial responses, finished experience consumed or not) and
``meta.json`` (step, version, run clock, events so far). A checkpoint directory appears whole
(written hidden, then renamed) and ``checkpoints/LATEST`` names the newest one.

``laminar train --resume RUN_DIR`` reads the newest checkpoint back (:func:`load_resume`):
steps after it are dropped and redone, the trainer continues from its state, in-progress
trajectories of the checkpoint's version continue from their partial tokens and older ones
restart from the prompt (recorded), and finished experience not yet consumed is consumed next.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from laminar.config import LaminarConfig, write_resolved
from laminar.errors import LaminarError
from laminar.runtime.data.manager import as_ran

KEEP_CHECKPOINTS = 2


@dataclass
class ResumeState:
    """What a resumed run starts from (read by :func:`load_resume`)."""

    step: int
    """The last step the checkpoint includes; the run goes on with ``step + 1``."""
    trainer_checkpoint: str
    pools: dict
    meta: dict
    steps: list[dict] = field(default_factory=list)


class RunLog:
    """Writes the run directory while the run goes (:meth:`create` or :meth:`reopen`)."""

    def __init__(self, out: Path, cfg: LaminarConfig, keep: set[str]):
        self.out = out
        self.keep = keep  # entries that were there and are not ours (a --force merge)
        self.ckpt_root = self.out / "checkpoints"
        self.ckpt_root.mkdir(exist_ok=True)
        write_resolved(as_ran(cfg), self.out)  # the bound repack runs with
        self.mark()

    @classmethod
    def create(cls, target: Any, cfg: LaminarConfig) -> RunLog:
        """A fresh run into ``target`` (``laminar.rundir.prepare_out``'s verdict): a previous
        Laminar run there is removed, a foreign directory (``--force``) keeps its files."""
        out = Path(target.path)
        if target.mode == "replace":
            old = out.parent / f".{out.name}.old-{os.getpid()}-{time.monotonic_ns()}"
            out.rename(old)
            _remove(old)
        for name in getattr(target, "old_entries", ()):  # a previous run's, in a merge
            _remove(out / name)
        out.mkdir(parents=True, exist_ok=True)
        keep = {p.name for p in out.iterdir()}
        return cls(out, cfg, keep)

    @classmethod
    def reopen(cls, run_dir: str | Path, cfg: LaminarConfig) -> RunLog:
        """The directory of an interrupted run, to go on writing (``--resume``)."""
        from laminar.rundir import MARKER

        out = Path(run_dir)
        try:
            ours = set(json.loads((out / MARKER).read_text()).get("entries", []))
        except (OSError, ValueError, AttributeError):
            ours = set()
        keep = {p.name for p in out.iterdir()} - ours - {MARKER}
        return cls(out, cfg, keep)

    def mark(self) -> None:
        """The marker of a Laminar run directory (``laminar.rundir``), listing what this run
        wrote so far: a crashed run's directory is recognised, replaced or resumed."""
        from laminar import __version__
        from laminar.rundir import MARKER

        entries = sorted(p.name for p in self.out.iterdir() if p.name not in self.keep)
        marker = {
            "laminar": __version__,
            "command": "train",
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "entries": [e for e in entries if e != MARKER and not e.startswith(".")],
        }
        text = json.dumps(marker, indent=1) + "\n"
        _atomic(self.out / MARKER, lambda p: p.write_text(text))

    def write_steps(self, rows: list[dict]) -> None:
        _atomic(self.out / "steps.csv", lambda p: pd.DataFrame(rows).to_csv(p, index=False))
        self.mark()

    def write_faults(self, faults: list[dict]) -> None:
        text = json.dumps(faults, indent=2, default=str) + "\n"
        _atomic(self.out / "faults.json", lambda p: p.write_text(text))

    def checkpoint(self, a: Any, step: int, meta: dict) -> Path:
        """Trainer state, pools' state and ``meta`` after ``step``, as one directory."""
        import ray

        final = self.ckpt_root / f"step-{step:06d}"
        tmp = self.ckpt_root / f".step-{step:06d}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        version_ref = a.trainer.save_checkpoint.remote(str(tmp / "trainer"))
        pools = read_pools(a)
        ray.get(version_ref)
        (tmp / "pools.pkl").write_bytes(pickle.dumps(pools))
        (tmp / "meta.json").write_text(json.dumps({**meta, "step": step}, default=str) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _atomic(self.ckpt_root / "LATEST", lambda p: p.write_text(final.name + "\n"))
        for old in sorted(self.ckpt_root.glob("step-*"))[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_trainer_checkpoint(self) -> str | None:
        d = latest_checkpoint(self.out)
        return str(d / "trainer") if d is not None else None


def read_pools(a: Any) -> dict:
    """The pools' state, read in an order that never loses a trajectory: the partial pool
    before the buffer (a trajectory moves from the first to the second, never back), the
    prompt pool last (a group it handed out that neither holds yet is restarted on resume)."""
    import ray

    partial = ray.get(a.partial.pending.remote())
    buffer = ray.get(a.buffer.state.remote())
    prompts = ray.get(a.prompts.state.remote())
    return {"partial": partial, "buffer": buffer, "prompts": prompts}


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    root = Path(run_dir) / "checkpoints"
    try:
        name = (root / "LATEST").read_text().strip()
    except OSError:
        return None
    d = root / name
    return d if d.is_dir() else None


def load_resume(run_dir: str | Path) -> tuple[LaminarConfig, ResumeState]:
    """The config and newest checkpoint of a run directory; a clear error if there is none."""
    from laminar.config import load_config

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise LaminarError(f"{run_dir}: not a laminar train run directory (no config.yaml)")
    cfg = load_config(run_dir / "config.yaml")
    d = latest_checkpoint(run_dir)
    if d is None:
        raise LaminarError(
            f"{run_dir}: no checkpoint to resume from (checkpoints/LATEST missing; the run "
            "stopped before its first checkpoint, or runtime.checkpoint_every is 0)"
        )
    meta = json.loads((d / "meta.json").read_text())
    pools = pickle.loads((d / "pools.pkl").read_bytes())
    step = int(meta["step"])
    rows: list[dict] = []
    if (run_dir / "steps.csv").is_file() and (run_dir / "steps.csv").stat().st_size:
        frame = pd.read_csv(run_dir / "steps.csv")
        rows = [r for r in frame.to_dict("records") if int(r["step"]) <= step]
    return cfg, ResumeState(step, str(d / "trainer"), pools, meta, rows)


def orphans_to_resume(state: ResumeState, group_of: Any, n: int, max_tokens: int) -> list:
    """In-progress trajectories to place on the rollouts of a resumed run.

    The partial pool's trajectories not already finished, plus a fresh trajectory (version -1:
    no rollout has it, so it restarts from the prompt) for every issued sample neither pool
    held. ``group_of(prompt_id)`` gives an issued prompt's group."""
    from laminar.runtime.records import traj_id

    finished = {r["traj"].traj_id for r in state.pools["buffer"]["rows"]}
    pending = [t for t in state.pools["partial"] if t.traj_id not in finished]
    held = finished | {t.traj_id for t in pending}
    missing = []
    for pid in range(int(state.pools["prompts"]["issued"])):
        lost = [i for i in range(n) if traj_id(pid, i) not in held]
        if lost:
            fresh = group_of(pid).trajectories(-1, max_tokens, time.time())
            missing += [fresh[i] for i in lost]
    return pending + missing


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _atomic(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
