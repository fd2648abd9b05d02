"""The decisions shared by the simulator and the runtime.

Pure Python: this package imports neither simpy, ray, torch nor vllm (a test checks it).
Both engines build plain snapshots of their state, call a function here, and carry out the
plan it returns, so a decision is made in exactly one place.
"""

from laminar.policy.relay import (
    Chain,
    broadcast_time,
    choose_master,
    optimal_chunks,
    plan_chain,
    rebuild_chain,
)
from laminar.policy.repack import (
    Move,
    ReplicaState,
    StepCost,
    TrajectoryState,
    is_candidate,
    plan_repack,
)
from laminar.policy.staleness import StalenessBound, StalenessTracker, staleness

__all__ = [
    "Chain",
    "Move",
    "ReplicaState",
    "StalenessBound",
    "StalenessTracker",
    "StepCost",
    "TrajectoryState",
    "broadcast_time",
    "choose_master",
    "is_candidate",
    "optimal_chunks",
    "plan_chain",
    "plan_repack",
    "rebuild_chain",
    "staleness",
]
