"""``laminar.sim.simulate(config) -> SimResult``: run every configured system, gather tables.

Each system in ``sim.systems`` runs on its own fresh :class:`~laminar.sim.cluster.Cluster` over
the same workload and GPUs, so the summary has one comparable row per system. A run directory
(:meth:`SimResult.write`) holds::

    config.yaml            the resolved config (loads back identically)
    cost_model.json        the coefficients of each system's cost model, with their sources
    summary.csv            one row per system (columns: laminar.sim.results.SUMMARY_COLUMNS)
    steps.csv              one row per system and trainer step
    trajectories.parquet   one row per trajectory: trace schema + measured columns
    replicas.parquet       per-replica time series of KV use and batch size
    faults.csv             one row per injected fault (only when ``faults.events`` is set)
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from laminar.config import LaminarConfig, write_resolved
from laminar.errors import ConfigError
from laminar.rundir import staged_dir
from laminar.sim.cluster import Cluster
from laminar.sim.cost import CostModel
from laminar.sim.costdata import cost_model_for
from laminar.sim.faults import faults_frame
from laminar.sim.results import (
    SUMMARY_COLUMNS,
    replicas_frame,
    steps_frame,
    summary_row,
    trajectories_frame,
)
from laminar.sim.steady import warmup_steps
from laminar.sim.systems import resolve_systems


@dataclass
class SimResult:
    """The tables of one ``simulate`` call (every system stacked, a ``system`` column first)."""

    config: LaminarConfig
    summary: pd.DataFrame
    steps: pd.DataFrame
    trajectories: pd.DataFrame
    replicas: pd.DataFrame
    faults: pd.DataFrame = field(default_factory=pd.DataFrame)
    """One row per injected fault and system (``laminar.sim.faults``); empty without faults."""
    cost_models: dict[str, CostModel] = field(default_factory=dict)
    timings_s: dict[str, float] = field(default_factory=dict)
    """Wall seconds spent, by phase (``workload``, ``<system>.run``, ``<system>.tables``);
    not written to the run directory, which stays bit-for-bit repeatable."""

    def write(self, out: str | Path) -> Path:
        """Write the run directory ``out`` (whole, or not at all: ``laminar.rundir``)."""
        out = Path(out)
        with staged_dir(out) as tmp:
            write_resolved(self.config, tmp)
            costs = {name: json.loads(m.to_json()) for name, m in self.cost_models.items()}
            (tmp / "cost_model.json").write_text(json.dumps(costs, indent=2) + "\n")
            self.summary.to_csv(tmp / "summary.csv", index=False)
            self.steps.to_csv(tmp / "steps.csv", index=False)
            self.trajectories.to_parquet(tmp / "trajectories.parquet", index=False)
            self.replicas.to_parquet(tmp / "replicas.parquet", index=False)
            if len(self.faults):
                self.faults.to_csv(tmp / "faults.csv", index=False)
        return out


def simulate(
    config: LaminarConfig,
    *,
    workload: pd.DataFrame | None = None,
    on_step: Callable[[str, int], None] | None = None,
) -> SimResult:
    """Simulate every system of ``config.sim.systems`` on the same workload.

    ``workload`` (trace schema) defaults to ``laminar.traces.load_workload(config)``.
    ``on_step(system, steps_done)`` is called after each trainer step (progress bars).
    """
    if warmup_steps(config) >= config.workload.steps:  # "auto" always leaves a window
        raise ConfigError(
            "config",
            "sim.warmup_steps",
            f"must be below workload.steps ({config.workload.steps}) to leave a window",
        )
    systems = resolve_systems(config.sim.systems)
    t0 = time.perf_counter()
    if workload is None:
        workload = load_run_workload(config)
    workload = workload.reset_index(drop=True)
    cost = cost_model_for(config)
    timings = {"workload": time.perf_counter() - t0}
    runs = [_run_system(config, cls(config), cost, workload, on_step) for cls in systems]
    tables = [t for t, _ in runs]
    for t, took in runs:
        timings.update({f"{t['summary']['system']}.{k}": v for k, v in took.items()})
    summary = pd.DataFrame([t["summary"] for t in tables])
    extra = [c for c in summary.columns if c not in SUMMARY_COLUMNS]
    return SimResult(
        config=config,
        summary=summary[[*SUMMARY_COLUMNS, *extra]],
        steps=pd.concat([t["steps"] for t in tables], ignore_index=True),
        trajectories=pd.concat([t["trajectories"] for t in tables], ignore_index=True),
        replicas=pd.concat([t["replicas"] for t in tables], ignore_index=True),
        faults=pd.concat([t["faults"] for t in tables], ignore_index=True),
        cost_models={t["summary"]["system"]: cost for t in tables},
        timings_s=timings,
    )


def _run_system(config, system, cost, workload, on_step) -> tuple[dict, dict[str, float]]:
    """One system on a fresh cluster: its tables, and the seconds its phases took."""
    t0 = time.perf_counter()
    cluster = Cluster(config, system, cost, workload)
    if on_step is not None:
        cluster.on_step = lambda n: on_step(system.name, n)
    with _gc_paused():
        cluster.run()
    t1 = time.perf_counter()
    tables = {
        "summary": summary_row(cluster),
        "steps": steps_frame(cluster),
        "trajectories": trajectories_frame(cluster, workload),
        "replicas": replicas_frame(cluster),
        "faults": faults_frame(cluster),
    }
    return tables, {"run": t1 - t0, "tables": time.perf_counter() - t1}


def load_run_workload(config: LaminarConfig) -> pd.DataFrame:
    """The run's workload, with room to generate ahead of the trainer.

    Laminar keeps generating while the trainer trains (§3.2, App. C), so a run of S steps
    hands out more than S global batches of prompts. The workload is loaded for 2S + 2 steps
    (a synthetic preset keeps drifting, a trace cycles); the prompt pool wraps beyond that.
    """
    from laminar.traces import load_workload

    w = config.workload
    ahead = w.model_copy(update={"steps": 2 * w.steps + 2})
    return load_workload(config.model_copy(update={"workload": ahead}))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic GC while a cluster runs.

    A run keeps every trajectory record alive until its tables are built, so each collection
    walks hundreds of thousands of live objects and frees nothing; profiling showed it took
    three quarters of a 1024-GPU run. Reference counting still frees everything acyclic.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
