"""Simulator section (owned by ``laminar.sim``)."""

from __future__ import annotations

from laminar.config.base import Section


class SimConfig(Section):
    """Settings only the simulator reads."""
