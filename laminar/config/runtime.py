"""Runtime section (owned by ``laminar.runtime``)."""

from __future__ import annotations

from laminar.config.base import Section


class RuntimeConfig(Section):
    """Settings only the real runtime reads."""
