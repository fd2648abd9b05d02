"""GRPO in torch: group-normalised advantages, a clipped ratio objective, an optional KL term.

The ratio is taken against the *behaviour* policy, the log-probabilities the rollout reported
while sampling (vLLM's ``logprobs=0``), so a stale trajectory (generated with an older version,
paper §6) is corrected by the ratio and bounded by the clip. Losses are token means over the
batch (every response token weighs the same, as in DAPO), so long answers are not diluted.
A multi-turn trajectory's observations (its environment's messages between turns,
``Traj.obs_spans``) are context: masked out of the loss, only generated tokens are trained.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from laminar.policy.microbatch import micro_batches  # noqa: F401  (the trainer's split)
from laminar.runtime.records import Traj


def group_advantages(rewards: Sequence[Sequence[float]], eps: float = 1e-6) -> list[list[float]]:
    """(r - group mean) / (group std + eps) per group; a group with equal rewards gets zeros."""
    out = []
    for group in rewards:
        r = torch.tensor(group, dtype=torch.float64)
        std = r.std(unbiased=False) if len(group) > 1 else torch.tensor(0.0)
        adv = torch.zeros_like(r) if std < eps else (r - r.mean()) / (std + eps)
        out.append(adv.tolist())
    return out


@dataclass
class Batch:
    """Padded tensors of one training batch, aligned to next-token targets (length L-1)."""

    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    loss_mask: torch.Tensor  # [B, L-1], 1 on generated response tokens (not observations)
    old_logprobs: torch.Tensor  # [B, L-1], behaviour log-probs (NaN where unknown)
    advantages: torch.Tensor  # [B]

    def to(self, device: str) -> Batch:
        """The same batch on ``device``."""
        if device == "cpu":
            return self
        return Batch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    @property
    def response_tokens(self) -> int:
        return int(self.loss_mask.sum().item())


def trained_tokens(trajs: Sequence[Traj]) -> int:
    """Tokens the loss covers: the generated ones (observations are context)."""
    return sum(t.generated_tokens for t in trajs)


def build_batch(trajs: Sequence[Traj], advantages: Sequence[float], pad_id: int) -> Batch:
    """Pad prompt + response of each trajectory; the loss covers generated tokens only."""
    seqs = [[*t.prompt_ids, *t.tokens] for t in trajs]
    length = max(len(s) for s in seqs)
    b = len(seqs)
    ids = torch.full((b, length), pad_id, dtype=torch.long)
    attn = torch.zeros((b, length), dtype=torch.long)
    mask = torch.zeros((b, length - 1))
    old = torch.full((b, length - 1), math.nan)
    for i, (t, s) in enumerate(zip(trajs, seqs, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        p, n = len(t.prompt_ids), len(t.tokens)
        mask[i, p - 1 : p - 1 + n] = 1.0  # logits at position j predict token j+1
        m = min(n, len(t.logprobs))  # warm-up data has no behaviour log-probs
        if m:
            old[i, p - 1 : p - 1 + m] = torch.tensor(t.logprobs[:m], dtype=torch.float32)
        for start, end in getattr(t, "obs_spans", ()):  # observations: context, not trained
            mask[i, p - 1 + start : p - 1 + end] = 0.0
    return Batch(ids, attn, mask, old, torch.tensor(list(advantages), dtype=torch.float32))


def token_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    chunk_tokens: int = 0,
) -> torch.Tensor:
    """log p(token j+1 | tokens <= j) for every position j: shape [B, L-1] (fp32).

    ``chunk_tokens`` > 0: the model's output head is applied to ``chunk_tokens`` positions at a
    time (:func:`chunked_logprobs`), so no full-vocabulary logits of the whole micro-batch
    exist at once; only positions where ``mask`` > 0 are computed (the others are 0: the loss
    masks them out). 0: the model's own head on every position at once (full logits).
    """
    head = model.get_output_embeddings() if chunk_tokens > 0 else None
    if head is None or not _plain_head(model, head):
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        logp = torch.log_softmax(logits.logits[:, :-1].float(), dim=-1)
        return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    targets = input_ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if mask is None else mask > 0

    def head_forward(hidden: torch.Tensor) -> torch.Tensor:
        return chunked_logprobs(hidden[:, :-1], head.weight, head.bias, targets, keep, chunk_tokens)

    # the head runs inside the model's forward (what FSDP2 expects of the root's parameters),
    # but answers log-probs, not logits
    with _head_forward(head, head_forward):
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
    return out.logits


def chunked_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    keep: torch.Tensor,
    chunk_tokens: int,
) -> torch.Tensor:
    """log p(targets) where ``keep``, from final hidden states [B, T, H] and the output
    embedding [V, H], ``chunk_tokens`` rows at a time; 0 elsewhere. Shape [B, T], fp32.

    One chunk's full-vocabulary logits exist at a time, in fp32 (and briefly in the weight's
    dtype when that is narrower), forward and backward alike (:class:`_ChunkedLogp`): the
    forward keeps only each row's log-sum-exp, the backward recomputes a chunk's logits and
    turns them into their gradient in place.
    """
    rows, tgt = hidden[keep], targets[keep]
    logp = _ChunkedLogp.apply(rows, weight, bias, tgt, max(1, chunk_tokens))
    out = torch.zeros(targets.shape, dtype=torch.float32, device=hidden.device)
    return out.masked_scatter(keep, logp)


def _chunk_logits(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
    """One chunk's logits in fp32 (a fresh tensor: callers work on it in place)."""
    logits = torch.nn.functional.linear(rows, weight, bias)
    return logits.float() if logits.dtype != torch.float32 else logits


class _ChunkedLogp(torch.autograd.Function):
    """log p(tgt) of ``rows`` [N, H] under the head ``weight`` [V, H] (+ ``bias``), chunk by
    chunk, keeping one chunk's logits at a time (the idea of fused linear cross-entropy
    kernels such as Liger's, in plain torch). Saved for the backward: the inputs and each
    row's log-sum-exp; the gradient of a chunk's logits is ``g * (onehot - softmax)``."""

    @staticmethod
    def forward(ctx, rows, weight, bias, tgt, chunk):
        n = rows.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=rows.device)
        lse = torch.empty(n, dtype=torch.float32, device=rows.device)
        for s in range(0, n, chunk):  # autograd does not record inside forward
            f = _chunk_logits(rows[s : s + chunk], weight, bias)
            picked = f.gather(-1, tgt[s : s + chunk].unsqueeze(-1)).squeeze(-1)
            top = f.amax(dim=-1, keepdim=True)
            lse_c = f.sub_(top).exp_().sum(dim=-1).log_().add_(top.squeeze(-1))
            lse[s : s + chunk] = lse_c
            logp[s : s + chunk] = picked - lse_c
            del f
        ctx.save_for_backward(rows, weight, bias, tgt, lse)
        ctx.chunk = chunk
        return logp

    @staticmethod
    def backward(ctx, grad_out):
        rows, weight, bias, tgt, lse = ctx.saved_tensors
        need_rows, need_w, need_b = ctx.needs_input_grad[:3]
        g_rows = torch.empty_like(rows) if need_rows else None
        g_w = torch.zeros_like(weight) if need_w else None
        g_b = torch.zeros_like(bias) if need_b and bias is not None else None
        chunk = ctx.chunk
        for s in range(0, rows.shape[0], chunk):  # no graph is built here (no double backward)
            r = rows[s : s + chunk]
            f = _chunk_logits(r, weight, bias)
            # softmax, minus the target's one-hot, times -g: d logp / d logits, scaled
            f.sub_(lse[s : s + chunk].unsqueeze(-1)).exp_()
            f[torch.arange(r.shape[0], device=f.device), tgt[s : s + chunk]] -= 1.0
            f.mul_(grad_out[s : s + chunk].unsqueeze(-1).neg())
            gl = f.to(weight.dtype)
            del f
            if g_rows is not None:
                g_rows[s : s + chunk] = (gl @ weight).to(rows.dtype)
            if g_w is not None:
                g_w.addmm_(gl.t(), r.to(weight.dtype))
            if g_b is not None:
                g_b.add_(gl.sum(dim=0).to(bias.dtype))
            del gl
        return g_rows, g_w, g_b, None, None


def _plain_head(model: Any, head: Any) -> bool:
    """Whether the logits are the output head's linear map and nothing more (no soft-capping
    or scaling of the logits after it, as Gemma 2 or Cohere do): then chunking is exact."""
    cfg = getattr(model, "config", None)
    scaled = any(
        getattr(cfg, k, None) not in (None, 1.0) for k in ("final_logit_softcapping", "logit_scale")
    )
    return isinstance(head, torch.nn.Linear) and not scaled


@contextmanager
def _head_forward(head: Any, fn: Any):
    """``head``'s forward is ``fn`` within the block (its own afterwards)."""
    before = head.__dict__.get("forward")
    head.forward = fn
    try:
        yield
    finally:
        if before is None:
            del head.forward
        else:
            head.forward = before


def grpo_loss(
    new_logprobs: torch.Tensor,
    batch: Batch,
    clip_eps: float,
    *,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    denom_tokens: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate (token mean) + ``kl_coef`` × k3 KL to the reference; and metrics.

    ``denom_tokens``: response tokens of the whole step when ``batch`` is one micro-batch of it,
    so the micro-batches' losses (and metrics) add up to the step's token mean.
    """
    mask = batch.loss_mask
    denom = torch.tensor(float(denom_tokens)) if denom_tokens else mask.sum().clamp(min=1.0)
    old = torch.where(torch.isnan(batch.old_logprobs), new_logprobs.detach(), batch.old_logprobs)
    log_ratio = (new_logprobs - old).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    adv = batch.advantages.unsqueeze(-1)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    loss = -(surrogate * mask).sum() / denom
    clipped = ((ratio - 1).abs() > clip_eps).float()
    metrics = {
        "pg_loss": float(loss.item()),
        "clip_frac": float((clipped * mask).sum() / denom),
        "ratio_mean": float((ratio.detach() * mask).sum() / denom),
    }
    if ref_logprobs is not None and kl_coef > 0:
        d = ref_logprobs - new_logprobs
        kl = ((torch.exp(d) - d - 1) * mask).sum() / denom
        loss = loss + kl_coef * kl
        metrics["kl"] = float(kl.item())
    return loss, metrics


def sft_loss(model: Any, batch: Batch, chunk_tokens: int = 0) -> torch.Tensor:
    """Mean cross-entropy over response tokens (the warm-up's objective)."""
    lp = token_logprobs(
        model,
        batch.input_ids,
        batch.attention_mask,
        mask=batch.loss_mask,
        chunk_tokens=chunk_tokens,
    )
    return -(lp * batch.loss_mask).sum() / batch.loss_mask.sum().clamp(min=1.0)
