"""Where the runtime's trainer and rollouts run: ``laminar.policy.placement`` (the one place
that decides it, so the simulator rebuilds the same placement from the same config)."""

from laminar.policy.placement import Placement, cpu_text, parse_cpus, place

__all__ = ["Placement", "cpu_text", "parse_cpus", "place"]
