"""The trainer memory estimate (``laminar.specs.trainmemory``, as the runtime's start-up check
computes it: ``laminar.specs.runfit``) bounds the measured peak of a real CPU step from above,
within a factor of 2, on three small shapes (checkpointing on and off, 1 and 2 ranks, the KL
reference). Measured: a rank's peak resident memory over loading, the step and the optimizer,
less what the process held before the weights (torch and transformers imported, the process
group joined, the model built on the meta device), which the estimate's fixed reserve must
cover too."""

from __future__ import annotations

import os

import pytest

from laminar.runtime.models.localmodel import make_model_dir
from laminar.runtime.train.local import pretrained_config
from laminar.runtime.train.peakmem import MALLOC_ENV
from laminar.specs.runfit import CPU_RANK_RESERVE_BYTES, runtime_trainer_memory
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # spawns torch.distributed processes, steps of thousands of tokens

FACTOR = 2.0

SHAPES = [  # (model shape, tokens a micro-batch, checkpointing, ranks, kl_coef)
    (dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
          num_key_value_heads=2, vocab_size=16384), 2048, True, 1, 0.0),
    (dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=3, num_attention_heads=6,
          num_key_value_heads=2, vocab_size=8192), 2048, False, 1, 0.0),
    (dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
          num_key_value_heads=2, vocab_size=16384, tie_word_embeddings=False), 1536, True, 2,
     0.05),
]  # fmt: skip


def _step(rank, world, init, cfg, work_dir, tokens):
    from laminar.runtime.train import peakmem
    from laminar.runtime.train.local import full_batch
    from laminar.runtime.train.ranks import TrainerRank, rank_plan

    r = TrainerRank(cfg, work_dir, rank, world)
    r.join(init, threads=2)
    r.build()  # the model on the meta device: imports, tokenizer, process group, no weights
    base = peakmem.rss()
    r.prepare()
    batch = full_batch(tokens, world, seed=rank)  # one full micro-batch for every rank
    plan = rank_plan([tokens] * world, world, tokens)
    r.train_step(batch, plan[rank])
    return {"base": base, "peak": peakmem.peak()}


@pytest.mark.parametrize("case", range(len(SHAPES)))
def test_estimate_bounds_the_measured_peak_of_a_cpu_step(tmp_path, case):
    shape, tokens, ckpt, ranks, kl = SHAPES[case]
    model = make_model_dir(tmp_path / "m", seed=0, max_positions=tokens, **shape)
    cfg = pretrained_config(model, ranks=ranks, tokens=tokens, ckpt=ckpt, kl_coef=kl)
    est = runtime_trainer_memory(cfg)
    os.environ.update(MALLOC_ENV)
    try:
        outs = run_ranks(ranks, _step, cfg.model_dump(mode="json"), str(tmp_path / "w"), tokens,
                         timeout_s=600)  # fmt: skip
    finally:
        for k in MALLOC_ENV:
            os.environ.pop(k, None)
    for out in outs:
        assert out["base"] <= CPU_RANK_RESERVE_BYTES  # the reserve covers a bare rank
        grew = out["peak"] - out["base"]
        model_part = est.total - est.reserve
        print(f"case {case}: measured {grew / 2**20:.0f} MiB, estimated {model_part / 2**20:.0f}")
        assert grew <= model_part <= FACTOR * grew, (grew, est)
