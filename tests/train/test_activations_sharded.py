"""Activation checkpointing and chunked log-probs through the sharded trainer (issue 27, item 2):
two gloo ranks (FSDP2 ``fully_shard`` per decoder layer and the root), a tiny Llama with tied
and with untied embeddings, KL reference on. ``runtime.grpo.activation_checkpointing`` and
``runtime.grpo.logprob_chunk_tokens`` change neither the step's loss nor any gradient:
``rtol=1e-5, atol=1e-6`` against the plain step (full logits, every activation kept)."""

from __future__ import annotations

import random

import pytest
import torch

from laminar.config import load_config
from laminar.runtime.records import Traj
from tests.train.dist import run_ranks

pytestmark = pytest.mark.slow  # spawns two torch.distributed processes (~15 s idle, more loaded)

RTOL, ATOL = 1e-5, 1e-6
VARIANTS = [(False, 0), (True, 0), (False, 5), (True, 5)]  # (checkpointing, chunk tokens)


def _cfg(ckpt: bool, chunk: int) -> dict:
    return load_config(
        preset="tiny-cpu",
        overrides=[
            "runtime.warmup.steps=0",
            "runtime.trainer_cpus=''",
            "runtime.grpo.kl_coef=0.1",
            "runtime.grpo.max_grad_norm=1000000",
            "runtime.grpo.micro_batch_tokens=48",  # several micro-batches over the two ranks
            f"runtime.grpo.activation_checkpointing={str(ckpt).lower()}",
            f"runtime.grpo.logprob_chunk_tokens={chunk}",
        ],
    ).model_dump(mode="json")


def _data(vocab: int = 49, n: int = 5):
    rng = random.Random(0)
    trajs, adv = [], []
    for i in range(n):
        prompt = tuple(rng.randrange(3, vocab) for _ in range(rng.randint(3, 6)))
        toks = [rng.randrange(3, vocab) for _ in range(rng.randint(1, 14))]
        lps = [-rng.uniform(0.5, 4.0) for _ in toks]
        trajs.append(Traj(f"t{i}", i, 0, prompt, 0, 32, tokens=toks, logprobs=lps))
        adv.append(rng.uniform(-1.0, 1.0))
    return trajs, adv


def _steps(rank, world, init, cfgs, work_dir, tied_cases):
    """Every (tied, variant): one GRPO step's metrics and full gradients."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from laminar.runtime.models import tinymodel
    from laminar.runtime.train.ranks import TrainerRank, rank_plan

    trajs, adv = _data()
    lengths = [len(t.prompt_ids) + len(t.tokens) for t in trajs]
    out = []
    for tied in tied_cases:
        for i, cfg in enumerate(cfgs):
            r = TrainerRank(cfg, work_dir, rank, world)
            if not dist.is_initialized():
                r.join(init, threads=1)
            kw = tinymodel.llama_config(layers=2, hidden=64, max_positions=64)
            kw["tie_word_embeddings"] = tied
            r.model = tinymodel.build_model(kw, seed=5)
            r.codec = SimpleNamespace(pad_id=0)
            r.prepare()
            plan = rank_plan(lengths, world, cfg["runtime"]["grpo"]["micro_batch_tokens"])
            metrics = r.train_step((trajs, adv), plan[rank])
            grads = {
                n: p.grad.full_tensor().clone()
                for n, p in r.model.named_parameters()
                if p.grad is not None
            }
            out.append((tied, i, metrics, grads))
    return out


def test_checkpointing_and_chunking_keep_the_sharded_step(tmp_path):
    from laminar.runtime.train.trainer import combine_metrics

    cfgs = [_cfg(c, k) for c, k in VARIANTS]
    parts = run_ranks(2, _steps, cfgs, str(tmp_path), [False, True], timeout_s=300)
    rank0, rank1 = parts
    for tied in (False, True):
        rows = {i: (m0, g) for (t, i, m0, g) in rank0 if t == tied}
        other = {i: m1 for (t, i, m1, _) in rank1 if t == tied}
        loss = {i: combine_metrics([rows[i][0], other[i]], 0.1)["loss"] for i in rows}
        want_g = {k: torch.from_numpy(v) for k, v in rows[0][1].items()}
        names = set(want_g)
        assert ("lm_head.weight" in names) is not tied  # a tied head is the embedding
        assert len(names) == 2 * 9 + 1 + (1 if tied else 2)
        for i in range(1, len(VARIANTS)):
            assert loss[i] == pytest.approx(loss[0], rel=RTOL, abs=ATOL), (tied, VARIANTS[i])
            got = {k: torch.from_numpy(v) for k, v in rows[i][1].items()}
            assert got.keys() == want_g.keys()
            for k in got:
                torch.testing.assert_close(
                    got[k], want_g[k], rtol=RTOL, atol=ATOL, msg=f"{k} {tied} {VARIANTS[i]}"
                )
