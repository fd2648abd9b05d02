"""Laminar: asynchronous RL post-training at cluster scale.

Three layers share one set of decisions:

- ``laminar.policy``: repack, relay chain and staleness decisions (pure Python);
- ``laminar.sim``: a SimPy simulator of a whole cluster that asks the policy layer;
- ``laminar.runtime``: the real system on Ray that asks the same policy layer.
"""

from laminar import native as _native

__version__ = "0.1.0"

# The compiled hot modules (``laminar.native``), when built and fresh: before anything imports them.
_native.install()
