"""Run trainer ranks as plain processes, without Ray (``laminar.runtime.train.local``)."""

from laminar.runtime.train.local import free_init, run_ranks

__all__ = ["free_init", "run_ranks"]
