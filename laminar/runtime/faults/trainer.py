"""A dead trainer restarted from the run's last checkpoint while the rollouts keep generating."""

from __future__ import annotations

import time
from typing import Any


def restart_trainer(a: Any, checkpoint: str | None, attempts: int = 10) -> int:
    """Kill the trainer (if it still lives) and start a new one from ``checkpoint`` (§3.3);
    the rollouts keep generating meanwhile. Updates after that checkpoint are lost.

    A new trainer that dies while starting (Ray placed it on a machine that is dying and not
    yet declared dead) is started again, a few seconds later."""
    import ray

    ray.kill(a.trainer, no_restart=True)
    for attempt in range(attempts):
        a.trainer = a.new_trainer()
        try:
            ray.get(a.trainer.setup.remote())
            return ray.get(a.trainer.resume.remote(a.weights, checkpoint))
        except ray.exceptions.RayActorError:
            if attempt == attempts - 1:
                raise
            time.sleep(3.0)
    raise AssertionError("unreachable")
