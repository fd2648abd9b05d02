"""Trainer ranks as plain local processes (torch.multiprocessing, gloo), without Ray: for tests
and benchmarks that exercise the ranks themselves."""

from __future__ import annotations

import random
import socket
import traceback
from pathlib import Path
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


PROMPT_TOKENS = 16
"""Prompt tokens of a :func:`full_batch` trajectory (``workload.max_prompt_len`` of
:func:`pretrained_config`)."""


def pretrained_config(
    model: str | Path, *, ranks: int, tokens: int, ckpt: bool = True, kl_coef: float = 0.0
) -> Any:
    """The ``tiny-cpu`` config (a :class:`~laminar.config.LaminarConfig`) whose ``ranks``
    unpinned trainer ranks train the pretrained model directory ``model`` on micro-batches of
    ``tokens`` tokens, one :func:`full_batch` trajectory each, with activation checkpointing
    ``ckpt`` and KL coefficient ``kl_coef`` (the trainer-memory benchmark and test)."""
    from laminar.config import load_config

    return load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: pretrained, path: {model}}}",
            "runtime.trainer_cpus=''",
            f"runtime.trainer_ranks={ranks}",
            f"runtime.grpo.kl_coef={kl_coef}",
            f"runtime.grpo.activation_checkpointing={str(ckpt).lower()}",
            f"runtime.grpo.micro_batch_tokens={tokens}",
            f"workload.max_prompt_len={PROMPT_TOKENS}",
            f"workload.max_response_len={tokens - PROMPT_TOKENS}",
        ],
    )


def full_batch(tokens: int, n: int, seed: int = 0) -> tuple[list, list[float]]:
    """``n`` trajectories of ``tokens`` tokens each (a :data:`PROMPT_TOKENS`-token prompt, random
    response tokens of log-prob -1) and their advantages, +1 and -1 alternately."""
    from laminar.runtime.records import Traj

    rng = random.Random(seed)
    prompt = tuple(range(3, 3 + PROMPT_TOKENS))
    trajs = []
    for i in range(n):
        toks = [rng.randrange(3, 500) for _ in range(tokens - PROMPT_TOKENS)]
        trajs.append(
            Traj(f"t{i}", i, 0, prompt, 0, tokens, tokens=toks, logprobs=[-1.0] * len(toks))
        )
    return trajs, [1.0 if i % 2 == 0 else -1.0 for i in range(n)]


def empty_version_file(rank: Any) -> str:
    """In ``rank``'s process (a ``TrainerRank``; through ``__ray_call__`` on Ray): an empty
    version file of its export layout's size in its work directory, for a test or benchmark
    that exports without a weight path."""
    path = rank.work_dir / "version.st"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(rank.layout().nbytes)
    return str(path)
