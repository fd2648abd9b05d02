"""SimPy discrete-event simulator of a whole RL post-training cluster (DESIGN.md, "The simulator").

``simulate(config) -> SimResult`` runs every system of ``config.sim.systems`` on the same
workload and GPUs; ``SimResult.write(dir)`` writes the run directory. See ``laminar.sim.api``.
"""

from laminar.sim.api import SimResult, simulate

__all__ = ["SimResult", "simulate"]
