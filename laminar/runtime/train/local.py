"""Trainer ranks as plain local processes (torch.multiprocessing, gloo), without Ray: for tests
and benchmarks that exercise the ranks themselves."""

from __future__ import annotations

import socket
import traceback
from typing import Any

import torch.multiprocessing as mp


def free_init() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _plain(x: Any) -> Any:
    """Tensors as numpy arrays: torch shares tensors through file descriptors that die with
    the process, numpy arrays pickle by value."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x)
    return x


def _entry(rank: int, world: int, init: str, fn: Any, args: tuple, out: Any) -> None:
    try:
        out.put((rank, _plain(fn(rank, world, init, *args))))
    except BaseException:
        out.put((rank, RuntimeError(traceback.format_exc())))
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(world: int, fn: Any, *args: Any, timeout_s: float = 120.0) -> list:
    """``fn(rank, world, init_method, *args)`` on ``world`` spawned processes; their results."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    init = free_init()
    procs = [
        ctx.Process(target=_entry, args=(r, world, init, fn, args, out)) for r in range(world)
    ]
    for p in procs:
        p.start()
    try:
        results = dict(out.get(timeout=timeout_s) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    for r in range(world):
        if isinstance(results[r], BaseException):
            raise results[r]
    return [results[r] for r in range(world)]
