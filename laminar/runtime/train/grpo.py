"""GRPO in torch: group-normalised advantages, a clipped ratio objective, an optional KL term.

The ratio is taken against the *behaviour* policy, the log-probabilities the rollout reported
while sampling (vLLM's ``logprobs=0``), so a stale trajectory (generated with an older version,
paper §6) is corrected by the ratio and bounded by the clip. Losses are token means over the
batch (every response token weighs the same, as in DAPO), so long answers are not diluted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
    loss_mask: torch.Tensor  # [B, L-1], 1 on response tokens
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


def build_batch(trajs: Sequence[Traj], advantages: Sequence[float], pad_id: int) -> Batch:
    """Pad prompt + response of each trajectory; the loss covers response tokens only."""
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
    return Batch(ids, attn, mask, old, torch.tensor(list(advantages), dtype=torch.float32))


def token_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor):
    """log p(token j+1 | tokens <= j) for every position j: shape [B, L-1]."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


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


def sft_loss(model: Any, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over response tokens (the warm-up's objective)."""
    lp = token_logprobs(model, batch.input_ids, batch.attention_mask)
    return -(lp * batch.loss_mask).sum() / batch.loss_mask.sum().clamp(min=1.0)
