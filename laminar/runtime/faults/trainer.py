"""A dead trainer restarted from the run's last checkpoint while the rollouts keep generating."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any


def restart_trainer(a: Any, checkpoint: str | None, attempts: int = 10) -> int:
    """Kill the trainer (if it still lives) and start a new one from ``checkpoint`` (§3.3);
    the rollouts keep generating meanwhile. Updates after that checkpoint are lost.

    A new trainer that dies while starting (Ray placed it on a machine that is dying and not
    yet declared dead) is started again, a few seconds later. ``a.storage`` (when set) puts the
    checkpoint where the new trainer's machines read it (``laminar.runtime.run.storage``)."""
    import ray

    storage = getattr(a, "storage", None)
    stage = storage.staged if storage is not None else _as_given

    ray.kill(a.trainer, no_restart=True)
    for attempt in range(attempts):
        a.trainer = a.new_trainer()
        try:
            ray.get(a.trainer.setup.remote())
            with stage(a.trainer, checkpoint) as path:
                return ray.get(a.trainer.resume.remote(a.weights, path))
        except ray.exceptions.RayActorError:
            if attempt == attempts - 1:
                raise
            time.sleep(3.0)
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _as_given(trainer: Any, checkpoint: str | None) -> Iterator[str | None]:
    yield checkpoint
