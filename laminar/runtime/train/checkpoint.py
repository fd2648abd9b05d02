"""Sharded trainer checkpoints with ``torch.distributed.checkpoint`` (paper §3.3: recovery).

A checkpoint root (run-owned: ``<scratch>/<job>-checkpoints``) holds one directory per saved
version, ``v0000000007/``: every rank writes its own shards there (DCP), rank 0 adds
``laminar-checkpoint.json`` (version, ranks) last. All of it goes into a hidden ``.tmp-v…``
sibling first and appears with one rename, so a reader — a restarted trainer — sees whole
checkpoints only; :func:`latest_checkpoint` picks the newest. DCP reshards on load, so a
checkpoint taken with n ranks restores on m. Across machines the root is on a filesystem every
rank sees, or a :class:`~laminar.runtime.cluster.nodes.NodePath`: then each machine writes its
ranks' shards into its own copy of the directory (no rename: the driver collects the machines'
files into one checkpoint and makes it appear whole, ``laminar.runtime.run.storage``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from laminar.runtime.cluster.nodes import NodePath, local_path

META_NAME = "laminar-checkpoint.json"
KEEP = 2  # checkpoints kept under a root: the newest, and one in case the newest is being read
_CKPT_DIR = re.compile(r"^v(\d{10})$")


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root``, oldest first."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = _CKPT_DIR.match(name)
        if m and (Path(root) / name / META_NAME).exists():
            out.append((int(m.group(1)), Path(root) / name))
    return sorted(out)


def latest_checkpoint(path: str | Path) -> Path | None:
    """``path`` itself when it is one checkpoint, else the newest complete one under it."""
    p = Path(path)
    if (p / META_NAME).exists():
        return p
    found = list_checkpoints(p)
    return found[-1][1] if found else None


def save(model: Any, opt: Any, version: int, root: str | Path | NodePath) -> str:
    """Collective: every rank calls it. Returns the committed checkpoint directory."""
    import torch.distributed as dist

    per_machine = isinstance(root, NodePath)
    root = local_path(root)
    final = root / f"v{version:010d}"
    tmp = root / f".tmp-v{version:010d}"
    lead = dist.get_rank() == 0
    if per_machine:  # a fresh directory on each machine, collected by the driver
        final.mkdir(parents=True, exist_ok=True)
        dist.barrier()
        _save_shards(model, opt, final, version)
        dist.barrier()
        return str(final)
    if lead:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # a save that died half-way
    dist.barrier()
    _save_shards(model, opt, tmp, version)
    if lead:
        shutil.rmtree(final, ignore_errors=True)  # the same version saved again
        os.rename(tmp, final)
        for _, old in list_checkpoints(root)[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return str(final)


def _save_shards(model: Any, opt: Any, into: Path, version: int) -> None:
    """Every rank's shards of model and optimizer into ``into``; then rank 0 writes the meta."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(into))
    dist.barrier()
    if dist.get_rank() == 0:
        meta = {"version": version, "ranks": dist.get_world_size()}
        (into / META_NAME).write_text(json.dumps(meta))


def load(model: Any, opt: Any, path: str | Path | NodePath) -> int:
    """Collective: restore model and optimizer from ``path`` (a checkpoint or a root holding
    some; a ``NodePath`` is this machine's copy); returns the checkpoint's version."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    found = latest_checkpoint(local_path(path))
    if found is None:
        raise FileNotFoundError(f"no complete trainer checkpoint at {path}")
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(found))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(json.loads((found / META_NAME).read_text())["version"])
