"""The measuring parts of ``benchmarks/gpu_check.py``, each run in a child process of its own
(``gpu_check.py --part NAME``): vLLM decode and prefill, one FSDP step, ``laminar train`` in
both modes, a relay publish, the ``gpu``-marked tests. Each returns plain JSON-able data; a
part that asserts something returns ``checks`` (``gpu_check_weights.check``). The correctness
parts (weights, multigpu) are in ``gpu_check_weights.py``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# decode grid; points with more than ``prefill_cap`` prompt tokens are skipped (their prefill
# alone would take seconds on a 7B model, twice per point)
# and ``repeats`` tries of each timed call, the least kept (one late call on a shared CPU once
# made full - first negative: a zero decode step)
GPU = {"batches": [1, 16, 64, 256], "prompt_lens": [512, 4096], "steps": 64, "max_len": 8192,
       "repeats": 2}  # fmt: skip
GPU["prefill_cap"] = 1 << 17
DRY = {"batches": [1, 4], "prompt_lens": [32, 96], "steps": 8, "max_len": 256, "prefill_cap": 512,
       "repeats": 3}  # fmt: skip
LAMINAR = [sys.executable, "-c", "import sys; from laminar.cli import main; sys.exit(main())"]


# -- parts (each runs in a child process: ``--part NAME``) ----------------------------------


def part_decode(out: Path, dry: bool, limit_s: float = 0, shape: str = "qwen2.5-7b") -> dict:
    """vLLM step times on a random-weight model of ``shape``."""
    from vllm import LLM, SamplingParams

    from laminar.runtime.models.localmodel import make_model_dir

    grid = DRY if dry else GPU
    model_dir = make_model_dir(
        out / f"decode-{shape}",
        weights=False,
        dtype="float32" if dry else "bfloat16",
        max_positions=grid["max_len"],
        **({} if dry else {"shape": shape}),
    )
    llm = LLM(
        model=str(model_dir),
        load_format="dummy",
        dtype="float32" if dry else "bfloat16",
        max_model_len=grid["max_len"],
        max_num_seqs=max(grid["batches"]),
        max_num_batched_tokens=max(8192, grid["max_len"]),
        gpu_memory_utilization=0.85,
        enforce_eager=dry,
        skip_tokenizer_init=True,
        enable_prefix_caching=False,
        seed=0,
    )
    cache = llm.llm_engine.vllm_config.cache_config
    kv_capacity = int(cache.num_gpu_blocks or 0) * int(cache.block_size)

    def timed(batch: int, prompt_len: int, max_tokens: int) -> float:
        prompts = [
            {"prompt_token_ids": [(7 * i + j) % 400 + 10 for j in range(prompt_len)]}
            for i in range(batch)
        ]
        params = SamplingParams(
            max_tokens=max_tokens, ignore_eos=True, temperature=0.0, detokenize=False
        )
        t = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        return time.perf_counter() - t

    timed(2, 16, 4)  # warm-up
    decode, prefill = [], []
    steps = grid["steps"]
    for prompt_len in grid["prompt_lens"]:
        for batch in grid["batches"]:
            if (
                batch * (prompt_len + steps) > kv_capacity
                or batch * prompt_len > grid["prefill_cap"]
            ):
                continue  # would preempt (not a decode step any more), or too long a prefill
            first = min(timed(batch, prompt_len, 1) for _ in range(grid["repeats"]))
            full = min(timed(batch, prompt_len, steps) for _ in range(grid["repeats"]))
            step_s = max(1e-6, (full - first) / (steps - 1))
            kv = batch * (prompt_len + steps / 2)
            decode.append(
                {"batch": batch, "prompt_len": prompt_len, "kv_tokens": kv, "step_s": step_s}
            )
            prefill.append(
                {
                    "batch": batch,
                    "prompt_len": prompt_len,
                    "tokens": batch * prompt_len,
                    "prefill_s": first,
                }
            )
    return {"shape": shape, "kv_capacity_tokens": kv_capacity, "decode": decode, "prefill": prefill}


def part_fsdp(out: Path, dry: bool, limit_s: float = 0) -> dict:
    """Two GRPO steps of one trainer rank (FSDP2); the second is timed."""
    import random
    import socket

    from laminar.runtime.models.localmodel import make_model_dir
    from laminar.runtime.records import Traj
    from laminar.runtime.train.ranks import TrainerRank, rank_plan

    shape = None if dry else "qwen2.5-1.5b"
    device = "cpu" if dry else "cuda"
    model_dir = make_model_dir(
        out / "fsdp-model", dtype="float32" if dry else "bfloat16", device=device,
        **({} if dry else {"shape": shape}),
    )  # fmt: skip
    cfg = train_config(model_dir, out, "sync", dry, steps=1).model_dump(mode="json")
    cfg["runtime"]["grpo"]["micro_batch_tokens"] = 512 if dry else 8192
    rank = TrainerRank(cfg, str(out / "fsdp-work"), 0, 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rank.join(f"tcp://127.0.0.1:{port}")
    params = rank.build()["params"]
    rank.prepare()
    rng = random.Random(0)
    n, length = (8, 64) if dry else (16, 1024)
    trajs = [
        Traj(f"t{i}", i, 0, tuple(rng.randrange(10, 400) for _ in range(length // 4)), 0,
             length, tokens=[rng.randrange(10, 400) for _ in range(length - length // 4)],
             logprobs=[-1.0] * (length - length // 4))
        for i in range(n)
    ]  # fmt: skip
    adv = [rng.uniform(-1, 1) for _ in trajs]
    plan = rank_plan([length] * n, 1, cfg["runtime"]["grpo"]["micro_batch_tokens"])[0]
    rank.train_step((trajs, adv), plan)  # warm-up: allocator, kernels
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    t = time.perf_counter()
    metrics = rank.train_step((trajs, adv), plan)
    if device == "cuda":
        torch.cuda.synchronize()
    step_s = time.perf_counter() - t
    tokens = n * length
    rank.close()
    return {
        "shape": shape or "tiny", "params": params, "tokens": tokens, "step_s": step_s,
        "tokens_per_s": tokens / step_s, "flop_per_s": 8 * params * tokens / step_s,
        "loss": metrics.get("pg_loss"),
    }  # fmt: skip


def train_config(model_dir: Path, out: Path, mode: str, dry: bool, steps: int) -> Any:
    from laminar.config import load_config
    from laminar.runtime.models.localmodel import arithmetic_jsonl

    task = arithmetic_jsonl(out / "task.jsonl", n=256)
    return load_config(preset="tiny-cpu", overrides=train_sets(model_dir, task, mode, dry, steps))


def train_sets(model_dir: Path, task: Path, mode: str, dry: bool, steps: int) -> list[str]:
    sets = [
        f"runtime.model={{type: pretrained, path: {model_dir}}}",
        f"runtime.task={{type: jsonl, path: {task}}}",
        f"runtime.mode={mode}", "runtime.rollouts=1", "runtime.eval_prompts=0",
        "runtime.warmup.steps=0", f"workload.steps={steps}", "runtime.trainer_cpus=''",
        "runtime.cpu_binds=[]", "workload.max_prompt_len=64",
    ]  # fmt: skip
    if dry:
        return [*sets, "workload.prompts_per_step=2", "workload.samples_per_prompt=4",
                "workload.max_response_len=24", "runtime.max_batch=16"]  # fmt: skip
    return [*sets, "runtime.device=cuda", "runtime.gpu_share=0.5",
            "runtime.gpu_memory_fraction=0.35", "workload.prompts_per_step=16",
            "workload.samples_per_prompt=8", "workload.max_response_len=512",
            "runtime.max_batch=256"]  # fmt: skip


def part_train(out: Path, dry: bool, limit_s: float) -> dict:
    """``laminar train`` in both modes through the pretrained path; their summaries. Each run
    gets half of ``limit_s`` and its own process group, killed whole when it runs over."""
    from gpu_check_weights import check

    from laminar.runtime.models.localmodel import arithmetic_jsonl, make_model_dir

    t0 = time.perf_counter()
    model_dir = make_model_dir(
        out / "train-model", dtype="float32" if dry else "bfloat16",
        device="cpu" if dry else "cuda", **({} if dry else {"shape": "qwen2.5-0.5b"}),
    )  # fmt: skip
    task = arithmetic_jsonl(out / "task.jsonl", n=256)
    runs: dict[str, Any] = {}
    checks = []
    for i, mode in enumerate(("laminar", "sync")):
        left = limit_s - (time.perf_counter() - t0) - 5
        summary = _train_run(out, model_dir, task, mode, dry, left / (2 - i))
        keep = ("steps", "wall_s", "train_tokens_per_s", "gen_tokens_per_s",
                "trajectories_lost", "trajectories_duplicated")  # fmt: skip
        runs[mode] = {k: summary.get(k) for k in keep}
        lost, dup = summary.get("trajectories_lost"), summary.get("trajectories_duplicated")
        checks.append(
            check(
                f"laminar train ({mode}): nothing lost or duplicated",
                lost == 0 and dup == 0,
                {"lost": lost, "duplicated": dup},
                "0, 0",
            )
        )
    return {**runs, "checks": checks}


def _train_run(out: Path, model_dir: Path, task: Path, mode: str, dry: bool, limit_s: float):
    run_dir = out / f"train-{mode}"
    sets = train_sets(model_dir, task, mode, dry, steps=1 if dry else 3)
    cmd = [*LAMINAR, "train", "--preset", "tiny-cpu", "--no-progress", "--out", str(run_dir)]
    for s in sets:
        cmd += ["--set", s]
    # Ray's sockets live under the run's temp dir: a short one (the system's), which the run
    # removes at its end and gpu_check.py removes after a kill (its sessions.json names it)
    env = {**os.environ, "TMPDIR": os.environ.get("LAMINAR_GPU_CHECK_SYSTMP", "/tmp")}
    log = open(out / f"train-{mode}.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        rc = proc.wait(timeout=max(1.0, limit_s))
    except subprocess.TimeoutExpired:
        _stop_group(proc)
        msg = f"laminar train ({mode}) ran past {limit_s:.0f} s; its group killed"
        raise RuntimeError(msg) from None
    finally:
        log.close()
    if rc != 0:
        tail = (out / f"train-{mode}.log").read_text()[-3000:]
        raise RuntimeError(f"laminar train ({mode}) exit {rc}:\n{tail}")
    return json.loads((run_dir / "summary.json").read_text())


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the run's process group (a clean stop: engines shut down), SIGKILL it after
    ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what the clean stop left in the group


def part_publish(out: Path, dry: bool, limit_s: float = 0) -> dict:
    """The relay tier with 1.5B-sized weights (3 GiB, bf16; 7B's 15 GiB, three copies in
    /dev/shm, would not fit the part's time): actor stall and broadcast time."""
    nbytes = 64 << 20 if dry else 3 << 30
    mib = max(1, nbytes >> 20)
    res = out / "publish.json"
    cmd = [*LAMINAR, "bench", "relay", "--relays", "2", "--mbytes",
           str(mib), "--transport", "tcp", "--repeats", "1", "--out", str(res)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"laminar bench relay failed:\n{proc.stderr[-3000:]}")
    data = json.loads(res.read_text())
    return {"mbytes": mib, **{k: data.get(k) for k in ("actor_stall_s", "measured_s", "model_s")}}


def part_gpu_tests(out: Path, dry: bool, limit_s: float) -> dict:
    """``pytest -m gpu`` (the tests that need a CUDA GPU); none collected is no failure."""
    from gpu_check_weights import check

    if dry:
        return {"skipped": "CPU", "checks": []}
    # only the files that carry the marker: collecting the whole suite would take the limit
    files = sorted(str(f) for f in (ROOT / "tests").rglob("test_*.py")
                   if "mark.gpu" in f.read_text(errors="replace"))  # fmt: skip
    if not files:
        return {"skipped": "no test carries the gpu marker", "checks": []}
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
           f"--basetemp={out / 'pytest'}", *files]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        text, _ = proc.communicate(timeout=max(1.0, limit_s - 5))
    except subprocess.TimeoutExpired:
        _stop_group(proc, grace_s=2.0)
        msg = f"pytest -m gpu ran past {limit_s - 5:.0f} s; its group killed"
        raise RuntimeError(msg) from None
    last = text.strip().splitlines()[-1] if text.strip() else ""
    ok = proc.returncode in (0, 5)  # 5: no test collected
    return {"summary": last, "checks": [check("pytest -m gpu", ok, last, "passes")]}


PARTS = {"fsdp": part_fsdp, "train": part_train, "publish": part_publish,
         "gpu-tests": part_gpu_tests}  # fmt: skip
