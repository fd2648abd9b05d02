"""What the sourced trainer cost does to the headline figures: ``docs/trainer-cost.md``.

    PYTHONPATH=. python benchmarks/trainer_cost.py [--jobs 2] [--out docs]

Three cost models of the same runs (paper-math presets, H800, 10 steps after 3 warm-up):

- ``before``: the cost model until issue 15.5, rebuilt here from its formulas (8 x the model
  card's parameters FLOPs per token, attention 8·layers·hidden, MFU 0.35 assumed, no
  data-parallel sync; rollout side from the card's parameter count, NVLink 400 GB/s);
- ``rollout``: ``before`` with today's rollout-side coefficients (parameters from config.json,
  the embedding lookup out of the FLOPs, H800 NVLink 200 GB/s one direction), to separate the
  rollout-side change from the trainer's;
- ``after``: today's cost model (``laminar.sim.costdata``): FLOPs as the trainer spends them
  (3 forward-equivalents + the old-log-prob forward, embeddings excepted), MFU interpolated
  from published runs (``laminar/data/train_mfu.json``), the gradient all-reduce per step.

Each runs Laminar (preset split) and verl at 64 and 1024 GPUs. The page lists the trainer
coefficients and every run's train tokens/s, step time and the Laminar/verl speedup.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from laminar.config import load_config
from laminar.sim import simulate
from laminar.sim.cost import Coefficient, CostModel
from laminar.sim.costdata import cost_model_for
from laminar.specs.hardware import catalog_hardware
from laminar.specs.model import catalog_entry, catalog_spec

MODELS = ("7b", "32b", "72b")
GPUS = (64, 1024)
SYSTEMS = ("laminar", "verl")
VARIANTS = ("before", "rollout", "after")
STEPS, WARMUP = 10, 3
LEGACY_MFU = 0.35
LEGACY_NVLINK = 400e9


def config(model: str, gpus: int, system: str, *extra: str):
    """The ``paper-math-<model>`` preset at ``gpus`` GPUs, one system, shortened."""
    return load_config(
        preset=f"paper-math-{model}",
        overrides=[f"cluster.gpus={gpus}", f"workload.steps={STEPS}",
                   f"sim.warmup_steps={WARMUP}", f"sim.systems=[{system}]",
                   "sim.replica_series=false", *extra],
    )  # fmt: skip


def legacy(cfg) -> CostModel:
    """The cost model before this change, from its formulas (see module docstring)."""
    name, tp = cfg.model.name, cfg.model.rollout_tp
    spec, hw = catalog_spec(name), catalog_hardware(cfg.cluster.hardware)
    n = catalog_entry(name)["card"]["total_params"]  # the old models.json used the card's
    kv = spec.kv_bytes_per_token(2)
    peak, hbm = hw["bf16_flops"], hw["hbm_bytes_per_s"]
    e = {k: hw[k] for k in ("decode_weight_bw_efficiency", "decode_kv_bw_efficiency",
                            "decode_flops_efficiency", "prefill_flops_efficiency")}  # fmt: skip
    allreduce = 0.0 if tp == 1 else 2 * spec.layers * hw["tp_allreduce_s"]
    read_s = 2 * n / tp / (hbm * e["decode_weight_bw_efficiency"]) + allreduce
    free = hw["gpu_memory_bytes"] * cfg.sim.gpu_memory_utilization - 2 * n / tp
    free -= hw["activation_reserve_bytes"]
    values = {
        "replica_gpus": tp,
        "weight_bytes": 2 * n,
        "kv_capacity_tokens": int(free * tp // kv),
        "decode_base_s": read_s,
        "decode_per_seq_s": 2 * n / tp / (peak * e["decode_flops_efficiency"]),
        "decode_per_kv_token_s": kv / tp / (hbm * e["decode_kv_bw_efficiency"]),
        "prefill_base_s": read_s,
        "prefill_per_token_s": 2 * n / tp / (peak * e["prefill_flops_efficiency"]),
        "prefill_per_token_sq_s": 2 * spec.layers * spec.hidden / tp
        / (peak * e["prefill_flops_efficiency"]),
        "train_flop_per_token": 8 * n,
        "train_flop_per_token_sq": 8 * spec.layers * spec.hidden,
        "train_flop_per_s_per_gpu": peak * LEGACY_MFU,
        "pcie_bytes_per_s": hw["pcie_bytes_per_s"] * hw["pcie_efficiency"],
        "nvlink_bytes_per_s": LEGACY_NVLINK,
        "rdma_bytes_per_s": hw.machine_nic_bytes_per_s * hw["rdma_efficiency"],
        "rdma_startup_s": hw["rdma_startup_s"],
    }
    now = cost_model_for(cfg).coefficients
    coeffs = {k: Coefficient(float(v), now[k].unit, "before issue 15.5") for k, v in values.items()}
    return CostModel(coeffs, f"before: {name}")


def variant(cfg, which: str) -> CostModel:
    """The cost model of one variant (``before``, ``rollout`` or ``after``)."""
    after = cost_model_for(cfg)
    if which == "after":
        return after
    before = legacy(cfg)
    if which == "before":
        return before
    trainer = {"train_flop_per_token", "train_flop_per_token_sq", "train_flop_per_s_per_gpu"}
    mixed = {k: (before.coefficients[k] if k in trainer else c)
             for k, c in after.coefficients.items()}  # fmt: skip
    for k in ("logprob_flop_per_token", "logprob_flop_per_token_sq", "train_sync_bytes"):
        mixed[k] = Coefficient(0.0, mixed[k].unit, "before issue 15.5: none")
    return CostModel(mixed, f"rollout: {cfg.model.name}")


def _run(task: tuple) -> dict:
    model, gpus, system, which = task
    cfg = config(model, gpus, system)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cost.json"
        path.write_text(variant(cfg, which).to_json())
        s = simulate(config(model, gpus, system, f"sim.cost_file={path}")).summary.iloc[0]
    keep = ("train_tokens_per_s", "step_time_s_mean", "gen_tokens_per_s", "staleness_mean",
            "trainer_gpus")  # fmt: skip
    return {"model": model, "gpus": gpus, "system": system, "variant": which,
            **{k: s[k] for k in keep}}  # fmt: skip


def coefficients_table() -> pd.DataFrame:
    """Trainer coefficients and seconds per step of a global batch (8192 x 4K) on 256 GPUs."""
    rows = []
    for model in MODELS:
        cfg = config(model, 1024, "laminar")
        for which in VARIANTS:
            m = variant(cfg, which)
            c = m.coefficients
            flop = c["train_flop_per_token"].value + c["logprob_flop_per_token"].value
            rows.append({
                "model": model, "variant": which,
                "flop_per_token": flop,
                "mfu": c["train_flop_per_s_per_gpu"].value / 989.4e12,
                "sync_s_256": m.train_sync_s(256),
                "step_s_256": m.train_s([4096] * 8192, 256),
                "mfu_source": c["train_flop_per_s_per_gpu"].source,
            })  # fmt: skip
    return pd.DataFrame(rows)


INTRO = """What changed in the trainer's cost model (`laminar/sim/costtrain.py`,
`laminar/specs/trainer.py`, `laminar/data/train_mfu.json`):

- **FLOPs per token as the trainer spends them.** Forward + backward = 3 forward passes (6N per
  token, Kaplan et al. 2020) plus causal attention, and one more forward for the old policy's
  log-probs. N is the active parameters in matmuls, from config.json: the embedding lookup is
  not a matmul (before: 8 x the model card's total, embeddings included). The log-prob forward
  is charged per system (`System.recomputes_old_logprob`): all five simulated systems recompute
  it (verl's actor runs `compute_log_prob` every step and Laminar's trainer is verl's, §7; the
  one-step and stream baselines are verl recipes; AReaL's decoupled loss implies
  `recompute_logprob`), so the count is 4 forward-equivalents for all of them.
- **MFU from published runs** instead of 0.35 assumed: interpolated in log(active parameters)
  between runs on the same GPU architecture (Hopper: torchtitan Llama 3.1 8B FSDP 33-39%;
  Llama 3 405B 41-43% at 8K tokens). The 405B run at 131K tokens (38%) is left out: RL
  sequences here are at most 18K tokens. Activation checkpointing is inside these figures (the
  runs checkpoint), so it is not counted again. These are pre-training runs on fixed-length
  packed sequences; an RL trainer's ragged micro-batches may run lower, which only a
  measurement of an RL trainer (issue 15's calibration) can say.
- **Data-parallel gradient sync**: a ring all-reduce of the bf16 gradients ends every optimizer
  step (NVLink inside a machine, each GPU's share of the NICs across machines); before,
  training time scaled perfectly with GPUs.

The rollout side changed too, a little: parameters come from config.json (7B: 7.62B instead of
the card's 7.61B), the decode FLOPs leave the embedding lookup out, and the H800's NVLink is
200 GB/s one direction (the datasheet's 400 GB/s counts both). The `rollout` column isolates
that. So the Qwen2.5 presets' `cost_model.json` and summaries are not the same as before; this
page says by how much. The `before` column reproduces the previous cost model exactly (its 16
coefficients, and so its runs, bit for bit). `docs/paper-reproduction.md` is regenerated
separately.
"""


def _coefficient_lines(coeffs: pd.DataFrame) -> list[str]:
    lines = [
        "## Trainer coefficients (H800)",
        "",
        "| model | variant | FLOP/token (linear) | MFU | DP sync per step, 256 GPUs (s) "
        "| one step of 8192 x 4K tokens on 256 GPUs (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in coeffs.itertuples():
        lines.append(f"| {r.model} | {r.variant} | {r.flop_per_token:.3e} | {r.mfu:.3f} | "
                     f"{r.sync_s_256:.2f} | {r.step_s_256:.1f} |")  # fmt: skip
    lines += ["", "MFU sources (after):", ""]
    for r in coeffs[coeffs["variant"] == "after"].itertuples():
        lines.append(f"- {r.model}: {r.mfu_source}")
    return lines


def _headline_lines(runs: pd.DataFrame) -> list[str]:
    keys = ["model", "gpus", "system"]
    runs = runs.assign(model=pd.Categorical(runs["model"], MODELS, ordered=True))
    piv = runs.pivot_table(index=keys, columns="variant", values="train_tokens_per_s")
    trainer = runs.groupby(keys)["trainer_gpus"].first()
    lines = ["## Headline figures", "",
             "Train tokens/s (prompt + response, after the warm-up) and the change from "
             "`before`:", "",
             "| model | GPUs | system | trainer GPUs | before | rollout | after | after/before |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for key, r in piv.iterrows():
        model, gpus, system = key
        change = r["after"] / r["before"] - 1
        lines.append(f"| {model} | {gpus} | {system} | {int(trainer[key])} | "
                     f"{r['before']:,.0f} | {r['rollout']:,.0f} | {r['after']:,.0f} | "
                     f"{100 * change:+.1f}% |")  # fmt: skip
    change = (piv["after"] / piv["before"] - 1) * 100
    for gpus in GPUS:
        c = change.xs(gpus, level="gpus")
        lines += ["", f"At {gpus} GPUs the change spans {c.min():+.1f}% to {c.max():+.1f}% "
                  f"(Laminar {c.xs('laminar', level='system').min():+.1f}% to "
                  f"{c.xs('laminar', level='system').max():+.1f}%)."]  # fmt: skip
    lines += ["", "The trainer coefficient matters where the trainer bounds throughput (few "
              "trainer machines, small clusters); where generation bounds it, the rollout-side "
              "change (the `rollout` column) is about as large."]  # fmt: skip
    lines += ["", "Laminar over verl (train tokens/s ratio):", "",
              "| model | GPUs | before | after |", "|---|---:|---:|---:|"]  # fmt: skip
    for model in MODELS:
        for gpus in GPUS:
            lam, verl = piv.loc[(model, gpus, "laminar")], piv.loc[(model, gpus, "verl")]
            b, a = lam["before"] / verl["before"], lam["after"] / verl["after"]
            lines.append(f"| {model} | {gpus} | {b:.2f}x | {a:.2f}x |")
    step = runs.pivot_table(index=keys, columns="variant", values="step_time_s_mean")
    lines += ["", "Mean step time (s):", "", "| model | GPUs | system | before | after |",
              "|---|---:|---|---:|---:|"]  # fmt: skip
    for (model, gpus, system), r in step.iterrows():
        lines.append(f"| {model} | {gpus} | {system} | {r['before']:.1f} | {r['after']:.1f} |")
    return lines


def write_doc(out: Path, runs: pd.DataFrame, coeffs: pd.DataFrame, seconds: float) -> Path:
    """``trainer-cost.md``: the coefficients and the before/after tables."""
    head = ["# The trainer's cost, sourced (issue 15, part 5)", "",
            "Generated by `PYTHONPATH=. python benchmarks/trainer_cost.py` "
            f"({seconds:.0f} s on this shared 2-core machine); raw rows in "
            "`docs/trainer-cost.csv`. Runs: paper-math presets (H800, preset splits and TP), "
            f"{STEPS} trainer steps, rates after {WARMUP} warm-up steps.", ""]  # fmt: skip
    lines = [*head, INTRO, *_coefficient_lines(coeffs), "", *_headline_lines(runs), ""]
    path = out / "trainer-cost.md"
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="simulations run in parallel")
    ap.add_argument("--out", default="docs", help="directory of trainer-cost.md")
    ap.add_argument("--reuse", action="store_true", help="redraw from trainer-cost.csv")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv, timing = out / "trainer-cost.csv", out / "trainer-cost-seconds.txt"
    if args.reuse:
        runs, seconds = pd.read_csv(csv), float(timing.read_text())
    else:
        tasks = [(m, g, s, v) for m in MODELS for g in GPUS for s in SYSTEMS for v in VARIANTS]
        with ProcessPoolExecutor(args.jobs) as pool:
            runs = pd.DataFrame(list(pool.map(_run, tasks)))
        runs.to_csv(csv, index=False)
        seconds = time.perf_counter() - t0
        timing.write_text(f"{seconds:.0f}\n")
    path = write_doc(out, runs, coefficients_table(), seconds)
    print(json.dumps({"wrote": str(path), "seconds": round(time.perf_counter() - t0)}))


if __name__ == "__main__":
    main()
