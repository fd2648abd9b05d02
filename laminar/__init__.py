"""Laminar: asynchronous RL post-training at cluster scale.

Three layers share one set of decisions:

- ``laminar.policy``: repack, relay chain and staleness decisions (pure Python);
- ``laminar.sim``: a SimPy simulator of a whole cluster that asks the policy layer;
- ``laminar.runtime``: the real system on Ray that asks the same policy layer.
"""

__version__ = "0.1.0"
