"""The trainer's achieved FLOP rate, from published training runs (``data/train_mfu.json``).

Model-FLOPs utilisation (MFU) of FSDP and Megatron-style training runs, by GPU architecture,
model size and sequence length. For a model of N active parameters on an architecture, the
MFU is interpolated in log N between the runs of that architecture (mean of the runs at the
same size), clamped at the ends; only runs with sequences up to ``MAX_SEQ_LEN`` tokens count,
as RL trajectories are a few to tens of thousands of tokens. An architecture with no
published run borrows the Hopper runs, and says so (basis ``assumed``). MoE models take the
MoE runs (``"moe": true``: grouped-GEMM experts, token dispatch), dense models the dense ones:
an MoE trainer does not reach a dense model's MFU on its active parameters. FP8 trainers
(``trainer.precision``) take the FP8 runs (``"precision": "fp8"``), BF16 ones the rest. Runs
published on one catalog GPU (``"hardware": "h20"``) serve that GPU only, ahead of its
architecture's runs.
"""

from __future__ import annotations

import itertools
import json
import math
from importlib import resources

from laminar.specs.hardware import Fact

MAX_SEQ_LEN = 32768
FALLBACK_ARCH = "hopper"


def _runs() -> list[dict]:
    text = (resources.files("laminar") / "data" / "train_mfu.json").read_text()
    return json.loads(text)["runs"]


def train_mfu(
    arch: str,
    active_params: float,
    *,
    moe: bool = False,
    precision: str = "bf16",
    hardware: str = "",
) -> Fact:
    """The MFU a trainer of ``active_params`` reaches on ``arch``, with its sources; ``moe``:
    of an MoE model (the MoE runs); ``precision``: ``bf16`` or ``fp8`` runs (an FP8 run's
    figure is its model FLOP rate over the dense *BF16* peak, so the rate is that peak times
    the MFU either way); ``hardware``: the catalog GPU, whose own runs (``"hardware"``), where
    published, win over its architecture's: an H20 has a seventh of an H100's FLOPs at more
    bandwidth, so the same trainer reaches a larger fraction of its peak.

    Each precision takes its own runs. Where the GPU has BF16 runs of its own but its FP8
    figure comes from its architecture's runs (an H20's FP8 from H100s), the FP8 trainer is
    taken at least as fast as the GPU's BF16 one: FP8 GEMMs are not slower on the same GPU.
    Runs of one precision are not used to bound the other across models: log active params
    cannot tell a coarse-grained MoE (Mixtral's BF16 0.49) from a fine-grained one at the same
    size (DeepSeek-V3's FP8 0.34), so each keeps its own published figure."""
    pool, basis = _pool(arch, moe, precision, hardware)
    mfu, how = _estimate(pool, active_params)
    kind = ("MoE " if moe else "") + ("FP8 " if precision == "fp8" else "")
    where = (
        f"published {_pool_key(pool)} {kind}training runs ({how}), interpolated in log params; "
        "sources in laminar/data/train_mfu.json"
    )
    if basis == "assumed":
        where = f"no published {arch or 'unknown-arch'} run; {where}"
    if precision == "fp8" and hardware:
        bf16_pool, _ = _pool(arch, moe, "bf16", hardware)
        if bf16_pool and bf16_pool[0].get("hardware") == hardware != pool[0].get("hardware"):
            bf16, bf16_how = _estimate(bf16_pool, active_params)
            if bf16 > mfu:  # FP8 GEMMs are not slower than BF16 ones on the same GPU
                where = (
                    f"{where}; below this GPU's own BF16 runs ({bf16_how}: {bf16:.3f}), "
                    "which stand"
                )
                mfu = bf16
    return Fact(mfu, "1", f"MFU at {active_params / 1e9:.3g}B active params", basis, where)


def _pool(arch: str, moe: bool, precision: str, hardware: str) -> tuple[list[dict], str]:
    """The runs an estimate rests on, and its basis: the GPU's own (``"hardware"``), else its
    architecture's, else Hopper's (``assumed``)."""
    runs = [
        r
        for r in _runs()
        if r["seq_len"] <= MAX_SEQ_LEN
        and bool(r.get("moe", False)) == moe
        and r.get("precision", "bf16") == precision
    ]
    own = [r for r in runs if hardware and r.get("hardware") == hardware]
    if own:
        return own, "calibrated"
    wide = [r for r in runs if not r.get("hardware")]  # architecture-wide runs
    mine = [r for r in wide if r["arch"] == arch]
    if mine:
        return mine, "calibrated"
    return [r for r in wide if r["arch"] == FALLBACK_ARCH], "assumed"


def _pool_key(pool: list[dict]) -> str:
    return pool[0].get("hardware") or pool[0]["arch"]


def _estimate(pool: list[dict], active_params: float) -> tuple[float, str]:
    """(MFU, the points) interpolated in log params over ``pool`` (mean of runs at one size)."""
    by_size: dict[float, list[float]] = {}
    for r in pool:
        by_size.setdefault(float(r["params"]), []).append(float(r["mfu"]))
    points = sorted((n, sum(v) / len(v)) for n, v in by_size.items())
    how = ", ".join(f"{n / 1e9:.3g}B: {m:.3f}" for n, m in points)
    return _interp_log(points, active_params), how


def _interp_log(points: list[tuple[float, float]], n: float) -> float:
    if n <= points[0][0]:
        return points[0][1]
    if n >= points[-1][0]:
        return points[-1][1]
    for (n0, m0), (n1, m1) in itertools.pairwise(points):
        if n0 <= n <= n1:
            w = math.log(n / n0) / math.log(n1 / n0)
            return m0 + w * (m1 - m0)
    raise AssertionError("unreachable: points are sorted and n is inside them")
