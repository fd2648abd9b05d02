"""The search: analytic screen, then short simulations, then full ones for the best few.

1. **Screen** every point (``laminar.plan.screen``): infeasible points are *rejected* with the
   reason; within each GPU count and system, points whose analytic estimate is below
   ``screen_keep`` x the best estimate are *screened* out.
2. **Short** simulations (``short_steps`` trainer steps, ``short_warmup`` of them warm-up) of
   every point left; a point the simulator refuses is rejected with its message.
3. **Full** simulations (the config's own steps) of the ``top`` best short results by train
   tokens/s per GPU, the best of each system, and up to ``top`` points spread along the short
   results' Pareto front (train tokens/s per GPU against staleness).

Each stage runs as one batch of independent simulations (``laminar.plan.executors``) and its
decisions are taken on the whole batch, ties broken by point id: the plan is deterministic
whatever runs the simulations and in whichever order they finish.

Before any of it, :func:`check_plan` checks the options, the grid's size and the cost files
(``laminar.plan.checks``). A point whose resolved config equals an earlier point's (two trainer
fractions that land on one split, two spellings of one value) is a ``duplicate`` row naming
that point and is simulated once; every row's settings are read back from the config it ran
with and the simulation's summary (``laminar.plan.readback``).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from laminar.config import LaminarConfig
from laminar.errors import ConfigError, LaminarWarning
from laminar.plan.cache import ResultCache, code_fingerprint
from laminar.plan.checks import MAX_POINTS, check_bound, check_costs
from laminar.plan.evaluate import COUNTS, FIGURES, bottleneck
from laminar.plan.executors import run_tasks
from laminar.plan.readback import canonical_split, settings
from laminar.plan.screen import WorkloadStats, screen
from laminar.plan.space import Point, SearchSpace, check_extra, enumerate_points, point_data

SETTINGS = ("gpus", "system", "trainer_gpus", "rollout_tp", "max_batch", "repack", "trainer_layout")


@dataclass(frozen=True)
class PlanOptions:
    """How a plan runs (what it searches is a :class:`~laminar.plan.space.SearchSpace`)."""

    short_steps: int = 4
    short_warmup: int = 1
    screen_keep: float = 0.5
    top: int = 4
    jobs: int = 1
    address: str | None = None
    cache_dir: Path | None = None  # None: no cache
    gpu_hour_price: float | None = None  # USD per GPU-hour
    progress: bool = True
    max_points: int = MAX_POINTS  # a larger grid is refused (``laminar.plan.checks``)


@dataclass
class PlanResult:
    """Every point of a plan (one row each, ``plan.csv``) and the configs it simulated in full."""

    base: LaminarConfig
    space: SearchSpace
    options: PlanOptions
    points: pd.DataFrame
    full_configs: dict[int, LaminarConfig] = field(default_factory=dict)
    best: int | None = None  # point id of the best full simulation
    meta: dict[str, Any] = field(default_factory=dict)


def check_plan(base: LaminarConfig, space: SearchSpace, opts: PlanOptions) -> int:
    """What is checked before any work (options, the grid's keys and size, cost files); the
    number of points."""
    _check_options(base, opts)
    check_extra(space)
    n = check_bound(base, space, opts.max_points, opts.short_steps)
    check_costs(base, space)
    return n


def run_plan(base: LaminarConfig, space: SearchSpace, opts: PlanOptions) -> PlanResult:
    """Search ``space`` around ``base`` (see module docstring)."""
    t0 = time.perf_counter()
    check_plan(base, space, opts)
    points = enumerate_points(base, space)
    cache = ResultCache(opts.cache_dir, code_fingerprint())
    rows, configs = _screen_all(base, points, sorted(space.extra), cache)
    _screen_out(rows, opts.screen_keep)
    short = [p.pid for p in points if rows[p.pid]["status"] == "feasible"]
    short_cfgs = {pid: _short(configs[pid], opts) for pid in short}
    results, n_short, ran_short = _simulate(short_cfgs, cache, opts, "short")
    for pid, res in results.items():
        _record(rows[pid], res, "short")
    chosen = _for_full(rows, opts.top)
    full_cfgs = {pid: configs[pid] for pid in chosen}
    results, n_full, ran_full = _simulate(full_cfgs, cache, opts, "full")
    for pid, res in results.items():
        _record(rows[pid], res, "full")
    cache.finish()
    frame = _frame(points, rows, sorted(space.extra), opts)
    failed = int((frame["status"] == "failed").sum())
    if failed:
        msg = f"{failed} point(s) failed inside the simulator: a bug in laminar (plan.csv's "
        warnings.warn(msg + "reason column holds the error)", LaminarWarning, stacklevel=2)
    full = frame[frame["status"] == "full"]
    best = None
    if len(full):
        best = int(full.sort_values(["train_tokens_per_s_per_gpu", "pid"],
                                    ascending=[False, True]).iloc[0]["pid"])  # fmt: skip
    meta = {
        "points": len(points),
        "duplicates": int((frame["status"] == "duplicate").sum()),
        "failed": failed,
        "simulated_short": n_short,  # distinct configs; a point's settings are in its row
        "simulated_full": n_full,
        "simulations_run": ran_short + ran_full,
        "cache_hits": cache.hits,
        "cache_misses": cache.misses,
        "cache_bad_entries": cache.bad,
        "cache_dir": str(opts.cache_dir) if opts.cache_dir else None,
        "wall_s": time.perf_counter() - t0,
    }
    return PlanResult(base, space, opts, frame, full_cfgs, best, meta)


def _check_options(base: LaminarConfig, opts: PlanOptions) -> None:
    if opts.short_steps < 2:
        raise ConfigError("laminar plan", "--short-steps", "must be at least 2")
    if not 0 <= opts.short_warmup < opts.short_steps:
        raise ConfigError("laminar plan", "--short-warmup", "must be 0..short steps - 1")
    if not 0 <= opts.screen_keep <= 1:
        raise ConfigError("laminar plan", "--screen-keep", "must be within 0..1")
    if opts.top < 1:
        raise ConfigError("laminar plan", "--top", "must be at least 1")
    if opts.jobs < 1:
        raise ConfigError("laminar plan", "--jobs", "must be at least 1")
    if opts.max_points < 1:
        raise ConfigError("laminar plan", "--max-points", "must be at least 1")
    if opts.gpu_hour_price is not None and not opts.gpu_hour_price > 0:
        raise ConfigError("laminar plan", "--gpu-hour-price", "must be positive (USD)")


def _screen_all(base: LaminarConfig, points: list[Point], extra_keys, cache: ResultCache):
    """Rows (one per point: its settings read back, the screen's verdict) and the configs of
    the feasible points; a point whose config an earlier point already has is a duplicate."""
    from laminar.config.loader import validate
    from laminar.sim.registry import all_systems

    registry = all_systems()
    base_data = base.model_dump(mode="json")
    stats: dict[str, WorkloadStats] = {}
    first: dict[str, int] = {}
    rows: dict[int, dict] = {}
    configs: dict[int, LaminarConfig] = {}
    for p in points:
        row = rows[p.pid] = {"status": "rejected", "reason": "", "bottleneck": ""}
        try:
            data = point_data(base_data, p)
            row.update(settings(data, extra_keys))
            cfg = validate(data, f"plan point {p.pid}", {})
        except ConfigError as e:
            row.setdefault("gpus", p.gpus)  # no config was made: the overrides tried
            row.setdefault("system", p.system)
            row["reason"] = str(e)
            continue
        cfg = canonical_split(cfg, registry[cfg.sim.systems[0]])
        dump = cfg.model_dump(mode="json")
        row.update(settings(dump, extra_keys, cfg))
        key = cache.key(dump)
        if key in first:
            row.update(status="duplicate", reason=f"the same configuration as point {first[key]}")
            continue
        first[key] = p.pid
        wkey = cfg.workload.model_dump_json() + str(cfg.seed)
        if wkey not in stats:
            from laminar.traces import load_workload

            stats[wkey] = WorkloadStats.of(cfg, load_workload(cfg))
        _screen_row(row, cfg, stats[wkey], configs, p.pid)
    return rows, configs


def _screen_row(row: dict, cfg: LaminarConfig, stats: WorkloadStats, configs, pid: int) -> None:
    s = screen(cfg, stats)
    row.update(bottleneck=s.bottleneck, estimate_tokens_per_s=s.estimate_tokens_per_s)
    if s.feasible:
        row.update(status="feasible", trainer_gpus=s.trainer_gpus, replicas=s.replicas)
        configs[pid] = cfg
    else:
        row["reason"] = s.reason
    row["_group"] = (row["gpus"], row["system"])


def _screen_out(rows: dict[int, dict], keep: float) -> None:
    """Within each (GPU count, system), drop points estimated below ``keep`` x the best."""
    best: dict[tuple, float] = {}
    for row in rows.values():
        if row["status"] == "feasible":
            g = row["_group"]
            best[g] = max(best.get(g, 0.0), row["estimate_tokens_per_s"])
    for row in rows.values():
        if row["status"] == "feasible":
            top = best[row["_group"]]
            if row["estimate_tokens_per_s"] < keep * top:
                row["status"] = "screened"
                row["reason"] = (
                    f"analytic estimate {row['estimate_tokens_per_s']:.4g} tokens/s is below "
                    f"{keep:g} x the best of its system and GPU count ({top:.4g})"
                )


def _short(cfg: LaminarConfig, opts: PlanOptions) -> LaminarConfig:
    steps = min(opts.short_steps, cfg.workload.steps)
    warmup = min(opts.short_warmup, steps - 1)
    return cfg.model_copy(
        update={
            "workload": cfg.workload.model_copy(update={"steps": steps}),
            "sim": cfg.sim.model_copy(update={"warmup_steps": warmup}),
        }
    )


def _simulate(cfgs: dict[int, LaminarConfig], cache: ResultCache, opts: PlanOptions, stage: str):
    """(Results by point id, distinct configs, simulations run): each distinct config once,
    from this plan's earlier results, the cache, or a simulation (then cached)."""
    from tqdm import tqdm

    data = {pid: cfg.model_dump(mode="json") for pid, cfg in cfgs.items()}
    keys = {pid: cache.key(d) for pid, d in data.items()}
    by_key: dict[str, dict] = {}
    todo: dict[str, dict] = {}
    for pid in sorted(data):
        k = keys[pid]
        if k in by_key or k in todo:
            continue
        hit = cache.get(k, data[pid])
        if hit is not None:
            by_key[k] = hit
        else:
            todo[k] = data[pid]
    tasks = list(todo.items())
    disable = None if opts.progress else True
    with tqdm(total=len(tasks), desc=f"plan: {stage}", unit="sim", disable=disable) as bar:
        fresh = run_tasks(tasks, jobs=opts.jobs, address=opts.address, tick=lambda: bar.update(1))
    for k, res in fresh.items():
        cache.put(k, res, todo[k])
        by_key[k] = cache.memory[k]
    return {pid: by_key[keys[pid]] for pid in sorted(data)}, len(set(keys.values())), len(tasks)


def _record(row: dict, res: dict, stage: str) -> None:
    """A simulation's result into its row; GPUs, system and trainer GPUs as it ran them."""
    if not res["ok"]:
        status = "failed" if res.get("failed") else "rejected"
        row.update(status=status, reason=res["reason"], bottleneck="")
        return
    row.update(gpus=res["gpus"], system=res["system"])
    row["status"] = stage
    row["reason"] = ""
    row["bottleneck"] = bottleneck(res)
    for name in (*FIGURES, *COUNTS):
        row[name] = res[name]
    row["steady_state"] = res.get("steady_state", "")
    if stage == "short":
        row["short_train_tokens_per_s"] = res["train_tokens_per_s"]


def _for_full(rows: dict[int, dict], top: int) -> list[int]:
    """Point ids to simulate in full (see module docstring, step 3)."""
    done = [
        (pid, r) for pid, r in sorted(rows.items())
        if r["status"] == "short" and r.get("train_tokens_per_s") is not None
    ]  # fmt: skip
    if not done:
        return []
    per_gpu = {pid: r["train_tokens_per_s"] / _gpus(r) for pid, r in done}
    ranked = sorted(per_gpu, key=lambda pid: (-per_gpu[pid], pid))
    chosen = set(ranked[:top])
    seen_groups: set = set()
    for pid in ranked:
        g = rows[pid]["_group"][1]
        if g not in seen_groups:
            seen_groups.add(g)
            chosen.add(pid)
    stale = {pid: r["staleness_mean"] for pid, r in done}
    front = sorted(pareto_ids(per_gpu, stale), key=lambda pid: (stale[pid], pid))
    if len(front) > top:  # ``top`` points spread along the front, both ends included
        front = [front[round(i * (len(front) - 1) / max(top - 1, 1))] for i in range(top)]
    chosen |= set(front)
    return sorted(chosen)


def _gpus(row: dict) -> int:
    return row["gpus"]


def pareto_ids(higher: dict[int, float], lower: dict[int, float | None]) -> list[int]:
    """Ids not dominated: no other is at least as good on both (``higher`` up, ``lower`` down)
    and better on one. Missing values (None/NaN) never dominate and are never on the front."""
    ok = [i for i in higher if _num(higher[i]) and _num(lower.get(i))]
    front = []
    for i in ok:
        dominated = any(
            higher[j] >= higher[i] and lower[j] <= lower[i]
            and (higher[j] > higher[i] or lower[j] < lower[i])
            for j in ok
        )  # fmt: skip
        if not dominated:
            front.append(i)
    return sorted(front)


def _num(v) -> bool:
    return v is not None and v == v


def _frame(points: list[Point], rows: dict[int, dict], extra_keys, opts) -> pd.DataFrame:
    """``plan.csv``: one row per point, in point order; settings as read back."""
    records = []
    for p in points:
        r = rows[p.pid]
        rec = {"pid": p.pid, **{k: r.get(k) for k in (*SETTINGS, *extra_keys)}}
        rec.update({
            "status": r["status"],
            "bottleneck": r["bottleneck"],
            "estimate_tokens_per_s": r.get("estimate_tokens_per_s"),
            "short_train_tokens_per_s": r.get("short_train_tokens_per_s"),
        })  # fmt: skip
        for name in FIGURES:
            rec[name] = r.get(name)
        rec["replicas"] = r.get("replicas")
        rec["steps"] = r.get("steps")
        rec["steady_state"] = r.get("steady_state", "")
        tps, gpus = rec["train_tokens_per_s"], rec["gpus"]
        rec["train_tokens_per_s_per_gpu"] = tps / gpus if _num(tps) else None
        if opts.gpu_hour_price is not None:
            rec["usd_per_million_tokens"] = (
                opts.gpu_hour_price * gpus / 3600 / tps * 1e6 if _num(tps) and tps > 0 else None
            )
        rec["reason"] = r["reason"]
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    for col in ("trainer_gpus", "replicas", "steps"):
        df[col] = df[col].astype("Int64")  # counts stay integers next to missing values
    return df
