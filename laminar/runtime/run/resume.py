"""The live run directory of ``laminar train`` and resuming a run from it.

The directory grows as the run goes, so a crash, SIGTERM or Ctrl-C of the driver keeps
everything up to the last step: ``config.yaml`` at the start, ``steps.csv`` and ``faults.json``
after every step, and every ``runtime.checkpoint_every`` steps a checkpoint under
``checkpoints/step-NNNNNN/``: the trainer's state (``trainer``, or under ``runtime.storage``:
``meta.json`` names it, ``laminar.runtime.run.storage``), the pools' state
(``pools.json``: prompts handed out, partial responses, finished experience consumed or not) and
``meta.json`` (step, version, run clock, events so far, the pools' SHA-256). A checkpoint
directory appears whole (written hidden, then renamed) and ``checkpoints/LATEST`` names the
newest one (``laminar.runtime.run.ckptfiles`` writes and reads these files); the newest
``runtime.keep_checkpoints`` are kept.

``laminar train --resume RUN_DIR`` reads the newest checkpoint back (:func:`load_resume`):
steps after it are dropped and redone, the trainer continues from its state, in-progress
trajectories of the checkpoint's version continue from their partial tokens and older ones
restart from the prompt (recorded), and finished experience not yet consumed is consumed next.
A resume that fails before its first step leaves the directory's files as they were (its
``config.yaml``, with the new ``--set``, is written with that step), and so does a fresh run
that replaces a previous one (:class:`RunLog`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from laminar.config import LaminarConfig, dump_config
from laminar.errors import LaminarError
from laminar.runfiles.tables import RunDirError
from laminar.runfiles.train import STEPS_NEED, read_steps
from laminar.runtime.data.manager import as_ran
from laminar.runtime.run import ckptfiles
from laminar.runtime.run.ckptfiles import latest_checkpoint, read_meta, trainer_state, write_pools
from laminar.runtime.run.previous import Previous
from laminar.runtime.run.storage import Storage, prune_steps
from laminar.staging import MARKER, marker_entries


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
    """Writes the run directory while the run goes (:meth:`create` or :meth:`reopen`).

    Until the run's first step is done nothing it replaces is lost: a fresh run holds the
    previous run of ``--out`` aside (:class:`~laminar.runtime.run.previous.Previous`), a
    resumed one leaves ``config.yaml`` and the marker as they were (:meth:`started`), so a
    failed start gives the directory back as it was (:meth:`give_back`)."""

    def __init__(
        self, out: Path, cfg: LaminarConfig, keep: set[str], *, previous: Previous | None = None
    ):
        self.out = out
        self.cfg = cfg
        self.keep = keep  # entries that were there and are not ours (a --force merge)
        self.previous = previous
        self.ckpt_root = self.out / "checkpoints"
        self.storage = Storage("local")  # the run's (``driver.train`` sets it once Ray is up)
        self.pending = previous is None  # a resumed run: config and marker wait (started)
        if not self.pending:
            self.ckpt_root.mkdir(exist_ok=True)
            self._write_config()
            self.mark()

    @classmethod
    def create(cls, target: Any, cfg: LaminarConfig) -> RunLog:
        """A fresh run into ``target`` (``laminar.rundir.prepare_out``'s verdict): a previous
        Laminar run there is set aside until this one's first step (then removed), a foreign
        directory (``--force``) keeps its files."""
        previous = Previous.set_aside(target)
        return cls(previous.out, cfg, set(previous.keep), previous=previous)

    @classmethod
    def reopen(cls, run_dir: str | Path, cfg: LaminarConfig) -> RunLog:
        """The directory of an interrupted run, to go on writing (``--resume``); nothing in it
        changes until the resumed run has done a step (:meth:`started`)."""
        out = Path(run_dir)
        ours = set(marker_entries(out))
        keep = {p.name for p in out.iterdir()} - ours - {MARKER}
        return cls(out, cfg, keep)

    def started(self) -> None:
        """The run has done a step: the run it replaces goes, a resumed run's config (with its
        ``--set`` and ``--steps``) and marker are written."""
        if self.previous is not None:
            self.previous.drop()
        if self.pending:
            self.pending = False
            self._write_config()
            self.mark()

    def give_back(self) -> bool:
        """The run failed before its first step: the previous run of ``--out`` is put back as
        it was (True), or there was none (False)."""
        return self.previous is not None and self.previous.give_back()

    def _write_config(self) -> None:
        text = dump_config(as_ran(self.cfg))  # the bound repack runs with
        _atomic(self.out / "config.yaml", lambda p: p.write_text(text))

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
        self.started()
        _atomic(self.out / "steps.csv", lambda p: pd.DataFrame(rows).to_csv(p, index=False))
        self.mark()

    def write_faults(self, faults: list[dict]) -> None:
        if self.pending:  # a resumed run's faults so far are written with its first step
            return
        text = json.dumps(faults, indent=2, default=str) + "\n"
        _atomic(self.out / "faults.json", lambda p: p.write_text(text))

    def checkpoint(self, a: Any, step: int, meta: dict) -> Path:
        """Trainer state, pools' state and ``meta`` after ``step``, as one directory."""
        import ray

        final = self.ckpt_root / f"step-{step:06d}"
        tmp = self.ckpt_root / f".step-{step:06d}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        target = self.storage.trainer_target(step, tmp)
        version_ref = a.trainer.save_checkpoint.remote(target)
        pools = read_pools(a)
        ray.get(version_ref)
        where = self.storage.collect(a.trainer, target, tmp)
        digest = write_pools(tmp, pools)
        meta = {**meta, **where, "step": step, "pools_sha256": digest}
        (tmp / "meta.json").write_text(json.dumps(meta, default=str) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        _atomic(self.ckpt_root / "LATEST", lambda p: p.write_text(final.name + "\n"))
        prune_steps(self.ckpt_root, self.cfg.runtime.keep_checkpoints)
        self.storage.prune([p.name for p in self.ckpt_root.glob("step-*")])
        return final

    def latest_trainer_checkpoint(self) -> str | None:
        try:
            d = latest_checkpoint(self.out)
            return trainer_state(d, read_meta(d)) if d is not None else None
        except LaminarError:  # a LATEST that names nothing: no checkpoint to restart from
            return None


def read_pools(a: Any) -> dict:
    """The pools' state, read in an order that never loses a trajectory: the partial pool
    before the buffer (a trajectory moves from the first to the second, never back), the
    prompt pool last (a group it handed out that neither holds yet is restarted on resume)."""
    import ray

    partial = ray.get(a.partial.pending.remote())
    buffer = ray.get(a.buffer.state.remote())
    prompts = ray.get(a.prompts.state.remote())
    return {"partial": partial, "buffer": buffer, "prompts": prompts}


def load_resume(run_dir: str | Path) -> tuple[LaminarConfig, ResumeState]:
    """The config and newest checkpoint of a run directory, every file through its checked
    reader (``laminar.runfiles``, :mod:`laminar.runtime.run.ckptfiles`); a clear error if
    there is none or one is damaged."""
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
    meta = read_meta(d)
    pools = ckptfiles.read_pools(d, meta)
    step = int(meta["step"])
    frame = read_steps(run_dir, need=(*STEPS_NEED, "wait_s"))
    rows = [] if frame is None else [r for r in frame.to_dict("records") if r["step"] <= step]
    if len(rows) != step + 1:
        raise RunDirError(f"{run_dir / 'steps.csv'}: holds {len(rows)} of the {step + 1} steps "
                          f"up to the checkpoint's (step {step})")  # fmt: skip
    return cfg, ResumeState(step, trainer_state(d, meta), pools, meta, rows)


def orphans_to_resume(state: ResumeState, group_of: Any, n: int, max_tokens: int) -> list:
    """In-progress trajectories to place on the rollouts of a resumed run.

    The partial pool's trajectories not already finished, plus a fresh trajectory (version -1:
    no rollout has it, so it restarts from the prompt) for every issued sample neither pool
    held. ``group_of(prompt_id)`` gives an issued prompt's group."""
    from laminar.runtime.records import traj_id

    finished = {r["traj"].traj_id for r in state.pools["buffer"]["rows"]}
    pending = [t for t in state.pools["partial"] if t.traj_id not in finished]
    held = finished | {t.traj_id for t in pending}
    # on the run's clock (seconds since it began, continued by the resumed run), like every
    # other trajectory's times: the checkpoint's time, when they were last known lost
    lost_at_s = float(state.meta.get("elapsed_s", 0.0))
    missing = []
    for pid in range(int(state.pools["prompts"]["issued"])):
        lost = [i for i in range(n) if traj_id(pid, i) not in held]
        if lost:
            fresh = group_of(pid).trajectories(-1, max_tokens, lost_at_s)
            missing += [fresh[i] for i in lost]
    return pending + missing


def _atomic(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)
