"""The trainer's parallel layout (``trainer.tp/pp/ep/cp``) and what one step costs on it.

A step trains every token of its batch: forward + backward of the policy, the old policy's
log-prob forward when the system recomputes it (``trainer.old_logprob``), the reference
policy's forward when asked (``trainer.reference``). Each pass is charged at the trainer's
achieved FLOP rate (``train_flop_per_s_per_gpu``: a published MFU, MoE runs for MoE models;
``laminar.specs.trainer``), over all its GPUs, plus what the layout adds:

- **Tensor parallelism** (``tp``): every layer all-reduces its activations twice forward and
  twice backward inside its TP group (Shoeybi et al. 2019, §3; sequence parallelism turns each
  into a reduce-scatter + all-gather of the same bytes, Korthikanti et al. 2022). A ring moves
  2(tp-1)/tp of a token's activation through each GPU (``train_tp_bytes_per_token``), over
  NVLink while the group fits in a machine, else over the GPU's share of its machine's NICs.
  Not overlapped with compute (Megatron's default).
- **Pipeline parallelism** (``pp``): each optimizer update's micro-batches run 1F1B; the
  bubble adds (pp-1)/m of the compute of its m micro-batches per pipeline (Narayanan et al.
  2021, §2.2: bubble fraction (p-1)/m). m is the tokens a pipeline trains per update over the
  micro-batch (``sim.train_micro_batch_tokens``, else one longest trajectory). RL steps have
  few micro-batches per pipeline, so the bubble is large where pretraining hides it.
- **Expert parallelism** (``ep``): every MoE layer dispatches each token's k routed copies to
  the GPUs holding its experts and combines them back, forward and backward: 4 all-to-alls
  (Lepikhin et al. 2020, GShard; ``train_ep_bytes_per_token``), (ep-1)/ep of it leaving the
  GPU. Experts are folded over the data/context/tensor-parallel GPUs (Liu et al. 2025, MoE
  parallel folding: expert tensor parallelism 1 under EP), so each GPU holds 1/(ep·pp) of the
  routed experts.
- **Context parallelism** (``cp``): sequences split over ``cp`` GPUs; ring attention's KV
  exchange overlaps the attention compute (Megatron-Core's CP), so it adds no time here; its
  GPUs synchronise gradients with the data-parallel ones.
- **Gradient synchronisation** of what each group holds, once per optimizer update
  (``trainer.mini_batches``): the dense parameters' shard (1/(tp·pp)) all-reduced over the
  gpus/(tp·pp) GPUs holding it, the routed experts' shard (1/(ep·pp)) over the gpus/(ep·pp)
  holding it (ring: 2(g-1)/g of the bytes through each GPU), over NVLink while a pipeline stage's
  GPUs fit in one machine, else over NICs.

A layout of all 1s with one update and no reference pass is the cost model's own
``CostModel.train_s`` and ``logprob_s``, bit for bit (FSDP data parallelism: one all-reduce of
every gradient).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from laminar.sim.cost import CostModel
from laminar.specs.layoutfit import Layout

FWD_BWD_FORWARDS = 3  # backward = 2 forwards (Kaplan et al. 2020), as laminar.sim.costtrain


@dataclass(frozen=True, slots=True)
class TrainerLayout(Layout):
    """The trainer's parallel degrees (:class:`~laminar.specs.layoutfit.Layout`'s tp, pp, ep,
    cp) and optimizer updates per step."""

    mini_batches: int = 1
    micro_batch_tokens: int = 0
    """Tokens of one micro-batch (0: one longest trajectory; set by :meth:`of`)."""

    @classmethod
    def of(cls, cfg: Any) -> TrainerLayout:
        """The layout of a :class:`~laminar.config.LaminarConfig`."""
        t, w = cfg.trainer, cfg.workload
        mb = cfg.sim.train_micro_batch_tokens or (w.max_prompt_len + w.max_response_len)
        return cls(t.tp, t.pp, t.ep, t.cp, t.mini_batches, mb)

    @property
    def plain(self) -> bool:
        """Data parallelism alone, one update a step (the cost model's own ``train_s``)."""
        return self.tp == self.pp == self.ep == self.cp == self.mini_batches == 1


@dataclass(frozen=True, slots=True)
class StepTime:
    """Seconds of one training step and the parts of it the stages report."""

    total_s: float
    logprob_s: float
    ref_s: float


def _lengths(seq_lens: Sequence[int]) -> tuple[int, int]:
    total = sq = 0
    for n in seq_lens:
        total += n
        sq += n * n
    return total, sq


def _link_bw(cost: CostModel, group_gpus: int) -> float:
    """Per-GPU bandwidth of a collective over ``group_gpus`` consecutive GPUs."""
    if group_gpus <= cost.nvlink_gpus:
        return cost.nvlink_bytes_per_s
    return cost.rdma_bytes_per_s / cost.machine_gpus


def step_time(
    cost: CostModel,
    layout: TrainerLayout,
    seq_lens: Sequence[int],
    gpus: int,
    *,
    old_logprob: bool,
    reference: bool = False,
    updates: int | None = None,
) -> StepTime:
    """Seconds for ``gpus`` trainer GPUs laid out as ``layout`` to train one step on sequences
    of ``seq_lens`` tokens (module docstring); ``updates``: optimizer updates in it (None:
    ``layout.mini_batches``)."""
    if gpus < 1:
        raise ValueError("training needs at least one GPU")
    updates = layout.mini_batches if updates is None else updates
    if layout.plain and updates == 1 and not reference:
        total = cost.train_s(seq_lens, gpus, old_logprob=old_logprob)
        logprob = cost.logprob_s(seq_lens, gpus) if old_logprob else 0.0
        return StepTime(total, logprob, 0.0)
    tokens, sq = _lengths(seq_lens)
    fwd_flop = tokens * cost.logprob_flop_per_token + sq * cost.logprob_flop_per_token_sq
    if not cost.logprob_flop_per_token:  # a cost file from before the log-prob coefficients
        fwd_flop = (
            tokens * cost.train_flop_per_token + sq * cost.train_flop_per_token_sq
        ) / FWD_BWD_FORWARDS
    train_flop = tokens * cost.train_flop_per_token + sq * cost.train_flop_per_token_sq
    rate = gpus * cost.train_flop_per_s_per_gpu
    update_s = train_flop / rate * _bubble(layout, tokens, gpus, updates)
    update_s += _collectives_s(cost, layout, tokens, gpus, backward=True)
    update_s += updates * grad_sync_s(cost, layout, gpus)
    forward_s = fwd_flop / rate * _bubble(layout, tokens, gpus, 1)
    forward_s += _collectives_s(cost, layout, tokens, gpus, backward=False)
    logprob = forward_s if old_logprob else 0.0
    ref = forward_s if reference else 0.0
    return StepTime(update_s + logprob + ref, logprob, ref)


def _bubble(layout: TrainerLayout, tokens: int, gpus: int, updates: int) -> float:
    """1F1B: the compute stretched by (pp-1)/m, m micro-batches a pipeline per update."""
    if layout.pp == 1 or tokens == 0:
        return 1.0
    per_pipeline = tokens / (layout.data_parallel(gpus) * max(1, updates))
    m = max(1, math.ceil(per_pipeline / max(1, layout.micro_batch_tokens)))
    return 1.0 + (layout.pp - 1) / m


def _collectives_s(
    cost: CostModel, layout: TrainerLayout, tokens: int, gpus: int, *, backward: bool
) -> float:
    """TP all-reduces and EP all-to-alls of ``tokens`` per GPU, forward (and backward)."""
    share = 1.0 if backward else 0.5  # the coefficients count forward + backward
    s = 0.0
    if layout.tp > 1 and cost.train_tp_bytes_per_token:
        nbytes = tokens / gpus * cost.train_tp_bytes_per_token * 2 * (layout.tp - 1) * share
        s += nbytes / _link_bw(cost, layout.tp)
    if layout.ep > 1 and cost.train_ep_bytes_per_token:
        nbytes = tokens / gpus * cost.train_ep_bytes_per_token * (layout.ep - 1) / layout.ep
        s += nbytes * share / _link_bw(cost, layout.ep)
    return s


def grad_sync_s(cost: CostModel, layout: TrainerLayout, gpus: int) -> float:
    """One gradient synchronisation: the dense shard over the GPUs holding it, the routed
    experts' shard over theirs (ring all-reduce, 2(g-1)/g of the bytes per GPU)."""
    if not cost.train_sync_bytes:
        return 0.0
    routed = min(cost.train_sync_routed_bytes, cost.train_sync_bytes)
    dense = cost.train_sync_bytes - routed
    bw = _link_bw(cost, max(1, gpus // layout.pp))
    shard = layout.tp * layout.pp
    g_dense = max(1, gpus // shard)
    if layout.ep == 1:
        return _ring(g_dense, (dense + routed) / shard) / bw
    g_expert = max(1, gpus // (layout.ep * layout.pp))
    return (_ring(g_dense, dense / shard) + _ring(g_expert, routed / (layout.ep * layout.pp))) / bw


def _ring(g: int, nbytes: float) -> float:
    return 2 * (g - 1) / g * nbytes if g > 1 else 0.0


def recomputes_old_logprob(cfg: Any, system: Any) -> bool:
    """Whether ``system`` runs the old-log-prob forward under ``cfg.trainer.old_logprob``."""
    choice = cfg.trainer.old_logprob
    if choice == "system":
        return bool(system.recomputes_old_logprob)
    return choice == "recompute"
