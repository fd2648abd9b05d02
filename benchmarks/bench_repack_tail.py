"""Repack without slower tails (paper §8.4): long-tail latency, throughput and staleness with
repack off, unbounded, and bounded by ``repack.max_step_slowdown``, side by side.

    PYTHONPATH=. python benchmarks/bench_repack_tail.py [--models 7b 32b 72b] [--gpus 1024]
        [--bounds 0 1.5 1.3] [--steps 20 60] [--jobs 2] [--csv out.csv]

Each run is the ``paper-math-<model>`` preset (its trainer split and 5 warm-up steps) at
``--gpus`` GPUs. For every (model, repack setting, run length) it prints:

- ``tail_s``: generation time (assigned to a rollout -> last token) of the responses of at least
  ``--tail-tokens`` tokens, median / mean / p99, over those handed out at least H seconds before
  the run ended, H = twice the time one max-length response takes alone on a replica; so a
  slower tail cannot hide by not finishing: the few of them still unfinished count at their
  age (a lower bound; how many, in brackets);
- ``tail/off``: the median and p99 against repack off at the same length (the §8.4 goal: <= 1.1);
- ``gen``, ``train``: tokens/s after the warm-up, and the gain over repack off;
- staleness of the consumed trajectories (mean, max, and the max over the last quarter of the
  steps), so a run length at which staleness stops growing can be read off.

Bound ``0`` is the unbounded best fit (KV capacity and B only); ``off`` is always run.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import pandas as pd

from laminar.config import load_config
from laminar.sim import simulate
from laminar.sim.costdata import cost_model_for


def tail_latency(res, system: str = "laminar", tail_tokens: int = 12 * 1024) -> dict:
    """Generation time of the long tail in one simulated run (see the module docstring)."""
    cfg, wl = res.config, res.config.workload
    alone_s = wl.max_response_len * cost_model_for(cfg).decode_step_s(
        1, wl.max_prompt_len + wl.max_response_len
    )
    end_s = float(res.summary.set_index("system").loc[system, "sim_time_s"])
    t = res.trajectories[res.trajectories["system"] == system]
    tail = t[(t["response_len"] >= tail_tokens) & (t["gen_start_s"] <= end_s - 2 * alone_s)]
    lat = tail["gen_end_s"].fillna(end_s) - tail["gen_start_s"]
    return {
        "tail_n": len(tail),
        "tail_unfinished": int(tail["gen_end_s"].isna().sum()),
        "tail_median_s": float(lat.median()),
        "tail_mean_s": float(lat.mean()),
        "tail_p99_s": float(lat.quantile(0.99)),
    }


def run_one(task: tuple) -> dict:
    model, gpus, steps, bound, tail_tokens = task
    repack = ["repack.enabled=false"] if bound is None else [f"repack.max_step_slowdown={bound}"]
    cfg = load_config(
        preset=f"paper-math-{model}",
        overrides=[f"cluster.gpus={gpus}", f"workload.steps={steps}", "sim.replica_series=false",
                   *repack],
    )  # fmt: skip
    t0 = time.perf_counter()
    res = simulate(cfg)
    s = res.summary.iloc[0]
    st = res.steps[res.steps["step"] >= int(s["warmup_steps"])]
    last = st[st["step"] >= steps - max(1, steps // 4)]
    return {
        "model": model,
        "gpus": gpus,
        "steps": steps,
        "repack": "off" if bound is None else ("unbounded" if bound == 0 else f"<= {bound}x"),
        **tail_latency(res, tail_tokens=tail_tokens),
        "gen_tokens_per_s": float(s["gen_tokens_per_s"]),
        "train_tokens_per_s": float(s["train_tokens_per_s"]),
        "mean_kv_util": float(s["mean_kv_util"]),
        "staleness_mean": float(s["staleness_mean"]),
        "staleness_max": int(s["staleness_max"]),
        "staleness_max_last_quarter": int(last["staleness_max"].max()),
        "repack_moves": int(s["repack_moves"]),
        "steady_state": s["steady_state"],
        "wall_s": time.perf_counter() - t0,
    }


def with_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Each row against repack off for the same model, GPUs and run length."""
    key = ["model", "gpus", "steps"]
    off = df[df["repack"] == "off"].set_index(key)
    base = off.reindex(pd.MultiIndex.from_frame(df[key]))
    df = df.copy()
    df["tail_median_vs_off"] = df["tail_median_s"].to_numpy() / base["tail_median_s"].to_numpy()
    df["tail_p99_vs_off"] = df["tail_p99_s"].to_numpy() / base["tail_p99_s"].to_numpy()
    df["gen_gain"] = df["gen_tokens_per_s"].to_numpy() / base["gen_tokens_per_s"].to_numpy() - 1
    df["train_gain"] = (
        df["train_tokens_per_s"].to_numpy() / base["train_tokens_per_s"].to_numpy() - 1
    )
    return df


def table(df: pd.DataFrame) -> str:
    """A markdown table of the figures that answer §8.4."""
    head = ("| model | steps | repack | tail s median / mean / p99 (unfinished) | tail/off "
            "median, p99 | gen tok/s (gain) | train tok/s (gain) | staleness mean, max "
            "(last quarter) | moves |")  # fmt: skip
    lines = [head, "|" + "---|" * 9]
    for r in df.itertuples():
        lines.append(
            f"| {r.model} | {r.steps} | {r.repack} | {r.tail_median_s:.0f} / {r.tail_mean_s:.0f}"
            f" / {r.tail_p99_s:.0f} ({r.tail_unfinished}) | {r.tail_median_vs_off:.2f}, "
            f"{r.tail_p99_vs_off:.2f} | {r.gen_tokens_per_s / 1e3:.0f} K ({r.gen_gain:+.0%}) | "
            f"{r.train_tokens_per_s / 1e3:.0f} K ({r.train_gain:+.0%}) | "
            f"{r.staleness_mean:.1f}, {r.staleness_max} ({r.staleness_max_last_quarter}) | "
            f"{r.repack_moves} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["7b", "32b", "72b"])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1024])
    ap.add_argument("--bounds", type=float, nargs="+", default=[0.0, 1.5, 1.3],
                    help="repack.max_step_slowdown values to try (0: unbounded)")  # fmt: skip
    ap.add_argument("--steps", type=int, nargs="+", default=[20, 60])
    ap.add_argument("--tail-tokens", type=int, default=12 * 1024)
    ap.add_argument("--jobs", type=int, default=2, help="simulations run in parallel")
    ap.add_argument("--csv", default="", help="also write the rows to this CSV")
    args = ap.parse_args()
    settings = [None, *args.bounds]
    tasks = [(m, g, n, b, args.tail_tokens) for m in args.models for g in args.gpus
             for n in args.steps for b in settings]  # fmt: skip
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        df = with_ratios(pd.DataFrame(list(pool.map(run_one, tasks))))
    if args.csv:
        df.to_csv(args.csv, index=False)
    for gpus in args.gpus:
        print(f"\n{gpus} GPUs")
        print(table(df[df["gpus"] == gpus]))
    print(f"\n{len(tasks)} runs in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
