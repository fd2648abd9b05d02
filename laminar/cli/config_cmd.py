"""``laminar config``: inspect and validate configs."""

from __future__ import annotations

import argparse

from laminar.cli.common import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show, validate and list configs")
    cmds = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = cmds.add_parser("show", help="print the fully resolved config (validates it)")
    add_config_args(show)
    show.set_defaults(func=_show)
    presets = cmds.add_parser("presets", help="list the shipped presets")
    presets.set_defaults(func=_presets)
    models = cmds.add_parser("models", help="list the model catalog with derived facts")
    models.set_defaults(func=_models)
    arch = cmds.add_parser("architectures", help="list the config.json model_types Laminar "
                           "sizes, and those it refuses with the reason")  # fmt: skip
    arch.set_defaults(func=_architectures)
    hardware = cmds.add_parser("hardware", help="list the GPU catalog with its main facts")
    hardware.set_defaults(func=_hardware)
    fit = cmds.add_parser(
        "fit",
        help="check a config against GPU memory, and the runtime's trainer against its "
        "devices (exit 2: it does not)",
    )
    add_config_args(fit)
    fit.set_defaults(func=_fit)


def _show(args: argparse.Namespace) -> int:
    from laminar.config import dump_config

    print(dump_config(config_from_args(args)), end="")
    return 0


def _presets(args: argparse.Namespace) -> int:
    from laminar.config import list_presets

    for name in list_presets():
        print(name)
    return 0


def _models(args: argparse.Namespace) -> int:
    from laminar.specs.model import catalog_names, catalog_spec, describe

    for name in catalog_names():
        print(describe(catalog_spec(name)))
    return 0


def _architectures(args: argparse.Namespace) -> int:
    from laminar.specs.hfconfig import FAMILIES, STATE_SPACE_TYPES

    print("sized (config.json model_type):")
    print("  " + " ".join(sorted(FAMILIES)))
    print("refused (layers Laminar does not size):")
    for name, what in sorted(STATE_SPACE_TYPES.items()):
        print(f"  {name}: {what}")
    print("any other model_type is refused by name; a Llama-shaped one can be given as \"llama\"")
    return 0


def _hardware(args: argparse.Namespace) -> int:
    from laminar.specs.hardware import catalog_hardware, hardware_names

    for name in hardware_names():
        hw = catalog_hardware(name)
        fp8 = f"{hw['fp8_flops'] / 1e12:,.0f}" if hw["fp8_flops"] else "-"
        rack = " (one domain over machines of " if hw.nvlink_spans_machines else ""
        rack += f"{hw.machine_gpus} GPUs)" if rack else ""
        print(
            f"{name}: {hw['gpu_memory_bytes'] / 1e9:.0f} GB at {hw['hbm_bytes_per_s'] / 1e12:.2f} "
            f"TB/s, BF16 {hw['bf16_flops'] / 1e12:,.0f} / FP8 {fp8} TFLOP/s dense, NVLink "
            f"{hw['nvlink_bytes_per_s'] / 1e9:.0f} GB/s x {hw['nvlink_domain_gpus']:.0f} GPUs"
            f"{rack}, "
            f"{hw['nics_per_machine']:.0f} NICs x {hw['nic_bytes_per_s'] * 8 / 1e9:.0f} Gb/s"
        )
    return 0


def _fit(args: argparse.Namespace) -> int:
    from laminar.sim.registry import resolve_systems
    from laminar.specs.memory import require_fit
    from laminar.specs.runfit import require_runtime_fit

    cfg = config_from_args(args)
    colocated = {s.colocated for s in resolve_systems(cfg.sim.systems)}
    if _runtime_only(cfg):  # tiny-cpu: no GPU model to check, only the runtime's trainer
        colocated = set()
        print(f"no GPU check: model.name={cfg.model.name} is the runtime's tiny model")
    for together in sorted(colocated):  # colocated systems train on every GPU
        r = require_fit(cfg, trainer_gpus=cfg.cluster.gpus if together else None)
        print(
            f"fits{' (colocated)' if together else ''}: trainer "
            f"{r.trainer_bytes_per_gpu / 1e9:.1f} GB per GPU on {r.trainer_gpus} GPUs "
            f"(at least {r.min_trainer_gpus} needed), rollout "
            f"{r.rollout_bytes_per_gpu / 1e9:.1f} GB per GPU (a replica needs at least "
            f"{r.min_replica_gpus} GPUs), of {r.gpu_bytes / 1e9:.1f} GB"
        )
    # the check `laminar train` refuses to start on (same function, same message)
    rt = require_runtime_fit(cfg)
    print(
        f"fits (runtime trainer, {rt.device}): {rt.memory.total / 1e9:.2f} GB per rank on "
        f"{rt.ranks} rank{'s' if rt.ranks > 1 else ''} ({rt.memory.states / 1e9:.2f} GB of it "
        f"sharded states), {rt.need_bytes / 1e9:.2f} GB of {rt.capacity_bytes / 1e9:.1f} GB"
    )
    return 0


def _runtime_only(cfg) -> bool:
    """The config's model is the runtime's tiny Llama (``tiny-llama``), which the GPU catalog
    does not size: only the runtime trainer's check applies."""
    from laminar.errors import ConfigError
    from laminar.specs.model import model_spec

    if cfg.model.name != "tiny-llama":
        return False
    try:
        model_spec(cfg.model)
    except ConfigError:
        return True
    return False
