"""A rollout replica's machine side: its scratch, the base model directory it starts its engine
from, and where it loaded weights from — all derived on the replica's own machine.

The driver hands a replica a :class:`NodeSetup` (run id, job, how to get the base model), never a
path of its own machine: :meth:`NodeSetup.enter` runs inside the rollout actor, before vLLM is
imported, points the process's scratch variables at this machine's run directory
(:func:`laminar.runtime.cluster.nodes.enter_run`) and materialises the base model there. A tiny
model is
rebuilt from the trainer's ``config.json`` (same seed, same init; the engine loads version 0
before it generates anyway); a pretrained model is the user's directory, which must exist at the
same path on every machine (a shared filesystem or a copy per machine).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.errors import LaminarError
from laminar.runtime.cluster import nodes
from laminar.runtime.rollout.engine import Delta, Engine, EngineStats


@dataclass(frozen=True)
class NodeSetup:
    """What a rollout needs to set itself up on its machine (plain data; travels to the actor)."""

    run_id: str
    model_type: str
    """``tiny`` or ``pretrained``."""
    model_path: str = ""
    """Pretrained: the model directory (the same path on every machine)."""
    config_json: str = ""
    """Tiny: the trainer's ``config.json``, rebuilt here."""
    seed: int = 0

    def enter(self) -> tuple[dict[str, str], Path]:
        """Scratch variables set in this process, and this machine's base model directory."""
        env = nodes.enter_run(self.run_id)
        return env, self.base_model_dir()

    def base_model_dir(self) -> Path:
        if self.model_type != "tiny":
            path = Path(self.model_path)
            if not (path / "config.json").is_file():
                raise LaminarError(
                    f"model directory {path} (runtime.model.path) has no config.json on machine "
                    f"{nodes.current_node() or 'here'}; every machine needs the model at the "
                    "same path (a shared filesystem or a copy per machine)"
                )
            return path
        where = (nodes.NodePath(self.run_id, "shm") / "rollout-base").resolve()
        return _materialize_once(where, self._build_tiny)

    def _build_tiny(self, out: Path) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        from laminar.runtime.models import tinymodel

        (out / "config.json").write_text(self.config_json)
        config = AutoConfig.from_pretrained(out)
        torch.manual_seed(self.seed)
        model = AutoModelForCausalLM.from_config(config)
        tinymodel.save_model_dir(model, tinymodel.build_tokenizer(), out)


def _materialize_once(final: Path, build: Any) -> Path:
    """``build(tmp)`` into a sibling and rename it to ``final``, once per machine (a file lock
    keeps the other replicas of the machine from building it too)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not final.is_dir():
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
            try:
                build(tmp)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    return final


class LoadRecorder:
    """An engine that remembers every weight directory it loaded (to show where they came from)."""

    def __init__(self, engine: Engine):
        self.inner = engine
        self.loaded: list[str] = []

    async def start(self) -> None:
        await self.inner.start()

    def generate(
        self, request_id: str, prompt_ids: Sequence[int], max_tokens: int
    ) -> AsyncIterator[Delta]:
        return self.inner.generate(request_id, prompt_ids, max_tokens)

    async def abort(self, request_ids: Sequence[str]) -> None:
        await self.inner.abort(request_ids)

    def stats(self) -> EngineStats:
        return self.inner.stats()

    async def load_weights(self, path: str) -> None:
        await self.inner.load_weights(path)
        self.loaded.append(path)

    async def shutdown(self) -> None:
        await self.inner.shutdown()

    def __getattr__(self, name: str) -> Any:  # anything else an engine offers, unchanged
        return getattr(self.__dict__["inner"], name)
