"""Tables, figures and text of ``docs/paper-reproduction.md`` (see ``paper_repro.py``).

Every number of the paper quoted here is in :data:`PAPER` with its section; every simulated
number is computed from the runs passed in, never typed in.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from laminar.plotting import (
    Run,
    inherent_staleness,
    save_figure,
    scaling_figure,
    staleness_figure,
    throughput_over_time,
    timeline_figure,
)
from laminar.policy.relay import broadcast_time, optimal_chunks
from laminar.sim.costdata import derive

# The paper's numbers (arXiv 2510.12633; DESIGN.md, "Numbers from the paper to reproduce").
PAPER = {
    "vs": {"verl": 2.56, "one-step": 1.98, "stream": 1.93, "partial": 1.39},  # §8.1, math
    "max_speedup": 5.48,  # abstract, §8.1
    "largest_avg": 3.34,  # App. B: largest scale, average over baselines and models
    "small_avg": 1.41,  # App. B: <= 64 GPUs
    "eff_laminar": 0.537,  # §8.1: strong-scaling efficiency on math (32B: 0.682)
    "eff_laminar_32b": 0.682,
    "eff_baselines": 0.336,  # §8.1: the best baseline's
    "repack_gen_gain": 0.26,  # §8.4, Fig. 16
    "kv_off": 0.716,  # Table 1
    "kv_on": 0.822,
    "repack_overhead_s": 0.69,
    "stall_s": {"32b": 0.64, "72b": 1.40},  # §8.3, Fig. 14
    "broadcast_72b_127_s": 1.6,  # §4.2: 72B to 127 relays in under 1.6 s
    "wait_cut_avg": 0.37,  # §8.3: rollout weight-wait time cut by up to 37% (47% best case)
    "staleness_typical": 3,  # §6: typically under 3
    "staleness_max": 4,  # §8.2: max 4 in the convergence runs
    "recovery_s": 252,  # §8.5
}
BASELINES = ("verl", "one-step", "stream", "partial")
SYSTEMS = ("laminar", *BASELINES)


def _fmt_k(v: float) -> str:
    return f"{v / 1e3:,.0f} K" if v < 1e6 else f"{v / 1e6:,.2f} M"


def _table(df: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (index included)."""
    cols = [df.index.name or "", *map(str, df.columns)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        lines.append("| " + " | ".join([str(idx), *map(str, row.tolist())]) + " |")
    return "\n".join(lines)


# Throughput, speedups, scaling ------------------------------------------------------------------


def speedups(best: pd.DataFrame) -> pd.DataFrame:
    """Laminar's throughput over each baseline's, per (model, GPUs)."""
    thr = best.pivot_table(index=["model", "gpus"], columns="system", values="train_tokens_per_s")
    return pd.DataFrame({b: thr["laminar"] / thr[b] for b in BASELINES if b in thr})


def ordered(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in model-size order (7B, 32B, 72B), then GPUs."""
    size = df["model"].str.rstrip("b").astype(float)
    return df.assign(_size=size).sort_values(["_size", "gpus"], kind="stable").drop(columns="_size")


def throughput_section(out: Path, best: pd.DataFrame) -> tuple[str, dict]:
    best = ordered(best)
    table = best.assign(model=best["model"].map(lambda m: f"qwen2.5-{m}"))
    save_figure(scaling_figure(table), out / "fig11_throughput.png")
    parts = []
    for model, rows in best.groupby("model", sort=False):
        cell = rows.apply(
            lambda r: (
                _fmt_k(r["train_tokens_per_s"])
                + ("" if pd.isna(r["fraction"]) else f" ({r['fraction']:g})")
            ),
            axis=1,
        )
        t = rows.assign(cell=cell).pivot(index="system", columns="gpus", values="cell")
        t = t.reindex([s for s in SYSTEMS if s in t.index])
        t.index.name = f"{model} (tokens/s)"
        parts.append(_table(t))
    sp = speedups(best)
    sp = sp.reindex(pd.MultiIndex.from_frame(best[["model", "gpus"]].drop_duplicates()))
    gpus = sorted(best["gpus"].unique())
    facts = {
        "avg": sp.mean(),
        "largest": float(sp.xs(gpus[-1], level="gpus").to_numpy().mean()),
        "smallest": float(sp.xs(gpus[0], level="gpus").to_numpy().mean()),
        "max": float(sp.to_numpy().max()),
        "min": float(sp.to_numpy().min()),
        "losses": int((sp.to_numpy() <= 1.0).sum()),
        "close": [
            f"{m} at {g} GPUs vs {b} ({sp.loc[(m, g), b]:.2f}x)"
            for (m, g) in sp.index
            for b in sp.columns
            if sp.loc[(m, g), b] < 1.05
        ],
        "g_lo": gpus[0],
        "g_hi": gpus[-1],
    }
    sp_table = sp.round(2)
    sp_table.index = [f"{m}, {g}" for m, g in sp_table.index]
    sp_table.index.name = "model, GPUs"
    return "\n\n".join(parts) + "\n\nLaminar's speedup over each baseline:\n\n" + _table(
        sp_table
    ), facts


def scaling_table(best: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Strong-scaling efficiency thr(max GPUs) / thr(min GPUs) / (max / min)."""
    best = ordered(best)
    thr = best.pivot_table(index=["system"], columns=["model", "gpus"], values="train_tokens_per_s")
    lo, hi = best["gpus"].min(), best["gpus"].max()
    eff = pd.DataFrame(
        {m: thr[(m, hi)] / thr[(m, lo)] / (hi / lo) for m in best["model"].unique()}
    ).reindex([s for s in SYSTEMS if s in thr.index])
    return eff, (eff * 100).round(1).astype(str) + "%"


# Repack, relay ---------------------------------------------------------------------------------


def repack_table(repack: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (model, gpus), r in ordered(repack).groupby(["model", "gpus"], sort=False):
        on, off = r[r["repack"]].iloc[0], r[~r["repack"]].iloc[0]
        rows.append({
            "model, GPUs": f"{model}, {gpus}",
            "gen tok/s on / off": f"{_fmt_k(on.gen_tokens_per_s)} / {_fmt_k(off.gen_tokens_per_s)}",
            "gen gain": f"{on.gen_tokens_per_s / off.gen_tokens_per_s - 1:+.0%}",
            "train gain": f"{on.train_tokens_per_s / off.train_tokens_per_s - 1:+.0%}",
            "KV use off -> on": f"{off.mean_kv_util:.1%} -> {on.mean_kv_util:.1%}",
            "idle off / on": f"{off.rollout_idle_frac:.1%} / {on.rollout_idle_frac:.1%}",
            "moves": int(on.repack_moves),
        })  # fmt: skip
    return pd.DataFrame(rows).set_index("model, GPUs")


def repack_tail_section(runs: pd.DataFrame) -> tuple[str, dict]:
    """§8.4: the long tail's generation time and the staleness, repack off / on / unbounded,
    after 20 and 60 steps (``paper_repro.repack_tail_runs``)."""
    runs = ordered(runs).set_index(["model", "steps", "setting"])
    models = list(dict.fromkeys(runs.index.get_level_values("model")))
    n_lo, n_hi = sorted(set(runs.index.get_level_values("steps")))
    rows, facts = [], {"ratio": {}, "gain": {}, "st": {}, "n": (n_lo, n_hi)}
    for model in models:
        for setting in ("off", "on", "unbounded"):
            row = {"model, GPUs": f"{model}, {int(runs.loc[(model, n_lo, setting), 'gpus'])}",
                   "repack": setting}  # fmt: skip
            for n in (n_lo, n_hi):
                r, off = runs.loc[(model, n, setting)], runs.loc[(model, n, "off")]
                ratio = r.tail_median_s / off.tail_median_s
                gain = r.gen_tokens_per_s / off.gen_tokens_per_s - 1
                facts["ratio"][(model, n, setting)] = ratio
                facts["gain"][(model, n, setting)] = gain
                facts["st"][(model, n, setting)] = (r.staleness_mean, int(r.staleness_max))
                row[f"{n} steps: tail s, median / p99 (x off)"] = (
                    f"{r.tail_median_s:.0f} / {r.tail_p99_s:.0f} ({ratio:.2f}x)"
                )
                row[f"{n} steps: gen tok/s (gain)"] = f"{_fmt_k(r.gen_tokens_per_s)} ({gain:+.0%})"
                steady = "" if r.steady_state == "steady" else " (not steady)"
                row[f"{n} steps: staleness mean, max"] = (
                    f"{r.staleness_mean:.1f}, {int(r.staleness_max)}{steady}"
                )
            rows.append(row)
    return _table(pd.DataFrame(rows).set_index("model, GPUs")), facts


def relay_section(best: pd.DataFrame) -> tuple[str, dict]:
    lam = ordered(best[best["system"] == "laminar"])
    stall = lam.pivot(index="model", columns="gpus", values="actor_stall_s_mean").round(3)
    stall = stall.reindex(list(dict.fromkeys(lam["model"])))
    stall.insert(0, "paper", [PAPER["stall_s"].get(m, "-") for m in stall.index])
    stall.index.name = "actor stall (s) by GPUs"
    wait = best.pivot_table(index="system", columns="model", values="weight_wait_s_mean")
    wait = wait.reindex([s for s in SYSTEMS if s in wait.index]).round(3)
    wait = wait[list(dict.fromkeys(lam["model"]))]
    wait.index.name = "weight load per rollout (s), mean over scales"
    c72 = derive("h800", "qwen2.5-72b", tp=4)
    a, b, m = c72.rdma_startup_s, c72.rdma_beta_s_per_byte, c72.weight_bytes
    t127 = broadcast_time(128, optimal_chunks(128, m, a, b), m, a, b)
    text = _table(stall) + "\n\n" + _table(wait)
    loads, sync = wait.loc["laminar"], wait.loc["one-step"]
    return text, {"broadcast_127_s": t127, "load_lo": loads.min(), "load_hi": loads.max(),
                  "sync_lo": sync.min(), "sync_hi": sync.max()}  # fmt: skip


# Staleness ---------------------------------------------------------------------------------------


def _stats(values: pd.Series) -> dict:
    v = values.dropna().to_numpy()
    return {"mean": v.mean(), "p90": np.percentile(v, 90), "max": int(v.max()),
            "<3": (v < 3).mean()}  # fmt: skip


def staleness_section(out: Path, runs: list[dict]) -> tuple[str, list[dict]]:
    rows, facts = [], []
    for run in runs:
        r, off = run["on"], run["off"]
        t, steps = r.trajectories, r.steps
        w = r.config.sim.warmup_steps
        c = t[t["consumed_version"] > w]
        inh = inherent_staleness(c, steps)
        for system in ("laminar", "one-step", "partial"):
            sel = c["system"] == system
            for kind, vals in (("consumed", c.loc[sel, "staleness"]), ("inherent", inh[sel])):
                s = _stats(vals)
                if system == "laminar":
                    run[kind] = s
                rows.append({"model, GPUs": f"{run['model']}, {run['gpus']}", "system": system,
                             "kind": kind, "mean": f"{s['mean']:.2f}", "p90": f"{s['p90']:.0f}",
                             "max": s["max"], "share < 3": f"{s['<3']:.0%}"})  # fmt: skip
        facts.append({**_tail_facts(run, r, off), "consumed": run["consumed"],
                      "inherent": run["inherent"]})  # fmt: skip
        if run is runs[0]:
            save_figure(staleness_figure(c), out / "fig10_staleness_consumed.png")
            save_figure(staleness_figure(c, steps, kind="inherent"),
                        out / "fig10_staleness_inherent.png")  # fmt: skip
    return _table(pd.DataFrame(rows).set_index("model, GPUs")), facts


def _tail_facts(run: dict, on, off) -> dict:
    """Why Laminar's staleness is what it is: the long tail's latency against the step time."""
    cost = on.cost_models["laminar"]
    lengths = {}
    for name, r in (("on", on), ("off", off)):
        t = r.trajectories[
            (r.trajectories["system"] == "laminar") & r.trajectories["gen_end_s"].notna()
        ]
        long = t[t["response_len"] >= 12_000]
        lengths[name] = float((long["gen_end_s"] - long["gen_start_s"]).median())
    n = on.config.workload.max_response_len
    alone_s = n * cost.decode_step_s(1, 200 + (n - 1) / 2)  # linear cost: step at mid-length
    s_on = on.summary.set_index("system").loc["laminar"]
    s_off = off.summary.iloc[0]
    return {"model": run["model"], "gpus": run["gpus"], "tail_on_s": lengths["on"],
            "tail_off_s": lengths["off"], "alone_s": alone_s, "step_on_s": s_on.step_time_s_mean,
            "step_off_s": s_off.step_time_s_mean, "kv_on": s_on.mean_kv_util,
            "st_off": s_off.staleness_mean, "st_off_max": s_off.staleness_max,
            "replicas": int(s_on.replicas), "batch": on.config.workload.prompts_per_step
            * on.config.workload.samples_per_prompt}  # fmt: skip


# Faults ---------------------------------------------------------------------------------------


def fault_section(out: Path, runs: dict) -> tuple[str, dict]:
    r, clean = runs["fault"], runs["clean"]
    run = Run(Path("."), r.summary, r.steps, r.trajectories, r.replicas, r.faults)
    kill = float(r.faults["t_s"].iloc[0])
    save_figure(timeline_figure(run, bin_s=60.0), out / "fig15_fault_timeline.png")
    bin_s = 12.0  # 252 s = 21 bins, so the outage is covered by whole bins
    rows, facts = [], {"kill_s": kill}
    for system in run.systems:
        row = {"system": system}
        for kind in ("train", "gen"):
            x, y = (_mean_rate(res, system, kind, bin_s, kill) for res in (r, clean))
            row[f"{kind} tok/s while down (no fault)"] = f"{_fmt_k(x)} ({_fmt_k(y)})"
            facts[(system, kind)] = x / y
        a = r.steps[r.steps["system"] == system].set_index("step")["end_s"]
        b = clean.steps[clean.steps["system"] == system].set_index("step")["end_s"]
        k = min(a.index.max(), b.index.max())
        row["steps done (no fault)"] = f"{len(a)} ({len(b)})"
        row["last common step ends later by"] = f"{a[k] - b[k]:.0f} s (step {k})"
        rows.append(row)
    log = r.faults[["system", "t_s", "what"]].set_index("system")
    text = (
        "Training and generation throughput while the machine is down, with the same run "
        "without the failure in brackets, and how much later the runs get where the "
        "fault-free ones got:\n\n" + _table(pd.DataFrame(rows).set_index("system"))
        + "\n\n" + _table(log)
    )  # fmt: skip
    return text, facts


def _mean_rate(result, system: str, kind: str, bin_s: float, kill_s: float) -> float:
    data = throughput_over_time(result.trajectories, result.steps, system, bin_s)
    inside = (data["t_s"] >= kill_s) & (data["t_s"] + bin_s <= kill_s + 252 + 1e-9)
    return max(0.0, float(data.loc[inside, f"{kind}_tokens_per_s"].mean()))


# The document -------------------------------------------------------------------------------------


def write_document(out: Path, grid, best, repack, tail_runs, stale_runs, fault_result, *,
                   seconds, quick):  # fmt: skip
    from paper_repro_text import render

    figs = out / "paper-reproduction"
    figs.mkdir(parents=True, exist_ok=True)
    thr_text, thr = throughput_section(figs, best)
    eff, eff_text = scaling_table(best)
    rel_text, rel = relay_section(best)
    tail_text, tail = repack_tail_section(tail_runs)
    st_text, tails = staleness_section(figs, stale_runs)
    fault_text, fault = fault_section(figs, fault_result)
    eff_text.index.name = "efficiency"
    doc = render(
        paper=PAPER, thr=thr, thr_text=thr_text, eff=eff, eff_text=_table(eff_text),
        repack=repack, repack_text=_table(repack_table(repack)), tail=tail, tail_text=tail_text,
        rel=rel, rel_text=rel_text,
        st_text=st_text, tails=tails, fault=fault, fault_text=fault_text, best=best,
        seconds=seconds, quick=quick, grid=grid,
    )  # fmt: skip
    (out / "paper-reproduction.md").write_text(doc)
