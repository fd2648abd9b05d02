"""Trainer section: the trainer's parallel layout and which forward passes a step runs
(the layout is ``laminar.specs.layoutfit.Layout``; what a step costs on it,
``laminar.sim.layout``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from laminar.config.base import Section


class TrainerConfig(Section):
    """How the trainer's GPUs are laid out (Megatron-style TP x CP x DP x PP, experts over EP)
    and what a step computes besides forward + backward. All 1s: data parallelism alone (FSDP,
    verl's default trainer)."""

    tp: int = Field(1, ge=1, le=1024)
    """Tensor-parallel degree (GPUs, 1..1024): each layer's matmuls split over ``tp`` GPUs,
    which all-reduce the activations twice a layer forward and twice backward."""

    pp: int = Field(1, ge=1, le=1024)
    """Pipeline-parallel degree (stages, 1..1024): the layers split into ``pp`` stages; each
    mini-batch pays the 1F1B bubble, (pp - 1) micro-batch slots of idle per stage."""

    ep: int = Field(1, ge=1, le=1024)
    """Expert-parallel degree (GPUs, 1..1024; MoE models only): the routed experts split over
    ``ep`` GPUs, tokens dispatched to and combined from them by all-to-all in every MoE layer.
    Folded over the data/context/tensor-parallel GPUs (Megatron's MoE parallel folding), so it
    must divide the trainer's GPUs over ``pp``."""

    cp: int = Field(1, ge=1, le=1024)
    """Context-parallel degree (GPUs, 1..1024): each sequence split over ``cp`` GPUs (ring
    attention, its KV exchange overlapped with the attention compute); the GPUs' gradients are
    synchronised with the data-parallel ones."""

    mini_batches: int = Field(1, ge=1, le=4096)
    """Optimizer updates per RL step (count, 1..4096): verl's train_batch_size /
    ppo_mini_batch_size, NeMo RL's G-GBS / T-GBS. Each ends with a gradient synchronisation and
    pays the pipeline bubble once."""

    old_logprob: Literal["system", "recompute", "rollout"] = "system"
    """The old policy's log-probs: ``recompute`` runs one more forward before the update (verl's
    compute_log_prob), ``rollout`` reuses those the rollout engine returned (verl's
    use_rollout_log_probs, no forward), ``system``: each system's own choice
    (``System.recomputes_old_logprob``, with its source)."""

    reference: bool = False
    """Run the reference policy's forward every step (a KL term to the reference model:
    verl's use_kl_loss, NeMo RL's reference_policy_kl_penalty > 0) (true/false); DAPO-style
    recipes drop it."""

    precision: Literal["bf16", "fp8"] = "bf16"
    """The simulated trainer's matmul precision: ``bf16``, or ``fp8`` (FP8 GEMMs as Transformer
    Engine recipes run them, master weights and gradients unchanged), which takes its rate
    from published FP8 training runs (``laminar/data/train_mfu.json``) and needs a GPU with
    FP8 tensor cores. The runtime's own trainer trains in ``model.dtype``."""
