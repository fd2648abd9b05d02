"""A run's inputs, checked before anything starts or is written: the model directory
(``runtime.model.type = pretrained``), the task file (``runtime.task.type = jsonl``) or
environment (``python``, or a shipped one: its module imports, its factory builds one, in a
child process: ``laminar.runtime.envs.probe``) and the
cost file (``sim.cost_file``: repack's step bound, ``laminar.costfile``); the cluster it joins
(``runtime.address``); the trainer's memory against its devices (``laminar.specs.runfit``,
as ``laminar config fit``). A bad one is a ``LaminarError`` naming the file (and line) or the
setting: exit code 2."""

from __future__ import annotations

from typing import Any


def check_inputs(cfg: Any) -> None:
    """Raise ``ModelDirError`` / ``TaskFileError`` / ``ConfigError`` for a bad model directory,
    task file or cost file, or a shared model field the runtime cannot serve here
    (``laminar.runtime.rollout.serving``)."""
    from laminar.runtime.rollout.serving import read_model_config, serving

    rt = cfg.runtime
    if cfg.sim.cost_file:
        from laminar.runtime.data.manager import step_cost_from_file

        step_cost_from_file(cfg.sim.cost_file)
    if rt.model.type == "pretrained":
        from laminar.runtime.models.pretrained import check_model_dir

        check_model_dir(rt.model.path)
    serving(cfg, read_model_config(cfg))
    if rt.task.type in ("jsonl", "calculator"):
        from laminar.runtime.tasks.jsonl import load_rows

        load_rows(rt.task.path)
        if getattr(rt.task, "reward", ""):  # its module imports and names a function
            from laminar.runtime.envs.probe import check_in_child

            check_in_child(rt.task, cfg.seed, "reward", rt.task.reward_timeout_s)
    if rt.loggers:  # each tracker's package imports
        from laminar.runtime.tracking.loggers import check_loggers

        check_loggers(rt.loggers)
    from laminar.runtime.tasks.make import env_task

    env = env_task(rt.task)
    if env is not None:  # the module imports and the factory builds an environment
        from laminar.runtime.envs.probe import check_in_child

        check_in_child(env, cfg.seed, "entry", env.timeout_s)
    # the trainer fits its devices: the check and message of `laminar config fit`
    from laminar.specs.runfit import require_runtime_fit

    require_runtime_fit(cfg)


def check_cluster(cfg: Any) -> None:
    """The cluster the run joins, before anything is written: a Ray answers at
    ``runtime.address`` (``AddressError``, bounded: ``laminar.runtime.run.address``), and a
    ``kill-machine`` fault has machines to kill (an emulated cluster registered in this
    process, ``laminar.runtime.faults.machines``). A LaminarError: exit code 2."""
    from laminar.runtime.faults.machines import machines_for
    from laminar.runtime.run.address import check_address
    from laminar.runtime.run.ray_run import OFFLINE_ENV

    address = cfg.runtime.address
    check_address(address, OFFLINE_ENV)
    kills = [s.text() for _, s in cfg.runtime.scheduled_faults() if s.kind == "kill-machine"]
    if kills and machines_for(address) is None:
        from laminar.errors import LaminarError

        raise LaminarError(
            f"runtime.faults.inject {kills[0]}: the cluster at runtime.address {address!r} has "
            "no machines this process can kill (kill-machine needs an emulated cluster "
            "registered with laminar.runtime.faults.machines.register, as tests and "
            "benchmarks/bench_faults.py do)"
        )
