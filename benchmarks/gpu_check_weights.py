"""The correctness parts of ``benchmarks/gpu_check.py``: does a published weight version reach
the engine, and does the engine then compute what the trainer computes?

``weights`` (one device): a random-weight Qwen2 directory made here (tiny on CPU, Qwen2.5-0.5B
shaped on a GPU; nothing downloaded) is loaded by one trainer rank (``TrainerRank``: FSDP2, the
runtime's own) and started in the runtime's engine (``VllmEngine`` behind ``LoadRecorder``, as a
rollout actor wraps it). Weights travel the runtime's path: the rank's streamed export into a
``ShmWeightStore`` version, and ``RolloutWorker.load_latest`` (the rollout's own version logic)
loading it with ``collective_rpc("reload_weights")``. The trainer's weights are then perturbed
(multiplicative noise, every tensor) and published as version 1. Checks (``CHECKS`` below):
the engine's log-probs of fixed prompt + response tokens (vLLM ``prompt_logprobs``) equal the
trainer's (``grpo.token_logprobs`` on the same weights) within ``LOGPROB_TOL`` before and after
the update, and after it differ from the old weights' by at least ``MIN_CHANGE`` (a skipped load
is caught); the version the rollout serves and the directory it loaded are version 1; the
importance ratio ``exp(trainer - behaviour)`` on tokens the engine samples at staleness 0, as
``grpo.grpo_loss`` computes it, is 1 within ``RATIO_TOL`` (each token) and ``RATIO_MEAN_TOL``
(its mean). Sampling runs at temperature 1: vLLM reports the raw model's log-probabilities
(``logprobs_mode=raw_logprobs``), which is the sampling distribution only then.

``multigpu`` (>= 2 GPUs only; never run on one GPU or CPU, so untested until a machine has two):
two NCCL trainer ranks take a GRPO step, perturb their shards and export version 1 together;
a TP = 2 engine loads it and its log-probs must equal the ranks' within the bf16 tolerance.

``LAMINAR_GPU_CHECK_BREAK=skip-load`` makes every engine weight load a no-op (the rollout still
records the version as loaded): the check must then fail, naming the log-prob check.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from pathlib import Path
from typing import Any

BREAK_ENV = "LAMINAR_GPU_CHECK_BREAK"
RESULT_ENV = "LAMINAR_GPU_CHECK_RESULT"
# max |engine - trainer| log-prob over every fixed token (nats), by the weights' dtype: fp32 on
# CPU agrees to float reduction order (measured 1e-6); bf16 on a GPU: vLLM's kernels against
# FSDP2's bf16 compute, both on the same bf16-rounded weights (logits carry ~2^-8 relative error)
LOGPROB_TOL = {"float32": 1e-3, "bfloat16": 1e-1}
# importance ratio exp(trainer - behaviour) at staleness 0: each sampled token, and the mean
RATIO_TOL = {"float32": 2e-3, "bfloat16": 1.5e-1}
RATIO_MEAN_TOL = {"float32": 1e-3, "bfloat16": 2e-2}
# the update must move some fixed token's log-prob by more than this (nats): 5x the tolerance
# at least, so a skipped load cannot pass (measured on the tiny CPU model: 0.59)
MIN_CHANGE = {"float32": 0.25, "bfloat16": 0.5}
NOISE = 0.5  # perturbation: every weight times (1 + NOISE * N(0, 1))
SHUTDOWN_S = 20.0  # the engine's grace to stop (the runtime's 60 s would eat the part's limit)
TEXTS = (
    ("What is 12 plus 7?", "The answer is \\boxed{19}."),
    ("Compute 6 times 8.", "So the result is 48."),
    ("What is 40 plus 35?", "40 plus 35 is 75, so \\boxed{75}."),
)


def check(name: str, ok: bool, value: Any, bound: str) -> dict:
    """One named assertion of the check: what was measured and the bound it had to meet."""
    return {"name": name, "ok": bool(ok), "value": value, "bound": bound}


def early_result(result: dict) -> None:
    """Write the part's result now (``gpu_check.py`` names the file in :data:`RESULT_ENV`): a
    part killed at its limit while it tears down still reports what it found."""
    path = os.environ.get(RESULT_ENV)
    if path:
        tmp = f"{path}.tmp"
        Path(tmp).write_text(json.dumps(result))
        os.replace(tmp, path)


def _break_loads() -> bool:
    """Apply ``LAMINAR_GPU_CHECK_BREAK=skip-load``: engine weight loads do nothing."""
    if os.environ.get(BREAK_ENV, "") != "skip-load":
        return False
    from laminar.runtime.rollout.vllm_engine import VllmEngine

    async def skip(self: Any, path: str) -> None:
        return None

    VllmEngine.load_weights = skip  # type: ignore[method-assign]
    return True


def _model_dir(out: Path, name: str, dry: bool) -> Path:
    from laminar.runtime.models.localmodel import make_model_dir

    path = out / name
    if (path / "model.safetensors").exists():
        return path
    return make_model_dir(
        path, dtype="float32" if dry else "bfloat16", device="cpu" if dry else "cuda",
        **({} if dry else {"shape": "qwen2.5-0.5b"}),
    )  # fmt: skip


def _config(model_dir: Path, out: Path, dry: bool) -> dict:
    from gpu_check_parts import train_config

    cfg = train_config(model_dir, out, "sync", dry, steps=1).model_dump(mode="json")
    cfg["runtime"]["grpo"]["micro_batch_tokens"] = 512 if dry else 8192
    return cfg


def fixed_sequences(model_dir: Path) -> list[tuple[list[int], int]]:
    """(prompt + response ids, prompt length) of ``TEXTS``, through the model's chat template."""
    from laminar.runtime.models.codec import make_codec, prompt_ids

    codec = make_codec("pretrained", str(model_dir))
    out = []
    for question, answer in TEXTS:
        p = prompt_ids(codec, question)
        out.append(([*p, *codec.encode(answer)], len(p)))
    return out


def trainer_logprobs(rank: Any, seqs: list[list[int]]) -> list[list[float]]:
    """The trainer's log-prob of every token after the first (``grpo.token_logprobs``)."""
    import torch

    from laminar.runtime.records import Traj
    from laminar.runtime.train.grpo import build_batch, token_logprobs

    trajs = [Traj(f"f{i}", i, 0, tuple(s[:1]), 0, len(s), tokens=list(s[1:])) for i, s in
             enumerate(seqs)]  # fmt: skip
    batch = build_batch(trajs, [0.0] * len(trajs), rank.codec.pad_id).to(rank.device)
    with torch.no_grad():
        lp = token_logprobs(rank.model, batch.input_ids, batch.attention_mask).float().cpu()
    return [lp[i, : len(s) - 1].tolist() for i, s in enumerate(seqs)]


def perturb(model: Any, seed: int) -> None:
    """Every weight (this rank's shard) times ``1 + NOISE * N(0, 1)``, seeded."""
    import torch

    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            local = p.to_local() if hasattr(p, "to_local") else p
            g = torch.Generator(device="cpu").manual_seed(seed * 7919 + i)
            noise = torch.randn(local.shape, generator=g).to(local.device, local.dtype)
            local.mul_(1.0 + NOISE * noise)


def publish(rank: Any, version: int) -> None:
    """The trainer's publish on one rank: take the version file, write the rows, commit."""
    path = rank.begin_export(version)
    rank.export(path)
    rank.commit_export(version, path)


async def engine_logprobs(engine: Any, seqs: list[list[int]], tag: str) -> list[list[float]]:
    """The engine's log-prob of every token after the first (vLLM ``prompt_logprobs``)."""
    from vllm import SamplingParams

    llm = engine._llm  # the AsyncLLM inside laminar's VllmEngine
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, detokenize=False)

    async def one(i: int, s: list[int]) -> list[float]:
        final = None
        async for o in llm.generate({"prompt_token_ids": s}, params, f"{tag}-{i}"):
            final = o
        entries = final.prompt_logprobs[1:]
        return [float(e[tok].logprob) for tok, e in zip(s[1:], entries, strict=True)]

    return list(await asyncio.gather(*(one(i, s) for i, s in enumerate(seqs))))


def max_abs_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


async def sample(engine: Any, prompts: list[list[int]], max_tokens: int) -> list[tuple]:
    """Tokens the engine samples for each prompt, with their behaviour log-probs."""

    async def one(i: int, p: list[int]) -> tuple[list[int], list[float]]:
        toks: list[int] = []
        lps: list[float] = []
        async for d in engine.generate(f"sample-{i}", p, max_tokens):
            toks += d.token_ids
            lps += d.logprobs
        return toks, lps

    return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))


def ratio_check(rank: Any, prompts: list[list[int]], samples: list[tuple], dtype: str) -> dict:
    """The importance ratio at staleness 0, as the GRPO loss computes it."""
    import torch

    from laminar.runtime.records import Traj
    from laminar.runtime.train.grpo import build_batch, grpo_loss, token_logprobs

    trajs = [
        Traj(f"s{i}", i, 0, tuple(p), 1, len(toks), tokens=list(toks), logprobs=list(lps))
        for i, (p, (toks, lps)) in enumerate(zip(prompts, samples, strict=True))
    ]
    batch = build_batch(trajs, [1.0] * len(trajs), rank.codec.pad_id).to(rank.device)
    with torch.no_grad():
        new = token_logprobs(rank.model, batch.input_ids, batch.attention_mask)
        _, metrics = grpo_loss(new, batch, clip_eps=0.2)
    mask = batch.loss_mask.bool()
    ratio = torch.exp((new - batch.old_logprobs).float())[mask]
    worst = float((ratio - 1).abs().max())
    mean = float(metrics["ratio_mean"])
    ok = math.isfinite(worst) and worst <= RATIO_TOL[dtype]
    ok = ok and abs(mean - 1) <= RATIO_MEAN_TOL[dtype]
    return check(
        "importance ratio at staleness 0",
        ok,
        {"max_abs_ratio_minus_1": worst, "ratio_mean": mean, "tokens": int(mask.sum())},
        f"max |r-1| <= {RATIO_TOL[dtype]:g}, |mean-1| <= {RATIO_MEAN_TOL[dtype]:g}",
    )


def _engine_spec(model_dir: Path, info: dict, dry: bool, tp: int = 1) -> Any:
    from laminar.runtime.rollout.engine import EngineSpec

    return EngineSpec(
        model_dir=str(model_dir), device="cpu" if dry else "cuda", max_batch=16,
        max_model_len=256 if dry else 1024, eos_token_id=info["eos_id"], temperature=1.0,
        seed=0, dtype=info["dtype"], gpu_memory_fraction=0.3, tensor_parallel_size=tp,
        stop_token_ids=tuple(info["stop_ids"]),
    )  # fmt: skip


def _worker(engine: Any, cfg: dict, model_dir: Path, store: Any) -> Any:
    """A ``RolloutWorker`` on ``engine`` holding the weight path (what ``attach`` sets, without
    a job's pools: this part streams nothing)."""
    from laminar.config import LaminarConfig
    from laminar.runtime.rollout.worker import RolloutWorker

    c = LaminarConfig.model_validate(cfg)
    w = RolloutWorker(
        "check", engine, task=c.runtime.task, seed=0, max_response_len=32, max_batch=16,
        samples_per_prompt=4, model_type="pretrained", model_dir=str(model_dir),
        flush_interval_s=0.5,
    )  # fmt: skip
    w.weights, w.version, w.trajs, w.pins, w.loads, w.t0_s = store, -1, {}, 0, [], time.time()
    return w


def part_weights(out: Path, dry: bool, limit_s: float = 0) -> dict:
    """One trainer rank and one engine: the update reaches the engine and matches (above)."""
    return asyncio.run(_weights(out, dry))


async def _weights(out: Path, dry: bool) -> dict:
    from laminar.runtime.rollout.node import LoadRecorder
    from laminar.runtime.rollout.vllm_engine import VllmEngine
    from laminar.runtime.train.local import free_init
    from laminar.runtime.train.ranks import TrainerRank
    from laminar.runtime.weights import ShmWeightStore

    broken = _break_loads()
    t0 = time.perf_counter()
    model_dir = _model_dir(out, "weights-model", dry)
    cfg = _config(model_dir, out, dry)
    rank = TrainerRank(cfg, str(out / "weights-work"), 0, 1)
    rank.join(free_init())
    info = rank.build()
    rank.prepare()
    dtype = info["dtype"]
    store = ShmWeightStore(out / "weights-store", info["config_json"])
    rank.attach(store)
    engine = LoadRecorder(VllmEngine(_engine_spec(model_dir, info, dry)))
    worker = _worker(engine, cfg, model_dir, store)
    timings: dict[str, float] = {"setup_s": time.perf_counter() - t0}
    try:
        t = time.perf_counter()
        await worker.start()
        timings["engine_start_s"] = time.perf_counter() - t
        checks = await _update_checks(rank, worker, engine, store, model_dir, dtype, timings)
        result = {"dtype": dtype, "params": info["params"], "broken": broken, "checks": checks,
                  **timings}  # fmt: skip
        early_result(result)  # the checks count even if the teardown runs past the limit
    finally:  # a short grace: what a slow exit leaves, gpu_check.py's sweep removes
        await engine.inner.shutdown(timeout_s=SHUTDOWN_S)
        rank.close()
        store.close()
    return result


async def _update_checks(rank, worker, engine, store, model_dir, dtype, timings) -> list[dict]:
    tol = LOGPROB_TOL[dtype]
    fixed = fixed_sequences(model_dir)
    seqs = [s for s, _ in fixed]
    publish(rank, 0)  # as the trainer's warm-up publishes version 0
    await worker.load_latest()
    old_trainer = trainer_logprobs(rank, seqs)
    old_engine = await engine_logprobs(engine.inner, seqs, "v0")
    t = time.perf_counter()
    perturb(rank.model, seed=1)
    publish(rank, 1)
    timings["publish_s"] = time.perf_counter() - t
    t = time.perf_counter()
    served = await worker.load_latest()
    timings["load_s"] = time.perf_counter() - t
    new_trainer = trainer_logprobs(rank, seqs)
    new_engine = await engine_logprobs(engine.inner, seqs, "v1")
    moved = max_abs_diff(new_trainer, old_trainer)
    latest = store.latest()
    v1_dir = latest[1] if latest and latest[0] == 1 else None
    manifest = json.loads((Path(engine.loaded[-1]) / "laminar-version.json").read_text())
    checks = [
        check("engine = trainer before the update", max_abs_diff(old_engine, old_trainer) <= tol,
              max_abs_diff(old_engine, old_trainer), f"max |dlogp| <= {tol:g}"),
        check("the update moves the trainer's log-probs", moved >= MIN_CHANGE[dtype], moved,
              f"max |dlogp| >= {MIN_CHANGE[dtype]:g}"),
        check("engine = trainer after the update", max_abs_diff(new_engine, new_trainer) <= tol,
              max_abs_diff(new_engine, new_trainer), f"max |dlogp| <= {tol:g}"),
        check("engine no longer serves the old weights",
              max_abs_diff(new_engine, old_trainer) >= MIN_CHANGE[dtype] / 2,
              max_abs_diff(new_engine, old_trainer), f"max |dlogp| >= {MIN_CHANGE[dtype] / 2:g}"),
        check("served version = published version",
              served == worker.version == 1 and engine.loaded[-1] == v1_dir
              and manifest.get("version") == 1,
              {"served": served, "loaded": Path(engine.loaded[-1]).name,
               "manifest": manifest.get("version")}, "1, v0000000001, 1"),
    ]  # fmt: skip
    prompts = [s[:n] for s, n in fixed]
    samples = await sample(engine, prompts, max_tokens=24)
    checks.append(ratio_check(rank, prompts, samples, dtype))
    return checks


# -- two GPUs: NCCL ranks and a TP = 2 engine ---------------------------------------------------


def _mg_rank(rank_i: int, world: int, init: str, cfg: dict, work: str, store_root: str,
             seqs: list[list[int]]) -> dict:  # fmt: skip
    """One of two NCCL ranks: a GRPO step, a perturbation, the joint export of version 1, and
    the log-probs of the fixed tokens (an FSDP forward over both ranks)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank_i)  # before CUDA starts in this process
    import torch.distributed as dist

    from laminar.runtime.records import Traj
    from laminar.runtime.train.ranks import TrainerRank, rank_plan
    from laminar.runtime.weights import ShmWeightStore

    rank = TrainerRank(cfg, work, rank_i, world)
    rank.join(init)
    info = rank.build()
    rank.prepare()
    trajs = [Traj(f"t{i}", i, 0, tuple(s[:4]), 0, len(s), tokens=list(s[4:]),
                  logprobs=[-1.0] * (len(s) - 4)) for i, s in enumerate(seqs)]  # fmt: skip
    plan = rank_plan([len(s) for s in seqs], world, 8192)[rank_i]
    step = rank.train_step((trajs, [1.0, -1.0, 0.5][: len(trajs)]), plan)
    perturb(rank.model, seed=1 + rank_i)
    store = ShmWeightStore(store_root, info["config_json"]) if rank_i == 0 else None
    box = [rank.begin_export(1, store) if rank_i == 0 else None]
    dist.broadcast_object_list(box, src=0)
    rank.export(box[0])
    dist.barrier()
    if rank_i == 0:
        rank.commit_export(1, box[0])
    dist.barrier()
    lps = trainer_logprobs(rank, seqs)
    rank.close()
    return {"logprobs": lps, "grad_norm": step["grad_norm"], **info}


def part_multigpu(out: Path, dry: bool, limit_s: float = 0) -> dict:
    """Two NCCL ranks publish; a TP = 2 engine loads and must agree (>= 2 GPUs only)."""
    import torch

    if dry or torch.cuda.device_count() < 2:
        return {"skipped": "needs 2 GPUs", "checks": []}
    return asyncio.run(_multigpu(out))


async def _multigpu(out: Path) -> dict:
    from laminar.runtime.rollout.vllm_engine import VllmEngine
    from laminar.runtime.train.local import run_ranks
    from laminar.runtime.weights import ShmWeightStore

    _break_loads()
    model_dir = _model_dir(out, "weights-model", dry=False)
    cfg = _config(model_dir, out, dry=False)
    cfg["runtime"]["trainer_ranks"] = 2
    seqs = [s for s, _ in fixed_sequences(model_dir)]
    root = out / "mg-store"
    r0 = run_ranks(2, _mg_rank, cfg, str(out / "mg-work"), str(root), seqs, timeout_s=120)[0]
    store = ShmWeightStore(root, r0["config_json"])
    version, path = store.latest()
    engine = VllmEngine(_engine_spec(model_dir, r0, dry=False, tp=2))
    try:
        await engine.start()
        await engine.load_weights(path)
        lps = await engine_logprobs(engine, seqs, "tp2")
    finally:
        await engine.shutdown(timeout_s=SHUTDOWN_S)
        store.close()
    diff = max_abs_diff(lps, r0["logprobs"])
    tol = LOGPROB_TOL["bfloat16"]
    return {"checks": [
        check("2 NCCL ranks -> TP=2 engine: log-probs agree", diff <= tol and version == 1,
              {"max_abs_dlogp": diff, "version": version}, f"<= {tol:g}, version 1"),
    ], "grad_norm": r0["grad_norm"]}  # fmt: skip
