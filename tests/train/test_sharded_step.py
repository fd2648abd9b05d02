"""FSDP2 over gloo ranks: one GRPO step on 2 ranks equals the step on 1 rank (loss and updated
weights), and the streamed export of 2 ranks is byte-identical to ``safetensors.torch.save`` of
the full state dict. The ranks run as plain processes (no Ray)."""

from __future__ import annotations

import random
import struct

import pytest
import torch

from laminar.config import load_config
from laminar.runtime.records import Traj
from laminar.runtime.train.ranks import rank_plan
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # spawns torch.distributed processes (~20 s)


def _cfg(tmp_path, kl_coef: float):
    return load_config(
        preset="tiny-cpu",
        overrides=[
            "runtime.warmup.steps=0",
            "runtime.trainer_cpus=''",
            f"runtime.grpo.kl_coef={kl_coef}",
            "runtime.grpo.lr=0.01",
            "runtime.grpo.micro_batch_tokens=64",  # several micro-batches, uneven over ranks
        ],
    ).model_dump(mode="json")


def _data(vocab: int = 49, n: int = 7):
    rng = random.Random(0)
    trajs, adv = [], []
    for i in range(n):
        prompt = tuple(rng.randrange(3, vocab) for _ in range(rng.randint(3, 6)))
        toks = [rng.randrange(3, vocab) for _ in range(rng.randint(1, 20))]
        lps = [-rng.uniform(0.5, 4.0) for _ in toks]
        trajs.append(Traj(f"t{i}", i, 0, prompt, 0, 32, tokens=toks, logprobs=lps))
        adv.append(rng.uniform(-1.0, 1.0))
    return trajs, adv


def _step(rank, world, init, cfg, work_dir, out_path):
    from safetensors.torch import save

    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=1)
    r.build()
    r.prepare()
    trajs, adv = _data()
    lengths = [len(t.prompt_ids) + len(t.tokens) for t in trajs]
    plan = rank_plan(lengths, world, cfg["runtime"]["grpo"]["micro_batch_tokens"])
    metrics = r.train_step((trajs, adv), plan[rank])
    if rank == 0:
        with open(out_path, "wb") as f:
            f.truncate(r.layout().nbytes)
    import torch.distributed as dist

    dist.barrier()
    r.export(out_path)
    dist.barrier()
    sd = r.model.state_dict()
    full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in sd.items()}
    tied = r.model.config.tie_word_embeddings
    ref = save(
        {k: v for k, v in full.items() if not (tied and k == "lm_head.weight")},
        metadata={"format": "pt"},
    )
    return metrics, {k: v.clone() for k, v in full.items()}, ref


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_two_ranks_take_the_same_step_as_one(tmp_path, kl_coef):
    cfg = _cfg(tmp_path, kl_coef)
    (m1, w1, ref1), = run_ranks(1, _step, cfg, str(tmp_path / "a"), str(tmp_path / "one.st"))
    parts = run_ranks(2, _step, cfg, str(tmp_path / "b"), str(tmp_path / "two.st"))
    from laminar.runtime.train.trainer import combine_metrics

    m2 = combine_metrics([p[0] for p in parts], kl_coef)
    m1 = combine_metrics([m1], kl_coef)
    assert m2["loss"] == pytest.approx(m1["loss"], rel=1e-5, abs=1e-6)
    assert m2["grad_norm"] == pytest.approx(m1["grad_norm"], rel=1e-4)
    if kl_coef:
        assert "kl" in m2
    w2 = parts[0][1]
    assert w1.keys() == w2.keys()
    moved = 0.0
    for k in w1:
        got, want = torch.from_numpy(w2[k]), torch.from_numpy(w1[k])
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        moved = max(moved, float(abs(w2[k] - parts[1][1][k]).max()))
    assert moved == 0.0  # both ranks hold the same full weights
    # the streamed export: each rank wrote its own rows; the file is exactly what
    # safetensors.torch.save makes of the full state dict
    assert (tmp_path / "one.st").read_bytes() == ref1
    assert (tmp_path / "two.st").read_bytes() == parts[0][2]
    (n,) = struct.unpack("<Q", parts[0][2][:8])
    assert b"lm_head" in parts[0][2][8 : 8 + n]  # the tiny Llama does not tie its embeddings


def _sent(rank, world, init, cfg, work_dir, out_path):
    """Rank 1 as if on another machine: its rows travel over the process group in buckets,
    rank 0 writes its own and receives them (``RankGroup.export``'s path for such ranks)."""
    from safetensors.torch import save

    from laminar.runtime.train.export import receive_rows, send_rows
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=1)
    r.build()
    r.prepare()
    layout = r.layout()
    sd = r.model.state_dict()
    full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in sd.items()}
    if rank != 0:
        return send_rows(r.model, layout, dtype=None, dst=0, bucket_bytes=4096)
    with open(out_path, "wb") as f:
        f.truncate(layout.nbytes)
    r.export(out_path)
    written = receive_rows(out_path, layout.nbytes, [1])
    return save(full, metadata={"format": "pt"}), written


def test_rows_sent_over_the_process_group_from_another_machine_make_the_same_file(tmp_path):
    cfg = _cfg(tmp_path, 0.0)
    (ref, written), buckets = run_ranks(2, _sent, cfg, str(tmp_path / "w"), str(tmp_path / "b.st"))
    assert buckets > 1  # small buckets: several
    assert 0 < written < len(ref)  # rank 1's rows: part of the file, not all of it
    assert (tmp_path / "b.st").read_bytes() == ref
