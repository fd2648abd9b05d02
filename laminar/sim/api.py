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
from laminar.rundir import run_output
from laminar.sim.cluster import Cluster, check_setup
from laminar.sim.cost import CostModel
from laminar.sim.costdata import cost_model_for, efficiency_basis
from laminar.sim.faults import faults_frame
from laminar.sim.local import RUNTIME_SYSTEMS, placed_cost, runtime_config
from laminar.sim.local_workload import runtime_workload
from laminar.sim.registry import resolve_systems
from laminar.sim.results import (
    SUMMARY_COLUMNS,
    replicas_frame,
    steps_frame,
    summary_row,
    trajectories_frame,
)
from laminar.sim.setting import resolve_setting
from laminar.sim.steady import warmup_steps
from laminar.specs.layoutfit import require_fit_with_layout
from laminar.specs.model import model_known, model_label


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

    def write(self, out: str | Path, *, force: bool = False) -> Path:
        """Write the run directory ``out`` (whole, or not at all; an existing directory only
        if it is a previous run or ``force``: ``laminar.rundir``)."""
        out = Path(out)
        with run_output(out, force=force, command="simulate") as tmp:
            self.write_into(tmp)
        return out

    def write_into(self, run_dir: Path) -> None:
        """Write the run directory's files into the (empty, staged) directory ``run_dir``."""
        write_resolved(self.config, run_dir)
        costs = {name: json.loads(m.to_json()) for name, m in self.cost_models.items()}
        (run_dir / "cost_model.json").write_text(json.dumps(costs, indent=2) + "\n")
        self.summary.to_csv(run_dir / "summary.csv", index=False)
        self.steps.to_csv(run_dir / "steps.csv", index=False)
        self.trajectories.to_parquet(run_dir / "trajectories.parquet", index=False)
        self.replicas.to_parquet(run_dir / "replicas.parquet", index=False)
        if len(self.faults):
            self.faults.to_csv(run_dir / "faults.csv", index=False)


def simulate(
    config: LaminarConfig,
    *,
    workload: pd.DataFrame | None = None,
    on_step: Callable[[str, int], None] | None = None,
    summary_only: bool = False,
) -> SimResult:
    """Simulate every system of ``config.sim.systems`` on the same workload.

    ``workload`` (trace schema) defaults to ``laminar.traces.load_workload(config)``.
    ``on_step(system, steps_done)`` is called after each trainer step (progress bars).
    ``summary_only`` (the planner's mode, ``laminar.plan``) records no per-replica series and
    leaves the per-trajectory and per-replica tables empty; summary, steps and faults are the
    same as a full run's.
    """
    if warmup_steps(config) >= config.workload.steps:  # "auto" always leaves a window
        raise ConfigError(
            "config",
            "sim.warmup_steps",
            f"must be below workload.steps ({config.workload.steps}) to leave a window",
        )
    t0 = time.perf_counter()
    if resolve_setting(config):  # the job ``laminar train`` runs with this config
        systems = [RUNTIME_SYSTEMS[config.runtime.mode]]
        run_cfg = runtime_config(config)
        if workload is None:
            workload = runtime_workload(config)
        cost = placed_cost(config, cost_model_for(config))
    else:
        systems, run_cfg = resolve_systems(config.sim.systems), config
        try:
            cost = cost_model_for(config)
        except ConfigError as e:
            if e.key_path != "model.name":
                raise
            hint = ("; a `laminar train` job is simulated with a calibrated cost file: "
                    "laminar calibrate RUN_DIR -o cost.json, then --cost cost.json")  # fmt: skip
            raise ConfigError(e.source, e.key_path, e.detail + hint) from None
    for cls in systems:  # every system's setup before any runs (fail in milliseconds)
        check_setup(run_cfg, cls(run_cfg), cost)
    if run_cfg is config:  # a runtime setting (CPU replicas) has no GPU memory to fit
        _check_memory(config, systems)
    if workload is None:
        workload = load_run_workload(config)
    workload = workload.reset_index(drop=True)
    timings = {"workload": time.perf_counter() - t0}
    if summary_only and run_cfg.sim.replica_series:
        run_cfg = run_cfg.model_copy(
            update={"sim": run_cfg.sim.model_copy(update={"replica_series": False})}
        )
    runs = [
        _run_system(run_cfg, cls(run_cfg), cost, workload, on_step, summary_only)
        for cls in systems
    ]
    tables = [t for t, _ in runs]
    for t, took in runs:
        timings.update({f"{t['summary']['system']}.{k}": v for k, v in took.items()})
    summary = pd.DataFrame([t["summary"] for t in tables])
    spec = "+spec" if config.cluster.hardware_spec else ""
    summary["hardware"] = config.cluster.hardware + spec
    summary["model"] = model_label(config.model)
    for basis, names in efficiency_basis(config).items():
        summary[f"efficiencies_{basis}"] = names
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


def _check_memory(config: LaminarConfig, systems) -> None:
    """Refuse a configuration that does not fit in GPU memory (``laminar.specs.memory``),
    once for the decoupled split and once for colocated systems, which train on every GPU.
    A run on a cost file of a model outside the catalog (a calibrated tiny model) has no
    model facts to check."""
    if config.sim.cost_file and not model_known(config.model):
        return
    for colocated in sorted({s.colocated for s in systems}):
        require_fit_with_layout(config, trainer_gpus=config.cluster.gpus if colocated else None)


def _run_system(
    config, system, cost, workload, on_step, summary_only=False
) -> tuple[dict, dict[str, float]]:
    """One system on a fresh cluster: its tables, and the seconds its phases took."""
    t0 = time.perf_counter()
    with _gc_paused():  # building it too: collections during its set-up cost ~10 ms
        cluster = Cluster(config, system, cost, workload)
        if on_step is not None:
            cluster.on_step = lambda n: on_step(system.name, n)
        cluster.run()
        t1 = time.perf_counter()
        tables = {
            "summary": summary_row(cluster),
            "steps": steps_frame(cluster),
            "trajectories": (
                pd.DataFrame() if summary_only else trajectories_frame(cluster, workload)
            ),
            "replicas": pd.DataFrame() if summary_only else replicas_frame(cluster),
            "faults": faults_frame(cluster),
        }
        cluster.release_records()  # before the GC resumes: see ``Cluster.release_records``
    return tables, {"run": t1 - t0, "tables": time.perf_counter() - t1}


def load_run_workload(config: LaminarConfig) -> pd.DataFrame:
    """The run's workload, with room to generate ahead of the trainer.

    Laminar keeps generating while the trainer trains (§3.2, App. C), so a run of S steps
    hands out more than S global batches of prompts. The workload is loaded for 2S + 2 steps
    (a synthetic preset keeps drifting, a trace cycles); the prompt pool wraps beyond that.
    """
    from laminar.traces import load_workload
    from laminar.traces.lengths import resolve_lengths

    config = resolve_lengths(config)  # a mean / p99 is over the run's own steps, not these
    w = config.workload
    ahead = w.model_copy(update={"steps": 2 * w.steps + 2})
    return load_workload(config.model_copy(update={"workload": ahead}))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic GC while a cluster runs.

    A run keeps every trajectory record alive until its tables are built, so each collection
    walks hundreds of thousands of live objects and frees nothing; profiling showed it took
    three quarters of a 1024-GPU run. Reference counting still frees everything acyclic. The
    tables are built inside the pause too, and the run's records released before it ends
    (``Cluster.release_records``), so the first collection after it need not walk them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
