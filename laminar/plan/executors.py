"""Where a plan's simulations run: in this process, in local worker processes, or on Ray.

Every backend takes the same list of (key, config) tasks and returns results by key, so the
plan's decisions never depend on which finished first: ``plan.csv`` is the same with
``--jobs 1``, ``--jobs N`` and ``--address``.

``--address`` is checked before any work (:func:`check_address`): its form, that Ray is
installed, and that something answers at the address (a TCP connection within a few
seconds), so a mistyped address is one error line, not minutes of Ray's retries. A worker or
a Ray cluster that dies under a plan is a :class:`BackendError` (exit 1), not a traceback.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from laminar.errors import ConfigError, LaminarError
from laminar.plan.evaluate import evaluate

Task = tuple[str, dict[str, Any]]
Tick = Callable[[], None]
CONNECT_TIMEOUT_S = 5.0
ADDRESS_FORMS = "'auto', 'local', HOST:PORT or ray://HOST:PORT"


class BackendError(LaminarError):
    """The machinery running the simulations failed (a worker died, Ray went away)."""

    exit_code = 1


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
    from concurrent.futures.process import BrokenProcessPool

    # fork where there is one: spawn would re-run the ``laminar`` console script (it has no
    # ``__main__`` guard) in every worker. The parent holds no lock a worker needs.
    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    out = {}
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
            futures = {pool.submit(evaluate, cfg): key for key, cfg in tasks}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
                tick()
    except BrokenProcessPool:
        raise BackendError(
            f"laminar plan: a worker process died ({len(out)} of {len(tasks)} simulations "
            "done; out of memory? try fewer --jobs)"
        ) from None
    return out


def check_address(address: str) -> None:
    """ConfigError unless ``address`` has a known form, Ray is installed and, for a cluster's
    address, something answers there (module docstring)."""
    if address != address.strip() or not address or len(address) > 512:
        raise ConfigError("laminar plan", "--address", f"expected {ADDRESS_FORMS}")
    if address not in ("auto", "local"):
        _host_port(address)  # its form, before Ray is imported (seconds)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("laminar plan", "--address", "needs Ray, which is not installed "
                          "(pip install ray)") from None  # fmt: skip
    if address == "local":
        return
    if address == "auto":
        found = _auto_address()
        if found is None:
            return  # Ray itself says there is none, at once
        address = found
    host, port = _host_port(address)
    _probe(address, host, port)


def _host_port(address: str) -> tuple[str, int]:
    text = address.removeprefix("ray://")
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError("laminar plan", "--address", f"{address!r:.80}: expected "
                          f"{ADDRESS_FORMS}")  # fmt: skip
    return host, int(port)


def _auto_address() -> str | None:
    """The address ``ray.init(address='auto')`` would connect to (None: Ray knows none, and
    will say so itself). Ray's own lookup: RAY_ADDRESS, then its current cluster file."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address("auto")
    except ConnectionError:
        raise ConfigError("laminar plan", "--address", "auto: no running Ray cluster found on "
                          "this machine (start one: ray start --head)") from None  # fmt: skip
    except Exception:  # Ray's internals moved: leave the lookup to ray.init
        return None


def _probe(address: str, host: str, port: int) -> None:
    """A TCP connection to ``host:port`` within CONNECT_TIMEOUT_S (name lookup included)."""
    failure: list[str] = [f"no answer within {CONNECT_TIMEOUT_S:.0f} s"]

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                failure.clear()
        except OSError as e:
            failure[:] = [e.strerror or str(e)]

    t = threading.Thread(target=connect, daemon=True)
    t.start()
    t.join(CONNECT_TIMEOUT_S + 1)
    if failure:
        raise ConfigError("laminar plan", "--address", f"cannot reach Ray at {address!r:.80}: "
                          f"{failure[0]}")  # fmt: skip


@contextlib.contextmanager
def _short_connect_retries():
    """Ray retries a silent cluster ~20 times, ~40 s each; a plan gives up after a few."""
    name = "RAY_gcs_server_port_wait_time_s"
    old = os.environ.get(name)
    if old is None:
        os.environ[name] = "3"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)


def _on_ray(tasks: list[Task], address: str, jobs: int, tick: Tick) -> dict[str, dict]:
    """One Ray task per simulation (1 CPU each). ``address`` is a cluster's address, ``auto``
    for the one this machine belongs to, or ``local`` to start a private local instance with
    ``jobs`` CPUs (shut down afterwards)."""
    import ray
    from ray.exceptions import RayError

    started = False
    if not ray.is_initialized():
        try:
            if address == "local":
                # address "local": a new instance, never one found on the machine
                ray.init(address="local", num_cpus=max(1, jobs), include_dashboard=False,
                         log_to_driver=False)  # fmt: skip
            else:
                with _short_connect_retries():
                    ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RayError, ValueError) as e:
            msg = f"cannot reach Ray at {address!r}: {str(e)[:300]}"
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
    except RayError as e:
        raise BackendError(f"laminar plan: Ray failed ({type(e).__name__}: "
                           f"{str(e)[:300]})") from None  # fmt: skip
    finally:
        if started:
            ray.shutdown()
