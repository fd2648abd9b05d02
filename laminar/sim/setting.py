"""Which job a config describes to the simulator: a cluster, or the job ``laminar train`` runs.

``sim.setting`` says it (``cluster``, ``runtime``); ``auto`` takes a cost file written by
``laminar calibrate`` (it carries a ``runtime`` block) as the runtime's own job
(``laminar/sim/local.py``), unless the config describes a cluster as well: then it refuses
rather than silently simulate a different job (README, "Calibrate the simulator").
"""

from __future__ import annotations

from laminar.config import LaminarConfig
from laminar.costfile import read_cost_file
from laminar.errors import ConfigError


def cost_extras(cfg: LaminarConfig) -> dict | None:
    """The ``runtime`` block of ``sim.cost_file``, checked (``laminar.costfile``: every figure
    finite and in range, or a ``ConfigError`` naming the file and key); None without one."""
    if not cfg.sim.cost_file:
        return None
    return read_cost_file(cfg.sim.cost_file).runtime


def is_runtime_setting(cfg: LaminarConfig) -> bool:
    """True when ``cfg`` names the runtime's own job (``sim.setting``; ``auto``: a cost file
    written by ``laminar calibrate``, i.e. one with a ``runtime`` block). A simulation asks
    :func:`resolve_setting`, which also refuses a config that describes a cluster as well."""
    if cfg.sim.setting == "auto":
        return cost_extras(cfg) is not None
    return cfg.sim.setting == "runtime"


def resolve_setting(cfg: LaminarConfig) -> bool:
    """:func:`is_runtime_setting`, refusing the ambiguous case: ``auto`` with a calibrated cost
    file and a config that describes a cluster too (a catalog model, ``model.spec`` /
    ``hf_config``, a ``cluster`` section or ``sim.systems`` of its own) would replace that
    cluster by the job's one machine, so it is an error naming both, not a silent switch;
    ``sim.setting`` says which one is meant."""
    runtime = is_runtime_setting(cfg)
    if runtime and cfg.sim.setting == "auto":
        _refuse_a_cluster(cfg)
    return runtime


def _refuse_a_cluster(cfg: LaminarConfig) -> None:
    """Raise when ``cfg`` describes a cluster that the runtime setting would drop."""
    from laminar.config.cluster import ClusterConfig
    from laminar.config.sim import SimConfig
    from laminar.specs.model import model_known

    m, c = cfg.model, cfg.cluster
    why = []
    if model_known(m):
        why.append(f"model {m.name}" + (" (model.spec)" if m.spec else "")
                   + (" (model.hf_config)" if m.hf_config and not m.spec else ""))  # fmt: skip
    if c != ClusterConfig():
        spec = " with cluster.hardware_spec" if c.hardware_spec else ""
        why.append(f"cluster {c.gpus} x {c.hardware}{spec}")
    if cfg.sim.systems != SimConfig().systems:
        why.append(f"sim.systems {','.join(cfg.sim.systems)}")
    if not why:
        return
    rt = cfg.runtime
    raise ConfigError(
        "config",
        "sim.setting",
        f"{cfg.sim.cost_file} was calibrated on a local `laminar train` job, but this config "
        f"describes a cluster ({'; '.join(why)}) that simulating that job would replace by "
        f"its {rt.rollouts} rollout(s) and trainer on one machine. Simulate the train job "
        "from its own config (RUN/config.yaml, --preset tiny-cpu) or with "
        "--set sim.setting=runtime; apply the coefficients to this cluster with "
        "--set sim.setting=cluster",
    )
