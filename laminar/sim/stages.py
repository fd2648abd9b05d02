"""Per-stage seconds of every trainer step, the breakdown RL frameworks' logs print.

Each row of ``steps.csv`` carries, besides ``train_s`` and ``actor_stall_s``, the step's
``step_time_s`` (from the moment the trainer asked for its batch, the previous step's end, to
the end of its weight hand-over) and five stages, in seconds; ``summary.csv`` carries their
means over the measured window (``<stage>_mean``). Beside verl's log keys:

- ``gen_s`` (verl ``timing_s/gen``; its one-step-off-policy recipe: ``timing_s/wait_prev_gen``):
  trainer seconds spent waiting for generation;
- ``old_logprob_s`` (``timing_s/old_log_prob``): the old policy's log-prob forward, charged by
  systems that recompute it (``System.recomputes_old_logprob``, ``trainer.old_logprob``); 0
  otherwise;
- ``ref_s`` (``timing_s/ref``): the reference policy's forward, charged when
  ``trainer.reference`` is set (a KL term to the reference model); 0 otherwise;
- ``update_s`` (``timing_s/update_actor``): forward + backward and the gradient all-reduce —
  everything ``train_s`` holds besides the two forwards above (in the runtime setting also its
  fixed per-step cost and the micro-batches' padding);
- ``weight_sync_s`` (``timing_s/sync`` / ``sync_rollout_weights``): trainer seconds handing the
  new weights over: Laminar's actor stall (one copy into the master relay; the relay broadcast
  and the rollouts' loads are off the trainer's path), the baselines' global sync.

**Serial and overlapped stages.** The stages are read on the trainer's timeline, so they are
serial by construction and ``gen_s + old_logprob_s + ref_s + update_s + weight_sync_s`` equals
``step_time_s`` (to rounding) for every system. Where generation overlaps training, only the
part of it the trainer waits for is in ``gen_s``: Laminar, one-step and partial rollout
generate while the trainer trains, so their ``gen_s`` is the trainer's exposed wait, not the
batch's generation time on the rollouts (for verl, where nothing overlaps, the two are the
same). Stream trains mini-batches while the rest of its batch generates: its compute columns
are every mini-batch's charged seconds and its ``gen_s`` the time the trainer sat idle between
them. One-step's trainer waits, before each sync, for the rollouts to finish the next batch:
that wait is ``gen_s`` too (``actor_stall_s`` keeps counting it as stall, as before). A step hit
by a trainer outage (``laminar.sim.faults``) is longer than its stages by the outage and the
work redone after it.
"""

from __future__ import annotations

from typing import Any

STAGES = ("gen_s", "old_logprob_s", "ref_s", "update_s", "weight_sync_s")
"""The stage columns of ``steps.csv``, in order (``summary.csv``: each with ``_mean``)."""


def step_stages(
    cluster: Any, seq_lens: list[int], train_s: float, times: tuple[float, float, float, float]
) -> dict[str, float]:
    """The stage columns of one step: ``train_s``, the seconds charged for training on
    ``seq_lens``, split into the old-log-prob forward, the reference forward and the update;
    ``times`` the moments the trainer asked for its batch, got it, finished training and
    finished ``System.publish`` (what it waited for in between: ``System.trainer_waits``)."""
    asked_s, start_s, trained_s, end_s = times
    system = cluster.system
    gen_s, sync_s = system.trainer_waits(cluster, start_s - asked_s, end_s - trained_s)
    passes = cluster.train_step(seq_lens)
    logprob_s, ref_s = passes.logprob_s, passes.ref_s
    return {
        "step_time_s": end_s - asked_s,
        "gen_s": gen_s,
        "old_logprob_s": logprob_s,
        "ref_s": ref_s,
        "update_s": train_s - logprob_s - ref_s,
        "weight_sync_s": sync_s,
    }
