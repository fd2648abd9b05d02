"""GRPO: advantages, batch alignment, the clipped objective's gradient."""

from __future__ import annotations

import math

import pytest
import torch

from laminar.runtime.records import Traj
from laminar.runtime.train.grpo import build_batch, group_advantages, grpo_loss


def test_group_advantages_normalise_within_groups():
    adv = group_advantages([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5], [2.0]])
    a = torch.tensor(adv[0])
    assert a.mean().abs() < 1e-9 and (a.std(unbiased=False) - 1).abs() < 1e-4
    assert adv[1] == [0.0, 0.0] and adv[2] == [0.0]  # no signal without spread


def test_batch_masks_exactly_the_response_tokens():
    t = Traj("a", 0, 0, (1, 7, 8), 0, 10, tokens=[4, 5], logprobs=[-0.1, -0.2])
    u = Traj("b", 0, 1, (1, 7), 0, 10, tokens=[4, 5, 6, 2], logprobs=[-1.0] * 4)
    b = build_batch([t, u], [1.0, -1.0], pad_id=0)
    assert b.input_ids.shape == (2, 6)
    # logits at j predict token j+1: t's responses sit at 3,4 -> mask positions 2,3
    assert b.loss_mask[0].tolist() == [0, 0, 1, 1, 0]
    assert b.loss_mask[1].tolist() == [0, 1, 1, 1, 1]
    assert b.old_logprobs[0, 2].item() == pytest.approx(-0.1)
    assert math.isnan(b.old_logprobs[0, 0].item())
    assert b.response_tokens == 6


def _loss(new, old, adv, eps=0.2):
    b = build_batch([Traj("a", 0, 0, (1,), 0, 4, tokens=[3], logprobs=[old])], [adv], 0)
    lp = torch.tensor([[new]], requires_grad=True)
    loss, metrics = grpo_loss(lp, b, eps)
    loss.backward()
    return loss.item(), lp.grad.item(), metrics


def test_on_policy_gradient_is_minus_advantage():
    loss, grad, m = _loss(-1.0, -1.0, 2.0)
    assert loss == pytest.approx(-2.0) and grad == pytest.approx(-2.0) and m["clip_frac"] == 0


def test_clipped_ratio_stops_the_gradient():
    _, grad, m = _loss(math.log(2.0), 0.0, 1.0)  # ratio 2 > 1.2 with a positive advantage
    assert grad == 0.0 and m["clip_frac"] == 1.0
    _, grad, _ = _loss(math.log(2.0), 0.0, -1.0)  # negative advantage: not clipped, pushes down
    assert grad == pytest.approx(2.0)


def test_kl_term_pulls_towards_the_reference():
    b = build_batch([Traj("a", 0, 0, (1,), 0, 4, tokens=[3], logprobs=[-1.0])], [0.0], 0)
    lp = torch.tensor([[-1.0]], requires_grad=True)
    loss, m = grpo_loss(lp, b, 0.2, ref_logprobs=torch.tensor([[-2.0]]), kl_coef=0.5)
    loss.backward()
    assert m["kl"] == pytest.approx(math.exp(-1) - (-1) - 1)
    assert lp.grad.item() > 0  # lowering the log-prob towards the reference lowers the loss


def test_micro_batches_cover_everything_within_budget():
    from laminar.runtime.train.grpo import micro_batches

    lengths = [5, 100, 7, 6, 50, 8, 300]
    parts = micro_batches(lengths, 120)
    assert sorted(i for p in parts for i in p) == list(range(len(lengths)))
    for p in parts:
        assert max(lengths[i] for i in p) * len(p) <= 120 or len(p) == 1
    assert [6] in parts  # longer than the budget: alone


def test_micro_batched_loss_adds_up_to_the_full_batch():
    torch.manual_seed(0)
    trajs = [
        Traj(str(i), 0, i, (1, 2), 0, 9, tokens=[3] * n, logprobs=[-1.0] * n)
        for i, n in enumerate([1, 4, 2, 7])
    ]
    adv = [1.0, -0.5, 0.3, -0.8]
    lp_full = torch.randn(4, 9) * 0.1 - 1.0
    full, _ = grpo_loss(lp_full[:, :8], build_batch(trajs, adv, 0), 0.2)
    total = 0.0
    for idx in ([0, 2], [1, 3]):
        b = build_batch([trajs[i] for i in idx], [adv[i] for i in idx], 0)
        width = b.loss_mask.shape[1]
        part, _ = grpo_loss(lp_full[idx, :width], b, 0.2, denom_tokens=14)
        total += part.item()
    assert total == pytest.approx(full.item(), rel=1e-5)
