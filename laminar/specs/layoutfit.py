"""Does the trainer's parallel layout (``trainer.tp/pp/ep/cp``) fit in GPU memory?

A rank's bytes are ``laminar.specs.trainmemory.trainer_memory``'s (through
``laminar.specs.memory.sim_trainer_memory``), the one estimate the fit check and the runtime
share, given the layout: model states split over tp x pp (routed experts also
over ep) and then over the data-parallel ranks (Megatron's distributed optimizer, FSDP's
shards: over the data- and context-parallel ranks, ``trainer GPUs / (tp x pp)``), one
micro-batch's activations split over cp (and
its layer working set over tp), bf16 compute with fp32 master weights, gradients and AdamW
states, the reference policy's weights when ``trainer.reference`` is set. A layout whose rank
does not fit is refused naming the key to change and the smallest layout that fits (fewest GPUs
per data-parallel replica; among equals TP inside a machine first, then PP, then CP, then the
least EP); :func:`layouts` lists the layouts a trainer of some GPUs can take (``laminar plan``
searches them).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from laminar.errors import ConfigError
from laminar.specs.hardware import hardware_spec
from laminar.specs.memory import check_fit, sim_trainer_memory
from laminar.specs.model import BYTES_PER_DTYPE, ModelSpec, model_spec

POWERS = tuple(2**i for i in range(11))  # 1..1024, the config's bounds


@dataclass(frozen=True, slots=True)
class Layout:
    """tp, pp, ep, cp of a trainer (``trainer.tp/pp/ep/cp``): the one definition the memory fit
    and the simulator share (``laminar.sim.layout.TrainerLayout`` adds a step's updates)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    cp: int = 1

    @property
    def model_parallel(self) -> int:
        """GPUs of one data-parallel replica: tp x cp x pp."""
        return self.tp * self.cp * self.pp

    @property
    def copy_gpus(self) -> int:
        """GPUs that hold one copy of the parameters between them: tp x pp x ep (context-parallel
        ranks repeat their shard; 1 for a trainer without model parallelism, FSDP)."""
        return self.tp * self.pp * self.ep

    def data_parallel(self, gpus: int) -> int:
        """Data-parallel replicas on ``gpus`` trainer GPUs."""
        return max(1, gpus // self.model_parallel)

    def __str__(self) -> str:
        return f"tp={self.tp}, pp={self.pp}, ep={self.ep}, cp={self.cp}"


def layout_of(cfg: Any) -> Layout:
    """The layout ``cfg.trainer`` asks for."""
    t = cfg.trainer
    return Layout(t.tp, t.pp, t.ep, t.cp)


def layout_problem(
    layout: Layout, gpus: int, *, experts: int, layers: int | None
) -> ConfigError | None:
    """Why ``layout`` cannot be laid on ``gpus`` trainer GPUs of a model with ``experts`` routed
    experts (0: dense) and ``layers`` layers (None: unknown, as from a cost file), as the
    :class:`ConfigError` naming the ``trainer`` key; None when it can."""
    mp = layout.model_parallel
    if gpus % mp:
        key = "trainer.tp" if layout.tp > 1 else "trainer.pp" if layout.pp > 1 else "trainer.cp"
        return ConfigError(
            "config", key,
            f"tp x cp x pp = {layout.tp} x {layout.cp} x {layout.pp} = {mp} does not divide the "
            f"trainer's {gpus} GPUs; the data-parallel degree must be whole",
        )  # fmt: skip
    if layout.ep > 1:
        if not experts:
            return ConfigError("config", "trainer.ep", f"{layout.ep}: the model has no experts")
        if layout.ep > experts:
            return ConfigError(
                "config", "trainer.ep", f"{layout.ep} exceeds the model's {experts} routed experts"
            )
        if (gpus // layout.pp) % layout.ep:
            return ConfigError(
                "config", "trainer.ep",
                f"{layout.ep} does not divide the {gpus // layout.pp} GPUs of a pipeline stage "
                f"(trainer GPUs {gpus} / pp {layout.pp}): experts fold over them",
            )  # fmt: skip
    if layers is not None and layout.pp > layers:
        return ConfigError(
            "config", "trainer.pp", f"{layout.pp} stages exceed the model's {layers} layers"
        )
    return None


def check_layout(layout: Layout, gpus: int, *, experts: int, layers: int | None) -> None:
    """:func:`layout_problem`, raised."""
    problem = layout_problem(layout, gpus, experts=experts, layers=layers)
    if problem is not None:
        raise problem


def valid(layout: Layout, gpus: int, spec: ModelSpec) -> bool:
    """Whether ``layout`` can be laid on ``gpus`` trainer GPUs of ``spec`` at all
    (:func:`layout_problem`)."""
    return layout_problem(layout, gpus, experts=spec.experts, layers=spec.layers) is None


def rank_bytes(cfg: Any, spec: ModelSpec, layout: Layout, gpus: int) -> float:
    """Peak bytes of one trainer rank of ``cfg`` laid out as ``layout`` on ``gpus`` GPUs:
    ``laminar.specs.memory.sim_trainer_memory`` (the simulated trainer's
    ``trainer_memory``) with the layout, its states shared out over the data-parallel ranks."""
    hw = hardware_spec(cfg.cluster)
    mem = sim_trainer_memory(cfg, spec, hw, tp=layout.tp, pp=layout.pp, ep=layout.ep,
                             cp=layout.cp)  # fmt: skip
    shards = max(1, gpus // (layout.tp * layout.pp))  # data x context parallel ranks
    states = mem.states / shards
    # trainer_memory shards the routed experts' states over these ranks as well as ep; folded
    # over them (Megatron's MoE parallel folding) the experts' states are shared out over their
    # own data-parallel ranks, gpus / (pp x ep): a rank holds routed / gpus of each state, not
    # routed / (ep x gpus).
    per_param = mem.states / max(1.0, _params(spec, layout))
    states += spec.routed_params * per_param / gpus * (1 - 1 / layout.ep)
    if cfg.trainer.reference and not mem.reference:  # the simulator's reference pass
        states += BYTES_PER_DTYPE[cfg.model.dtype] * _params(spec, layout) / shards
    return states + mem.unsharded


def _params(spec: ModelSpec, layout: Layout) -> float:
    """Parameters a rank holds before data-parallel sharding (as trainer_memory splits them)."""
    dense = spec.total_params - spec.routed_params
    return dense / (layout.tp * layout.pp) + spec.routed_params / (
        layout.tp * layout.pp * layout.ep
    )


def layouts(spec: ModelSpec, gpus: int, gpus_per_machine: int) -> list[Layout]:
    """Every valid layout of ``gpus`` trainer GPUs (powers of two; TP inside a machine; EP
    only for MoE models), smallest data-parallel replica first (module doc's order)."""
    tps = [t for t in POWERS if t <= min(gpus, gpus_per_machine)]
    pps = [p for p in POWERS if p <= min(gpus, spec.layers)]
    cps = [c for c in POWERS if c <= gpus]
    eps = [e for e in POWERS if e <= min(gpus, spec.experts)] if spec.is_moe else [1]
    found = [
        Layout(tp, pp, ep, cp)
        for tp, pp, ep, cp in itertools.product(tps, pps, eps, cps)
        if valid(Layout(tp, pp, ep, cp), gpus, spec)
    ]
    return sorted(found, key=lambda x: (x.model_parallel, -x.tp, -x.pp, x.ep))


def smallest_fitting(cfg: Any, spec: ModelSpec, gpus: int) -> Layout | None:
    """The first of :func:`layouts` whose rank fits one GPU; None when none does."""
    room = hardware_spec(cfg.cluster)["gpu_memory_bytes"]
    gpm = min(cfg.cluster.gpus_per_machine, cfg.cluster.gpus)
    for layout in layouts(spec, gpus, gpm):
        if rank_bytes(cfg, spec, layout, gpus) <= room:
            return layout
    return None


def check_layout_fit(cfg: Any, gpus: int) -> None:
    """:class:`ConfigError` naming the ``trainer`` key when ``cfg``'s layout on ``gpus``
    trainer GPUs does not fit a GPU's memory, with the smallest layout that would."""
    spec = model_spec(cfg.model)
    mine = layout_of(cfg)
    room = hardware_spec(cfg.cluster)["gpu_memory_bytes"]
    need = rank_bytes(cfg, spec, mine, gpus)
    if need <= room:
        return
    best = smallest_fitting(cfg, spec, gpus)
    what = (
        f"a trainer rank of {spec.name} at {mine} on {gpus} GPUs needs {need / 1e9:.1f} GB "
        f"(laminar.specs.trainmemory) of {room / 1e9:.1f} GB"
    )
    if best is None:
        raise ConfigError("config", "trainer.tp", f"{what}; no layout of {gpus} GPUs fits")
    keys = ("tp", "pp", "cp", "ep")
    grow = [k for k in keys if getattr(best, k) > getattr(mine, k)]
    other = [k for k in keys if getattr(best, k) != getattr(mine, k)]
    key = f"trainer.{(grow or other or ['tp'])[0]}"
    raise ConfigError("config", key, f"{what}; the smallest layout that fits is {best}")


ROLLOUT_KEYS = ("model.rollout_tp", "model.rollout_ep")
"""Keys ``laminar.specs.memory.check_fit`` names when the rollout, not the trainer, fails."""


def fit_problem(cfg: Any, *, trainer_gpus: int | None = None) -> ConfigError | None:
    """What does not fit GPU memory, as the error to raise (None when everything fits):
    ``laminar.specs.memory.check_fit`` for the rollout (and for the trainer of data parallelism
    alone), :func:`check_layout_fit` for a trainer laid out otherwise."""
    report = check_fit(cfg, trainer_gpus=trainer_gpus)
    t = cfg.trainer
    plain = t.tp == t.pp == t.ep == t.cp == 1
    if report.ok and plain:
        return None
    if not report.ok and (plain or report.key_path in ROLLOUT_KEYS or report.trainer_gpus < 1):
        return ConfigError("config", report.key_path, report.reason)
    try:
        check_layout_fit(cfg, report.trainer_gpus)
    except ConfigError as e:
        return e
    return None


def require_fit_with_layout(cfg: Any, *, trainer_gpus: int | None = None) -> None:
    """:func:`fit_problem`, raised."""
    problem = fit_problem(cfg, trainer_gpus=trainer_gpus)
    if problem is not None:
        raise problem
