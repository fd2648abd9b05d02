"""Sharded loading of a pretrained model (``runtime.train.shardload``): ranks build it on the
meta device and read only their own rows. The shards equal ``from_pretrained``'s weights (tied
and untied embeddings, bf16 files into fp32 master weights), the KL reference is built the same
way (and not at all at ``kl_coef=0``), a resume lets the DCP checkpoint fill the shards without
reading the files, and a rank's memory grows by its shard plus one tensor while it loads."""

from __future__ import annotations

import os

import pytest
import torch

from laminar.config import load_config
from laminar.runtime.models.localmodel import make_model_dir
from laminar.runtime.train.peakmem import MALLOC_ENV
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # spawns torch.distributed processes (~30 s)


def _cfg(model, kl_coef=0.0) -> dict:
    return load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: pretrained, path: {model}}}",
            "runtime.trainer_cpus=''",
            f"runtime.grpo.kl_coef={kl_coef}",
        ],
    ).model_dump(mode="json")


def _load(rank, world, init, cfg, work_dir, ckpt=None, save_to=None):
    from laminar.runtime.train import peakmem
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=1)
    r.build()
    before = peakmem.rss()
    peakmem.reset_peak()
    info = r.prepare(resume=ckpt is not None)
    grew = peakmem.peak() - before
    if ckpt is not None:
        r.load_checkpoint(ckpt)
    if save_to is not None:
        r.save_checkpoint(save_to, 3)

    def full(m):
        sd = m.state_dict()
        return {k: (getattr(v, "full_tensor", lambda v=v: v)()).clone() for k, v in sd.items()}

    shard = sum(p.to_local().numel() * 4 for p in r.model.parameters())
    return {
        "weights": full(r.model),
        "ref": None if r.ref_model is None else full(r.ref_model),
        "tied": r.model.lm_head.weight is r.model.model.embed_tokens.weight,
        "read": info.get("load"),
        "grew": grew,
        "shard": shard,
    }


def _expected(model_dir):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    return {k: v.clone() for k, v in m.state_dict().items()}


@pytest.mark.parametrize("tied", [True, False])
def test_two_ranks_load_their_shards_equal_to_from_pretrained(tmp_path, tied):
    model = make_model_dir(tmp_path / "m", seed=3, dtype="bfloat16", tie_word_embeddings=tied)
    want = _expected(model)
    outs = run_ranks(2, _load, _cfg(model, kl_coef=0.1), str(tmp_path / "w"), timeout_s=300)
    for out in outs:
        assert out["tied"] is tied
        assert set(out["weights"]) == set(want)
        for k, v in want.items():
            assert torch.equal(torch.as_tensor(out["weights"][k]), v), k
            assert torch.equal(torch.as_tensor(out["ref"][k]), v), k
        # each rank read about half the weights (bf16 rows; norms are split too)
        total = sum(v.numel() * 2 for k, v in want.items() if not (tied and k == "lm_head.weight"))
        assert 0.4 * total < out["read"]["bytes_read"] < 0.6 * total
    none = run_ranks(1, _load, _cfg(model, kl_coef=0.0), str(tmp_path / "w1"), timeout_s=300)
    assert none[0]["ref"] is None


def test_resume_fills_the_shards_from_the_checkpoint_without_reading_the_files(tmp_path):
    model = make_model_dir(tmp_path / "m", seed=3)
    other = make_model_dir(tmp_path / "o", seed=4)  # same shapes, other weights
    ckpts = tmp_path / "ckpt"
    run_ranks(2, _load, _cfg(other), str(tmp_path / "w0"), None, str(ckpts), timeout_s=300)
    outs = run_ranks(1, _load, _cfg(model), str(tmp_path / "w1"), str(ckpts), timeout_s=300)
    assert outs[0]["read"] is None  # the safetensors files were not read
    want = _expected(other)
    for k, v in want.items():
        assert torch.equal(torch.as_tensor(outs[0]["weights"][k]), v), k


def test_a_rank_grows_by_its_shard_and_one_tensor_while_it_loads(tmp_path):
    shape = dict(hidden_size=512, intermediate_size=2048, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=2, vocab_size=32768)  # fmt: skip
    model = make_model_dir(tmp_path / "m", seed=0, dtype="bfloat16", **shape)
    largest = 32768 * 512 * 4  # the embedding, fp32
    os.environ.update(MALLOC_ENV)  # the ranks inherit it: freed tensors leave resident memory
    try:
        grew = {}
        for world in (1, 2):
            outs = run_ranks(world, _load, _cfg(model), str(tmp_path / f"w{world}"), timeout_s=300)
            for out in outs:
                assert out["grew"] <= out["shard"] + largest + 48 * 2**20, (world, out)
            grew[world] = max(o["grew"] for o in outs)
    finally:
        for k in MALLOC_ENV:
            os.environ.pop(k, None)
    assert grew[2] < 0.75 * grew[1]


def _warm(rank, world, init, cfg, work_dir):
    from laminar.runtime.train.ranks import TrainerRank

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=1)
    r.build()
    info = r.prepare()
    full = {k: getattr(v, "full_tensor", lambda v=v: v)().clone()
            for k, v in r.model.state_dict().items()}  # fmt: skip
    ref = {k: getattr(v, "full_tensor", lambda v=v: v)().clone()
           for k, v in r.ref_model.state_dict().items()}  # fmt: skip
    return {"info": info, "weights": full, "ref": ref}


def test_a_pretrained_warm_up_runs_on_the_shards_of_every_rank(tmp_path):
    model = make_model_dir(tmp_path / "m", seed=3)
    cfg = load_config(
        preset="tiny-cpu",
        overrides=[
            f"runtime.model={{type: pretrained, path: {model}}}",
            "runtime.trainer_cpus=''",
            "runtime.grpo.kl_coef=0.1",
            "runtime.warmup.steps=2",
            "runtime.warmup.batch=4",
        ],
    ).model_dump(mode="json")
    one = run_ranks(1, _warm, cfg, str(tmp_path / "w1"), timeout_s=300)[0]
    two = run_ranks(2, _warm, cfg, str(tmp_path / "w2"), timeout_s=300)
    base = _expected(model)
    assert one["info"]["warmup_s"] > 0
    moved = [k for k in base if not torch.equal(torch.as_tensor(one["weights"][k]), base[k])]
    assert moved  # the warm-up changed the weights
    for out in two:  # the same update as one process, and the reference is the warmed model
        for k, v in one["weights"].items():
            torch.testing.assert_close(torch.as_tensor(out["weights"][k]), torch.as_tensor(v),
                                       rtol=1e-4, atol=1e-5)  # fmt: skip
            assert torch.equal(torch.as_tensor(out["ref"][k]), torch.as_tensor(out["weights"][k]))
