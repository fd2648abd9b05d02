"""The trainer's and the links' cost coefficients (see ``laminar.sim.costdata``).

Trainer FLOPs per token are counted as an RL trainer spends them: forward + backward of the
policy, 3 forward-equivalents (6N per token for the matmuls, Kaplan et al. 2020, plus causal
attention), and one more forward for the old policy's log-probs (``logprob_*``), which a
:class:`~laminar.sim.systems.System` charges when it recomputes them. The embedding lookup is
not a matmul and does not count. The achieved rate is the GPU's dense BF16 peak times a
published MFU (``laminar.specs.trainer``). Activation-checkpointing recompute is not counted:
the published MFUs are of runs that checkpoint, so it is inside them. A step ends with a
data-parallel gradient all-reduce of the bf16 gradients (``train_sync_bytes``).
"""

from __future__ import annotations

from laminar.specs.hardware import HardwareSpec
from laminar.specs.model import BYTES_PER_DTYPE, ModelSpec
from laminar.specs.trainer import train_mfu

FWD_BWD_FORWARDS = 3  # backward = 2 forwards (Kaplan et al. 2020)


def derive_train(
    put, hw: HardwareSpec, m: ModelSpec, dtype: str, precision: str = "bf16"
) -> None:
    """``train_*``, ``logprob_*`` and ``train_sync_bytes``; ``precision``: the trainer's matmuls
    (``trainer.precision``: ``bf16`` or ``fp8``, whose rate comes from FP8 runs)."""
    fwd, attn = m.linear_flop_per_token, m.attn_flop_per_token_sq
    put(
        "train_flop_per_token",
        FWD_BWD_FORWARDS * fwd,
        "FLOP/token",
        f"fwd+bwd 3 x 2 x active params ({(m.active_params - m.embedding_params) / 1e9:.4g}B "
        "in matmuls; Kaplan et al. 2020)",
    )
    put(
        "train_flop_per_token_sq",
        FWD_BWD_FORWARDS * attn,
        "FLOP/token^2",
        "fwd+bwd 3 x causal attention layers x heads x (qk_dim + v_dim) per squared length",
    )
    put(
        "logprob_flop_per_token",
        fwd,
        "FLOP/token",
        "old-log-prob forward: 2 x active params (verl's compute_log_prob; AReaL's decoupled "
        "loss recomputes too); charged by systems that recompute",
    )
    put("logprob_flop_per_token_sq", attn, "FLOP/token^2", "its causal attention, one forward")
    mfu = train_mfu(
        hw.arch, m.active_params, moe=m.is_moe, precision=precision, hardware=hw.catalog_name
    )
    kind = "FP8 training, its model FLOP rate over the BF16 peak" if precision == "fp8" else ""
    put(
        "train_flop_per_s_per_gpu",
        hw["bf16_flops"] * mfu.value,
        "FLOP/s",
        f"dense BF16 peak {hw['bf16_flops']:.4g} FLOP/s x MFU {mfu.value:.3f}"
        + (f" ({kind})" if kind else "")
        + f" [{mfu.cite()}]",
    )
    put(
        "train_sync_bytes",
        m.total_params * BYTES_PER_DTYPE[dtype],
        "bytes",
        f"{dtype} gradients of all {m.total_params / 1e9:.4g}B params, all-reduced once a step "
        "(reduce-scatter + all-gather; the per-micro-batch traffic overlaps compute)",
    )
    derive_layout(put, m, dtype)


def derive_layout(put, m: ModelSpec, dtype: str) -> None:
    """What the trainer's parallel layout moves (``laminar.sim.layout``): the activations a
    tensor-parallel group all-reduces, the tokens an expert-parallel group sends, the routed
    experts' share of the gradients."""
    nbytes = BYTES_PER_DTYPE[dtype]
    put(
        "train_tp_bytes_per_token",
        4 * m.layers * m.hidden * nbytes,
        "bytes/token",
        f"4 all-reduces a layer (2 forward, 2 backward; Shoeybi et al. 2019, Megatron-LM 3) of a "
        f"token's {m.hidden}-wide {dtype} activation x {m.layers} layers",
    )
    put(
        "train_ep_bytes_per_token",
        4 * m.moe_layers * m.experts_per_token * m.hidden * nbytes,
        "bytes/token",
        f"4 all-to-alls an MoE layer (dispatch + combine, forward and backward) of a token's "
        f"{m.experts_per_token} routed copies, {m.hidden}-wide {dtype}, x {m.moe_layers} MoE "
        "layers",
    )
    put(
        "train_sync_routed_bytes",
        m.routed_params * nbytes,
        "bytes",
        f"{dtype} gradients of the {m.routed_params / 1e9:.4g}B routed-expert params (part of "
        "train_sync_bytes), synchronised over the expert-data-parallel GPUs only",
    )


def derive_links(put, hw: HardwareSpec, gpus_per_machine: int) -> None:
    """PCIe, NVLink, RDMA and the machine size the sync needs."""
    pe, re = hw.facts["pcie_efficiency"], hw.facts["rdma_efficiency"]
    put(
        "pcie_bytes_per_s",
        hw["pcie_bytes_per_s"] * pe.value,
        "bytes/s",
        f"PCIe {hw['pcie_bytes_per_s']:.3g} B/s x efficiency {pe.value} [{pe.cite()}]",
    )
    put(
        "nvlink_bytes_per_s",
        hw["nvlink_bytes_per_s"],
        "bytes/s",
        f"datasheet, one direction ({hw.facts['nvlink_bytes_per_s'].source})",
    )
    nic = hw.machine_nic_bytes_per_s
    put(
        "rdma_bytes_per_s",
        nic * re.value,
        "bytes/s",
        f"{hw['nics_per_machine']:.0f} NICs x {hw['nic_bytes_per_s']:.3g} B/s = {nic:.3g} B/s "
        f"x efficiency {re.value} [{re.cite()}]",
    )
    put("rdma_startup_s", hw["rdma_startup_s"], "s", f"[{hw.facts['rdma_startup_s'].cite()}]")
    put("machine_gpus", gpus_per_machine, "GPUs", "cluster.gpus_per_machine")
    nv = hw.nvlink_gpus(gpus_per_machine)
    put(
        "nvlink_gpus",
        nv,
        "GPUs",
        f"the NVLink domain ({hw['nvlink_domain_gpus']:.0f} GPUs, "
        + ("spanning machines)" if hw.nvlink_spans_machines else "inside one machine)"),
    )
