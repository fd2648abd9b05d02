"""Activation memory of the trainer (issue 27, item 2): chunked log-probs and activation
checkpointing change what is kept, not what is computed.

In one process, on a tiny Llama (untied and tied embeddings): the GRPO loss and every
parameter's gradient with log-probs taken ``chunk_tokens`` at a time from the final hidden
states (a chunk size that does not divide the token count, and one larger than it) and with
Hugging Face gradient checkpointing equal those of the plain forward (full logits, every
activation kept) to ``rtol=1e-5, atol=1e-6`` (fp32 on CPU: only the summation order differs).
The same through FSDP2 on gloo ranks is in ``test_activations_sharded.py``.
"""

from __future__ import annotations

import random

import pytest
import torch

from laminar.runtime.records import Traj
from laminar.runtime.train.grpo import build_batch, grpo_loss, sft_loss, token_logprobs

RTOL, ATOL = 1e-5, 1e-6
VOCAB = 49


def _model(tied: bool):
    from laminar.runtime.models import tinymodel

    kw = tinymodel.llama_config(layers=2, hidden=64, max_positions=64)
    kw["tie_word_embeddings"] = tied
    return tinymodel.build_model(kw, seed=3)


def _batch(n: int = 5, seed: int = 0):
    rng = random.Random(seed)
    trajs, adv = [], []
    for i in range(n):
        prompt = tuple(rng.randrange(3, VOCAB) for _ in range(rng.randint(2, 6)))
        toks = [rng.randrange(3, VOCAB) for _ in range(rng.randint(1, 12))]
        lps = [-rng.uniform(0.5, 4.0) for _ in toks]
        trajs.append(Traj(f"t{i}", i, 0, prompt, 0, 16, tokens=toks, logprobs=lps))
        adv.append(rng.uniform(-1.0, 1.0))
    return build_batch(trajs, adv, pad_id=0)


def _step(model, batch, *, chunk: int, ckpt: bool, kl: bool = False):
    """Loss, masked log-probs and gradients of one GRPO micro-step; checks that checkpointing
    recomputes the decoder layers' forward in the backward."""
    calls, layer = [], model.model.layers[0]
    own = layer.forward

    def counted(*args, **kwargs):  # (a forward hook does not see the recompute)
        calls.append(1)
        return own(*args, **kwargs)

    layer.forward = counted
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    model.train()
    model.zero_grad(set_to_none=True)
    new = token_logprobs(
        model, batch.input_ids, batch.attention_mask, mask=batch.loss_mask, chunk_tokens=chunk
    )
    forwards = len(calls)  # the policy's; the reference's (no gradients) recomputes nothing
    ref = None
    if kl:
        with torch.no_grad():
            ref = token_logprobs(
                model, batch.input_ids, batch.attention_mask, mask=batch.loss_mask,
                chunk_tokens=chunk,
            ).add(0.1)  # fmt: skip
    loss, _ = grpo_loss(new, batch, 0.2, ref_logprobs=ref, kl_coef=0.1 if kl else 0.0)
    before = len(calls)
    loss.backward()
    del layer.forward
    assert len(calls) - before == (forwards if ckpt else 0)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), (new * batch.loss_mask).detach(), grads


@pytest.mark.parametrize("tied", [False, True])
def test_chunked_checkpointed_step_equals_the_plain_one(tied):
    model, batch = _model(tied), _batch()
    n = batch.response_tokens
    assert n > 7  # several chunks of 7, the last one short
    want_loss, want_lp, want_g = _step(model, batch, chunk=0, ckpt=False, kl=True)
    assert set(want_g) == {n for n, _ in model.named_parameters()}
    for chunk, ckpt in [(7, False), (0, True), (7, True), (10_000, True)]:
        loss, lp, g = _step(model, batch, chunk=chunk, ckpt=ckpt, kl=True)
        torch.testing.assert_close(loss, want_loss, rtol=RTOL, atol=ATOL)
        torch.testing.assert_close(lp, want_lp, rtol=RTOL, atol=ATOL)
        assert g.keys() == want_g.keys()
        for name in g:
            torch.testing.assert_close(g[name], want_g[name], rtol=RTOL, atol=ATOL, msg=name)
    if tied:
        assert model.lm_head.weight is model.model.embed_tokens.weight


def test_unmasked_log_probs_and_the_head_restored():
    """Without a mask every position is computed; the model's head is its own afterwards."""
    model, batch = _model(False), _batch(3, seed=1)
    model.eval()
    with torch.no_grad():
        full = token_logprobs(model, batch.input_ids, batch.attention_mask)
        chunked = token_logprobs(model, batch.input_ids, batch.attention_mask, chunk_tokens=4)
        logits = model(input_ids=batch.input_ids).logits
    torch.testing.assert_close(chunked, full, rtol=RTOL, atol=ATOL)
    assert logits.shape[-1] == VOCAB  # lm_head answers logits again
    assert "forward" not in model.lm_head.__dict__


def test_warmup_loss_chunked_equals_plain():
    model, batch = _model(True), _batch(4, seed=2)
    a = sft_loss(model, batch)
    b = sft_loss(model, batch, chunk_tokens=5)
    torch.testing.assert_close(b, a, rtol=RTOL, atol=ATOL)


def test_an_empty_selection_still_joins_the_backward():
    """A micro-batch whose mask selects nothing: log-probs all 0, a backward that reaches the
    head's weight (FSDP's collectives must run the same on every rank)."""
    model, batch = _model(False), _batch(2)
    batch.loss_mask.zero_()
    model.train()
    lp = token_logprobs(model, batch.input_ids, batch.attention_mask, mask=batch.loss_mask,
                        chunk_tokens=8)  # fmt: skip
    assert float(lp.detach().abs().sum()) == 0.0 and lp.requires_grad
    lp.sum().backward()
    assert model.lm_head.weight.grad is not None


def _saved_bytes(model, ids, *, ckpt: bool, chunk: int) -> int:
    """Bytes of the tensors autograd keeps for the backward of the log-probs (parameters
    left out; inside a checkpoint autograd keeps nothing but the checkpoint's inputs)."""
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_disable()
    model.train()
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
        return t

    mask = torch.ones(ids.shape[0], ids.shape[1] - 1)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        token_logprobs(model, ids, torch.ones_like(ids), mask=mask, chunk_tokens=chunk)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in seen.items() if ptr not in params)


def test_checkpointing_and_chunks_keep_far_less_for_the_backward():
    """A 4096-token vocabulary at 256 tokens: the logits dominate what a plain step keeps;
    chunks of 64 and checkpointed layers keep under a tenth of it (measured at 512 tokens, an
    8192 vocabulary and 4 layers: 29.6 MiB plain, 0.9 MiB with both)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=4096, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=1, num_key_value_heads=1, head_dim=64, max_position_embeddings=512,
    )  # fmt: skip
    model, ids = LlamaForCausalLM(cfg), torch.randint(3, 4096, (1, 256))
    plain = _saved_bytes(model, ids, ckpt=False, chunk=0)
    layers = _saved_bytes(model, ids, ckpt=True, chunk=0)
    chunks = _saved_bytes(model, ids, ckpt=False, chunk=64)
    both = _saved_bytes(model, ids, ckpt=True, chunk=64)
    assert plain > 255 * 4096 * 4  # the fp32 log-softmax of every token, at least
    assert layers < plain and chunks < plain
    assert both < plain / 10, (plain, layers, chunks, both)


@pytest.mark.parametrize("bias", [True, False])
def test_the_chunked_function_equals_log_softmax_with_a_biased_head(bias):
    """``_ChunkedLogp`` (one chunk of logits at a time, their gradient made in place) against
    autograd through the full log-softmax, on a head with a bias too (Hugging Face heads have
    none, a user's model may)."""
    from laminar.runtime.train.grpo import _ChunkedLogp

    gen = torch.Generator().manual_seed(0)
    rows = torch.randn(37, 16, generator=gen, requires_grad=True)
    weight = torch.randn(50, 16, generator=gen, requires_grad=True)
    b = torch.randn(50, generator=gen, requires_grad=True) if bias else None
    tgt = torch.randint(0, 50, (37,), generator=gen)
    g = torch.randn(37, generator=gen)
    inputs = [rows, weight] + ([b] if bias else [])
    got = _ChunkedLogp.apply(rows, weight, b, tgt, 8)  # 5 chunks, the last one short
    logits = torch.nn.functional.linear(rows, weight, b)
    want = torch.log_softmax(logits, -1).gather(-1, tgt[:, None]).squeeze(-1)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    for a, w in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(want, inputs, g),
                    strict=True):  # fmt: skip
        torch.testing.assert_close(a, w, rtol=RTOL, atol=1e-5)
