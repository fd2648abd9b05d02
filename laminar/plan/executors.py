"""Where a plan's simulations run: in this process, in local worker processes, or on Ray.

Every backend takes the same list of (key, config) tasks and returns results by key, so the
plan's decisions never depend on which finished first: ``plan.csv`` is the same with
``--jobs 1``, ``--jobs N`` and ``--address``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from laminar.errors import ConfigError
from laminar.plan.evaluate import evaluate

Task = tuple[str, dict[str, Any]]
Tick = Callable[[], None]


def run_tasks(tasks: list[Task], *, jobs: int, address: str | None, tick: Tick) -> dict[str, dict]:
    """Results of ``evaluate`` for every task, by key; ``tick()`` after each one finishes."""
    if not tasks:
        return {}
    if address:
        return _on_ray(tasks, address, jobs, tick)
    if jobs <= 1 or len(tasks) == 1:
        out = {}
        for key, cfg in tasks:
            out[key] = evaluate(cfg)
            tick()
        return out
    return _in_processes(tasks, jobs, tick)


def _in_processes(tasks: list[Task], jobs: int, tick: Tick) -> dict[str, dict]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # fork where there is one: spawn would re-run the ``laminar`` console script (it has no
    # ``__main__`` guard) in every worker. The parent holds no lock a worker needs.
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    out = {}
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
        futures = {pool.submit(evaluate, cfg): key for key, cfg in tasks}
        for fut in as_completed(futures):
            out[futures[fut]] = fut.result()
            tick()
    return out


def _on_ray(tasks: list[Task], address: str, jobs: int, tick: Tick) -> dict[str, dict]:
    """One Ray task per simulation (1 CPU each). ``address`` is a cluster's address, ``auto``
    for the one this machine belongs to, or ``local`` to start a private local instance with
    ``jobs`` CPUs (shut down afterwards)."""
    import ray

    started = False
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(num_cpus=max(1, jobs), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=address, log_to_driver=False)
        except ConnectionError as e:
            msg = f"cannot reach Ray at {address!r}: {e}"
            raise ConfigError("laminar plan", "--address", msg) from None
        started = True
    try:
        remote = ray.remote(num_cpus=1)(evaluate)
        refs = {remote.remote(cfg): key for key, cfg in tasks}
        pending = list(refs)
        out = {}
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                out[refs[ref]] = ray.get(ref)
                tick()
        return out
    finally:
        if started:
            ray.shutdown()
