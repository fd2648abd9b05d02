"""The sharded trainer on CPU, side by side in one run (``benchmarks/RESULTS.md``, trainer).

Usage::

    PYTHONPATH=. python benchmarks/bench_trainer.py [--layers 4] [--hidden 512] [--repeats 3]

1. **step**: one GRPO step (FSDP2, gloo) with 1 rank x 1 thread, 1 rank x 2 threads and
   2 ranks x 1 thread each, on the same batch; median seconds of ``--repeats`` steps after one
   warm-up step;
2. **publish**: the streamed export (each rank writes its rows into the version file) against
   the old whole-blob path (full state dict -> ``safetensors.torch.save`` bytes -> the store,
   which hashed them): the trainer's stall, median of ``--repeats``;
3. **version change**: the largest event-loop stall of a rollout while a new version appears
   and is loaded, before (``latest()`` hashing the version on the loop, as rollouts did) and
   after (``RolloutWorker.load_latest``: a size check in a thread). Goal: <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from laminar.config import load_config
from laminar.runtime.records import Traj
from laminar.runtime.train.local import run_ranks
from laminar.runtime.train.ranks import rank_plan


def _cfg(layers: int, hidden: int) -> dict:
    return load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: tiny, layers: {layers}, hidden: {hidden}}}",
            "runtime.warmup.steps=0",
            "runtime.trainer_cpus=''",
            "runtime.grpo.micro_batch_tokens=2048",
        ],
    ).model_dump(mode="json")


def _batch(n: int = 32, seed: int = 0) -> tuple[list[Traj], list[float]]:
    rng = random.Random(seed)
    trajs = []
    for i in range(n):
        prompt = tuple(rng.randrange(3, 49) for _ in range(8))
        toks = [rng.randrange(3, 49) for _ in range(rng.randint(16, 120))]
        trajs.append(Traj(f"t{i}", i, 0, prompt, 0, 128, tokens=toks, logprobs=[-2.0] * len(toks)))
    return trajs, [rng.uniform(-1, 1) for _ in trajs]


def _ranks_job(rank, world, init, cfg, work, threads, repeats, store_root):
    import torch.distributed as dist

    from laminar.runtime.train.ranks import TrainerRank
    from laminar.runtime.weights import ShmWeightStore

    r = TrainerRank(cfg, work, rank, world)
    r.join(init, threads=threads)
    info = r.build()
    r.prepare()
    trajs, adv = _batch()
    plan = rank_plan([len(t.prompt_ids) + len(t.tokens) for t in trajs], world, 2048)[rank]
    r.train_step((trajs, adv), plan)  # warm-up
    steps, stalls = [], []
    store = ShmWeightStore(store_root, info["config_json"] or "{}", keep=1)
    for v in range(repeats):
        dist.barrier()
        t = time.perf_counter()
        r.train_step((trajs, adv), plan)
        steps.append(time.perf_counter() - t)
        dist.barrier()
        t = time.perf_counter()  # the streamed export: rank 0 begins, all write, rank 0 commits
        box = [r.begin_export(v, store) if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        r.export(box[0])
        dist.barrier()
        if rank == 0:
            r.commit_export(v, box[0])
        stalls.append(time.perf_counter() - t)
    out = {"step_s": statistics.median(steps), "publish_stall_s": statistics.median(stalls)}
    out["blob_stall_s"] = _blob_stalls(r.model, store_root + "-blob", info, repeats, rank)
    out["nbytes"] = r.layout().nbytes
    return out


def _blob_stalls(model, root: str, info: dict, repeats: int, rank: int) -> float:
    """The old path: gather the full state dict (every rank takes part), serialise it whole in
    one process, hand the bytes over (the store wrote them and their SHA-256): the stall the
    trainer had before streaming."""
    import torch.distributed as dist
    from safetensors.torch import save

    from laminar.runtime.weights import write_version_dir

    Path(root).mkdir(parents=True, exist_ok=True)
    stalls = []
    for v in range(repeats):
        dist.barrier()
        t = time.perf_counter()
        sd = model.state_dict()
        state = {
            k: (x.full_tensor() if hasattr(x, "full_tensor") else x).contiguous()
            for k, x in sd.items()
        }
        if rank == 0:
            write_version_dir(Path(root), v, save(state), info["config_json"] or "{}")
        dist.barrier()
        stalls.append(time.perf_counter() - t)
    return statistics.median(stalls)


def bench_steps(args: argparse.Namespace, tmp: Path) -> dict:
    cfg = _cfg(args.layers, args.hidden)
    out = {}
    for name, world, threads in (
        ("1 rank x 1 thread", 1, 1),
        ("1 rank x 2 threads", 1, 2),
        ("2 ranks x 1 thread", 2, 1),
    ):
        parts = run_ranks(
            world,
            _ranks_job,
            cfg,
            str(tmp / "w"),
            threads,
            args.repeats,
            str(tmp / f"store-{world}-{threads}"),
            timeout_s=900,
        )
        out[name] = {
            "step_s": max(p["step_s"] for p in parts),
            "publish_stall_s": max(p["publish_stall_s"] for p in parts),
            "blob_stall_s": max(p["blob_stall_s"] for p in parts),
            "nbytes": parts[0]["nbytes"],
        }
        print(json.dumps({name: out[name]}), flush=True)
    return out


class _NoEngine:
    async def load_weights(self, path: str) -> None:
        await asyncio.sleep(0)


async def _loop_stall(change, tick_s: float = 0.001) -> float:
    """Largest lateness of a 1 ms ticker on this loop while ``change()`` runs on it."""
    worst, stop = 0.0, False

    async def ticker() -> None:
        nonlocal worst
        while not stop:
            t = time.perf_counter()
            await asyncio.sleep(tick_s)
            worst = max(worst, time.perf_counter() - t - tick_s)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    worst = 0.0
    await change()
    await asyncio.sleep(0.02)
    stop = True
    await task
    return worst


def bench_version_change(args: argparse.Namespace, tmp: Path) -> dict:
    from laminar.runtime.rollout.worker import RolloutWorker
    from laminar.runtime.weights import ShmWeightStore

    blob = bytes(args.version_mbytes << 20)
    out: dict[str, list[float]] = {"before_s": [], "after_s": []}
    for rep in range(args.repeats):
        old = ShmWeightStore(tmp / f"old-{rep}", "{}", verify=True)  # what rollouts read before
        old.publish(0, blob)

        async def before(old=old) -> None:
            old.latest()  # on the loop, SHA-256 of the whole version (the old RolloutWorker)

        out["before_s"].append(asyncio.run(_loop_stall(before)))
        new = ShmWeightStore(tmp / f"new-{rep}", "{}")
        new.publish(0, blob)
        worker = RolloutWorker.__new__(RolloutWorker)  # only its weight-loading half
        worker.weights, worker.engine, worker.version = new, _NoEngine(), -1
        worker.trajs, worker.pins, worker.loads, worker.t0_s = {}, 0, [], time.time()

        async def after(worker=worker) -> None:
            assert await worker.load_latest() == 0

        out["after_s"].append(asyncio.run(_loop_stall(after)))
        old.close()
        new.close()
    res = {k: statistics.median(v) for k, v in out.items()}
    res["version_mbytes"] = args.version_mbytes
    print(json.dumps({"version change": res}), flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--version-mbytes", type=int, default=256)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as d:
        res = {
            "version_change": bench_version_change(args, Path(d)),
            "steps": bench_steps(args, Path(d)),
        }
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
