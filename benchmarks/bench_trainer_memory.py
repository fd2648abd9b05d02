"""Trainer memory on CPU ranks, measured beside what ``laminar.specs.trainmemory`` predicts.

A random-weight Qwen2.5-0.5B-shaped model (494M parameters, bf16 safetensors, generated here:
``laminar.runtime.models.localmodel``) is loaded by 1, 2 and 4 trainer ranks (plain processes,
``laminar.runtime.train.local``), each sharding it on the meta device and reading its own rows
(``laminar.runtime.train.shardload``). Per rank: the fixed overhead (a process with torch
imported and its process group, and with the model built on the meta device), the peak growth
while loading against its shard plus the largest single tensor, and the training state after
one optimizer step (weights, gradients, AdamW states) against the estimate. Then the peak
memory of one step at a 4K-token sequence with and without activation checkpointing, above
the states the rank holds, for models of the same layer shapes with ``--act-layers`` layers
(24: the whole 0.5B model, ~19 GiB without checkpointing), against the estimate; and how much
the 4K-token sequence raises the forward + backward peak over a 64-token step's (what grows
with the sequence: activations and the log-prob chunk).

    .venv/bin/python benchmarks/bench_trainer_memory.py            # ~20 min on 2 cores
    .venv/bin/python benchmarks/bench_trainer_memory.py --ranks --act-layers 6 24  # activations
    .venv/bin/python benchmarks/bench_trainer_memory.py --shape small --ranks 1 2  # a smoke run

Processes run with ``MALLOC_MMAP_THRESHOLD_=65536`` so that freed tensors leave resident
memory (``laminar.runtime.train.peakmem``); peaks are ``VmHWM``, reset between phases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from laminar.config import LaminarConfig, load_config
from laminar.runtime.train.local import full_batch, pretrained_config, run_ranks
from laminar.runtime.train.peakmem import MALLOC_ENV
from laminar.specs.runfit import runtime_model_spec, runtime_trainer_memory

SHAPES = {
    "qwen2.5-0.5b": {"shape": "qwen2.5-0.5b"},
    "small": dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=2, vocab_size=32768,
                  tie_word_embeddings=True),
}  # fmt: skip
MiB = 2**20
SHORT_TOKENS = 64  # the short step whose peak is subtracted: what does not grow with length


def _bare(rank, world, init):
    """A process with torch imported (and nothing else of ours)."""
    from laminar.runtime.train import peakmem

    return {"rss": peakmem.rss()}


def _load_and_step(rank, world, init, cfg, work_dir, tokens):
    import torch

    from laminar.runtime.train import peakmem
    from laminar.runtime.train.ranks import TrainerRank, rank_plan

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=max(1, 2 // world))
    joined = peakmem.rss()
    r.build()  # on the meta device
    built = peakmem.rss()
    peakmem.reset_peak()
    t = time.perf_counter()
    info = r.prepare()
    load_s = time.perf_counter() - t
    load_peak = peakmem.peak() - built
    shard = sum(p.to_local().numel() * 4 for p in r.model.parameters())
    largest = max(p.numel() * 4 for p in r.model.parameters())
    trajs, adv = full_batch(tokens, world)
    plan = rank_plan([tokens] * world, world, tokens)
    peakmem.reset_peak()
    r.train_step((trajs, adv), plan[rank])
    torch.distributed.barrier()
    return {
        "joined": joined, "built": built, "load_peak": load_peak, "load_s": load_s,
        "shard": shard, "largest": largest, "bytes_read": info["load"]["bytes_read"],
        "states": peakmem.rss() - built, "step_peak": peakmem.peak() - built,
    }  # fmt: skip


def _activations(rank, world, init, cfg, work_dir, tokens):
    from laminar.runtime.train import peakmem
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=2)
    r.build()
    r.prepare()
    small, adv = full_batch(SHORT_TOKENS, 1)
    r.train_step((small, adv), [[0]])  # AdamW states exist from here on
    marks: list[int] = []  # the peak of forward and backward: read as the optimizer starts
    opt_step = r.opt.step
    r.opt.step = lambda *a, **k: (marks.append(peakmem.peak()), opt_step(*a, **k))[1]

    def step(n: int) -> tuple[int, int]:
        trajs, adv = full_batch(n, 1)
        held = peakmem.rss()
        peakmem.reset_peak()
        r.train_step((trajs, adv), [[0]])
        return marks[-1] - held, peakmem.peak() - held

    short_fb, short = step(SHORT_TOKENS)  # what a step holds whatever its length
    t = time.perf_counter()
    fb, over = step(tokens)
    # forward + backward of the long step less the short one's: what grows with the sequence
    # (the gradients, re-made every step, and the gathered groups cancel out)
    return {"step_over_states": over, "short_step_over_states": short,
            "fwd_bwd_over_states": fb, "short_fwd_bwd_over_states": short_fb,
            "activations": fb - short_fb, "step_s": time.perf_counter() - t}  # fmt: skip


def _model(root: Path, name: str, **extra) -> Path:
    from laminar.runtime.models.localmodel import make_model_dir

    out = root / name
    if not (out / "config.json").exists():
        make_model_dir(out, seed=0, dtype="bfloat16", max_positions=8192, **extra)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    p.add_argument("--ranks", type=int, nargs="*", default=[1, 2, 4],
                   help="rank counts of the loading runs (none: activations only)")
    p.add_argument("--act-tokens", type=int, default=4096)
    p.add_argument("--act-layers", type=int, nargs="+", default=[6, 12],
                   help="decoder layers of the activation runs' models (same layer shapes)")
    p.add_argument("--models", default="/tmp/laminar-bench-trainer-memory")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    os.environ.update(MALLOC_ENV)  # the ranks inherit it
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = Path(args.models)
    t0 = time.perf_counter()
    model = _model(root, args.shape, **SHAPES[args.shape])
    spec = runtime_model_spec(load_config(preset="tiny-cpu", overrides=[
        f"runtime.model={{type: pretrained, path: {model}}}"]))  # fmt: skip
    print(f"model: {model} ({spec.total_params / 1e6:.0f}M params, made in "
          f"{time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    result: dict = {"model": str(model), "params": spec.total_params, "ranks": {}}
    bare = run_ranks(1, _bare)[0]["rss"]
    result["bare_torch_rss"] = bare
    step_tokens = 64
    for n in args.ranks:
        cfg = pretrained_config(model, ranks=n, tokens=step_tokens).model_dump(mode="json")
        est = runtime_trainer_memory(LaminarConfig.model_validate(cfg))
        outs = run_ranks(n, _load_and_step, cfg, str(root / f"work{n}"), step_tokens,
                         timeout_s=1800)
        result["ranks"][n] = {"measured": outs, "predicted": {
            "shard": est.weights, "states": est.states, "unsharded": est.unsharded - est.reserve,
            "reserve": est.reserve}}  # fmt: skip
        print(f"{n} ranks: done ({time.perf_counter() - t0:.0f} s)", flush=True)
    result["activations"] = {}
    for layers in args.act_layers:
        act_model = _model(root, f"{args.shape}-{layers}l",
                           **{**SHAPES[args.shape], "num_hidden_layers": layers})  # fmt: skip
        for ckpt in (True, False):
            cfg = pretrained_config(act_model, ranks=1, tokens=args.act_tokens, ckpt=ckpt)
            cfg = cfg.model_dump(mode="json")
            est = runtime_trainer_memory(LaminarConfig.model_validate(cfg))
            short = runtime_trainer_memory(LaminarConfig.model_validate(
                pretrained_config(act_model, ranks=1, tokens=SHORT_TOKENS, ckpt=ckpt)))
            out = run_ranks(1, _activations, cfg, str(root / "work-act"), args.act_tokens,
                            timeout_s=3600)[0]  # fmt: skip
            result["activations"][f"{layers}/{ckpt}"] = {
                "layers": layers, "ckpt": ckpt, "measured": out, "predicted": {
                    "activations": est.activations, "logprobs": est.logprobs,
                    "gathered": est.gathered,
                    "grows": est.activations + est.logprobs
                    - short.activations - short.logprobs}}  # fmt: skip
            print(f"activations, {layers} layers, checkpointing={ckpt}: done "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    result["total_s"] = time.perf_counter() - t0
    print(report(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return 0


def report(r: dict) -> str:
    """The tables of benchmarks/RESULTS.md."""
    m = lambda x: f"{x / MiB:,.0f}"  # noqa: E731
    lines = [
        f"Model: {r['params'] / 1e6:.0f}M parameters (bf16 file, fp32 master weights). "
        f"Fixed overhead: a process with torch imported {m(r['bare_torch_rss'])} MiB.",
        "",
        "| ranks | rank fixed overhead: joined / model on meta (MiB) | load peak growth, max rank "
        "(MiB) | shard + largest tensor (MiB) | predicted shard (MiB) | read per rank (MiB) "
        "| training state after a step (MiB) | predicted states (MiB) | load s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in sorted(r["ranks"].items(), key=lambda kv: int(kv[0])):
        ms, pr = row["measured"], row["predicted"]
        top = max(ms, key=lambda x: x["load_peak"])
        lines.append(
            f"| {n} | {m(top['joined'])} / {m(top['built'])} | {m(top['load_peak'])} | "
            f"{m(top['shard'] + top['largest'])} | {m(pr['shard'])} | {m(top['bytes_read'])} | "
            f"{m(max(x['states'] for x in ms))} | {m(pr['states'])} | {top['load_s']:.1f} |"
        )
    lines += [
        "",
        "| layers | activation checkpointing | step peak above the held states, measured (MiB) "
        "| predicted: activations + log-prob chunk + gathered groups (MiB) | activations: "
        f"forward + backward peak of the 4K-token step less a {SHORT_TOKENS}-token step's, "
        "measured (MiB) | predicted (MiB) "
        "| with / without checkpointing | step s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    acts = r["activations"]
    for row in acts.values():
        pr, ms = row["predicted"], row["measured"]
        pred = pr["activations"] + pr["logprobs"] + pr["gathered"]
        off = acts.get(f"{row['layers']}/False")
        ratio = (f"{ms['activations'] / off['measured']['activations']:.2f}"
                 if row["ckpt"] and off else "")  # fmt: skip
        lines.append(f"| {row['layers']} | {row['ckpt']} | {m(ms['step_over_states'])} | "
                     f"{m(pred)} ({m(pr['activations'])} + {m(pr['logprobs'])} + "
                     f"{m(pr['gathered'])}) | {m(ms['activations'])} | {m(pr['grows'])} | "
                     f"{ratio} | {ms['step_s']:.0f} |")  # fmt: skip
    lines.append(f"\nTotal {r['total_s']:.0f} s.")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
