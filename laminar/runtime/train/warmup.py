"""Short supervised warm-up, so RL starts from a model that sometimes succeeds.

Warm-up prompts come from a separate stream of the task generator than RL prompts. The result is
cached under ``runtime.warmup.cache_dir`` keyed by a hash of everything that determines it
(model shape, task, warm-up settings, seed, max response length): both modes of a benchmark, and
repeated runs, start from the very same weights without paying for the warm-up again. That
cache is the tiny model's only, and only rank 0 reads it: the trainer's other ranks get rank 0's
weights by a broadcast over their process group (:func:`share_warm_model`), so no rank depends
on a file of another machine. A pretrained model skips the warm-up unless
``runtime.warmup.steps`` asks for one; then every rank trains its shards on the same batches
(FSDP averages equal gradients: the update is one process's), and nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from laminar.config import LaminarConfig
from laminar.runtime.records import Traj
from laminar.runtime.tasks.base import WARMUP_STREAM
from laminar.runtime.tasks.make import env_task, make_task
from laminar.runtime.train.grpo import build_batch, sft_loss


def warmup_key(cfg: LaminarConfig) -> str:
    """Hash of every setting the warmed-up weights depend on."""
    rt = cfg.runtime
    data = {
        "model": rt.model.model_dump(),
        "task": rt.task.model_dump(),
        "task_file": _file_digest(getattr(rt.task, "path", None) or _env_file(rt.task)),
        "warmup": rt.warmup.model_dump(exclude={"cache_dir"}),
        "seed": cfg.seed,
        "max_response_len": cfg.workload.max_response_len,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _env_file(task: Any) -> str | None:
    """An environment's module file (its code shapes the warm-up's targets)."""
    env = env_task(task)
    if env is None:
        return None
    from laminar.runtime.envs.load import module_file

    return module_file(env)


def _file_digest(path: str | None) -> str | None:
    """SHA-256 of a task file (its rows shape the warm-up as much as its name)."""
    if path is None:
        return None
    return hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()


def sft(model: Any, codec: Any, cfg: LaminarConfig) -> float:
    """Train ``model`` on exact answers for ``warmup.steps`` steps; return the last loss."""
    import torch

    from laminar.runtime.models.codec import prompt_tokens

    w = cfg.runtime.warmup
    gen = make_task(
        cfg.runtime.task, seed=cfg.seed, max_answer_len=cfg.workload.max_response_len - 1
    )
    opt = torch.optim.AdamW(model.parameters(), lr=w.lr, weight_decay=0.0)
    loss = float("nan")
    model.train()
    for step in range(w.steps):
        trajs = []
        for i in range(w.batch):
            p = gen.prompt(step * w.batch + i, stream=WARMUP_STREAM)
            ids = tuple(prompt_tokens(codec, p, cfg.workload.max_prompt_len))
            answer = [*codec.encode(gen.target(p)), codec.eos_id]
            trajs.append(Traj("w", p.prompt_id, 0, ids, -1, len(answer), tokens=answer))
        batch = build_batch(trajs, [0.0] * len(trajs), codec.pad_id)
        for g in opt.param_groups:  # linear warm-up of the learning rate over 10% of steps
            g["lr"] = w.lr * min(1.0, (step + 1) / max(1, w.steps // 10))
        out = sft_loss(model, batch, cfg.runtime.grpo.logprob_chunk_tokens)
        opt.zero_grad()
        out.backward()
        opt.step()
        loss = float(out.item())
    model.eval()
    return loss


def _teaches(cfg: LaminarConfig) -> bool:
    """Whether the task has targets to teach: an environment without ``target(sample)``
    has none, and its run starts RL from the model as it is (docs/environments.md)."""
    env = env_task(cfg.runtime.task)
    if env is None:
        return True
    from laminar.runtime.envs.load import load_env

    return callable(getattr(load_env(env, cfg.seed), "target", None))


def warm_model(model: Any, codec: Any, cfg: LaminarConfig) -> dict:
    """Warm ``model`` up in place, from the cache when it holds this configuration (the tiny
    model only: a pretrained model's warm-up is run every time, and never written to disk)."""
    if cfg.runtime.warmup.steps == 0 or not _teaches(cfg):
        return {"warmup_s": 0.0, "warmup_cached": False, "warmup_loss": float("nan")}
    if cfg.runtime.model.type != "tiny":
        t = time.perf_counter()
        loss = sft(model, codec, cfg)
        return {"warmup_s": time.perf_counter() - t, "warmup_cached": False, "warmup_loss": loss}
    return _warm_cached(model, codec, cfg)


def share_warm_model(model: Any, info: dict, device: str) -> None:
    """Every rank: rank 0's weights (``info``: what its :func:`warm_model` answered) to every
    other rank, one tensor at a time over the default process group, when rank 0 warmed up or
    read its cache; nothing otherwise. On cuda each tensor crosses through the device (NCCL)."""
    import torch.distributed as dist

    if dist.get_world_size() == 1:
        return
    flag = [bool(info.get("warmup_cached")) or info.get("warmup_s", 0.0) > 0.0]
    dist.broadcast_object_list(flag, src=0)
    if not flag[0]:
        return
    seen: set[int] = set()
    for tensor in model.state_dict().values():
        if tensor.data_ptr() in seen:  # tied: the same storage once
            continue
        seen.add(tensor.data_ptr())
        buf = tensor.to(device)
        dist.broadcast(buf, src=0)
        if buf is not tensor:
            tensor.copy_(buf)


def _warm_cached(model: Any, codec: Any, cfg: LaminarConfig) -> dict:
    from safetensors.torch import load_file, save_file

    from laminar.runtime.train.export import tied_names

    path = Path(cfg.runtime.warmup.cache_dir).expanduser() / f"{warmup_key(cfg)}.safetensors"
    t = time.perf_counter()
    tied = tied_names(model)  # aliases of another tensor: safetensors stores each once
    if path.exists():
        missing, unexpected = model.load_state_dict(load_file(str(path)), strict=False)
        if set(missing) - tied or unexpected:
            raise RuntimeError(
                f"warm-up cache {path} does not fit the model: {missing}, {unexpected}"
            )
        return {"warmup_s": time.perf_counter() - t, "warmup_cached": True, "warmup_loss": None}
    loss = sft(model, codec, cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        state = {k: v.contiguous() for k, v in model.state_dict().items() if k not in tied}
        save_file(state, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return {"warmup_s": time.perf_counter() - t, "warmup_cached": False, "warmup_loss": loss}
