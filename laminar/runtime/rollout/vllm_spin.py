"""A vLLM plugin that bounds how long an idle engine's processes spin on their core.

vLLM's worker and engine-core processes wait for their next message by looping on
``sched_yield()`` for ``busy_loop_s = 1`` s after their last read before they sleep on a socket
(``vllm/distributed/device_communicators/shm_broadcast.py: SpinCondition``). On a GPU machine that
costs a host core nobody else wants; on CPU it takes the core from whatever shares it — the other
engine pinned there, or a sync-mode trainer running on the engines' cores right after generation
(``docs/fidelity.md``: the trainer's "slow steps"). ``runtime.engine_spin_s`` bounds it: the
rollout actor exports :data:`ENV`, its vLLM processes inherit it, and vLLM calls :func:`apply` in
each of them (entry point ``vllm.general_plugins`` in ``pyproject.toml``). Without the variable
this does nothing, so other uses of vLLM in the same environment keep vLLM's behaviour.
"""

from __future__ import annotations

import logging
import os

ENV = "LAMINAR_VLLM_SPIN_S"
PLUGIN_GROUP = "vllm.general_plugins"

log = logging.getLogger(__name__)


def spin_s_from_env() -> float | None:
    """The bound in seconds from :data:`ENV`, or None when unset or empty."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    value = float(text)
    if value < 0:
        raise ValueError(f"{ENV}={text!r}: must be >= 0 seconds")
    return value


def registered() -> bool:
    """Whether vLLM will find :func:`apply` (the package is installed with its entry points)."""
    from importlib.metadata import entry_points

    return any(ep.value == f"{__name__}:apply" for ep in entry_points(group=PLUGIN_GROUP))


def apply() -> None:
    """Bound vLLM's reader spin to :data:`ENV` seconds in this process (idempotent). Being the
    one hook laminar has in every vLLM process, it also ties an engine process to its parent
    when the run asks (``laminar.runtime.cluster.lifeline.TIE_ENV``): an engine whose rollout
    actor died, however, goes with it instead of holding its cores and memory."""
    from laminar.runtime.cluster.lifeline import tie_to_multiprocessing_parent

    tie_to_multiprocessing_parent()
    spin_s = spin_s_from_env()
    if spin_s is None:
        return
    try:
        from vllm.distributed.device_communicators import shm_broadcast
    except ImportError:  # a vLLM without the shared-memory queue: nothing spins
        return
    cond = getattr(shm_broadcast, "SpinCondition", None)
    if cond is None or not hasattr(cond, "wait"):
        log.warning("vLLM has no SpinCondition.wait: %s=%s has no effect", ENV, spin_s)
        return
    cond.laminar_spin_s = spin_s  # read at every wait, so a second apply() just updates it
    if getattr(cond, "laminar_patched", False):
        return
    original = cond.wait

    def wait(self, timeout_ms: int | None = None) -> None:
        # ``busy_loop_s`` is read by ``wait`` itself, so setting it here bounds readers created
        # before this plugin loaded too; writers (is_reader False) never spin
        if getattr(self, "is_reader", False):
            self.busy_loop_s = cond.laminar_spin_s
        return original(self, timeout_ms)

    cond.wait = wait
    cond.laminar_patched = True
