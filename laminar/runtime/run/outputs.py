"""The run directory of ``laminar train``: data first.

- ``summary.json``: the run in one object (throughput, reward, staleness, the ledger's counts);
- ``steps.csv``: one row per trainer step;
- ``trajectories.parquet``: one row per finished trajectory in the trace schema
  (``laminar/traces/schema.py``) with the measured timing columns, so ``laminar replay`` can
  replay a real run in the simulator;
- ``events.csv`` (repack moves, recoveries), ``kv.csv`` (per-replica KV use at each manager
  check) and ``config.yaml`` (the resolved config);
- ``profile/``: what ``laminar calibrate`` fits the simulator to (``profiling.py``).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pandas as pd

from laminar.config import LaminarConfig, write_resolved
from laminar.runtime.data.manager import as_ran
from laminar.runtime.profiling.profile import write_profile
from laminar.traces.io import write_trace


def trajectory_frame(ledger: list[dict], steps: int) -> pd.DataFrame:
    """Finished trajectories as a schema trace; unconsumed ones get ``step = steps`` (next).

    ``response_len`` counts generated tokens; a multi-turn task's trace (an environment with
    ``step``) also has ``turns`` and ``tool_latency_s`` (the mean seconds of its environment's
    calls between turns), the columns the simulator's ``tool-calling`` workload reads."""
    rows = []
    for row in ledger:
        t = row["traj"]
        consumed = row["consumed_version"]
        rows.append(
            {
                "step": row.get("step", steps),
                "prompt_id": t.prompt_id,
                "sample_index": t.sample_index,
                "prompt_len": len(t.prompt_ids),
                "response_len": t.generated_tokens,
                "finish_reason": t.finish_reason,
                "gen_start_s": t.gen_start_s,
                "gen_end_s": t.gen_end_s,
                "replica_id": t.replica_id,
                "weight_version": t.version,
                "weight_versions": str(t.version),
                "consumed_version": consumed,
                "consumed_s": row["consumed_s"],
                "staleness": consumed - t.version if consumed >= 0 else -1,
                "reward": t.reward,
                "migrations": t.migrations,
            }
        )
        if getattr(t, "source_id", ""):  # an environment's own id (laminar.runtime.envs)
            rows[-1]["source_prompt_id"] = t.source_id
        if t.turns > 0:  # a multi-turn task's (laminar.runtime.rollout.turns)
            rows[-1].update(turns=t.turns, tool_latency_s=round(t.tool_latency_s, 6))
    df = pd.DataFrame(rows)
    if "turns" in df:  # every row has them (one a checkpoint of an older Laminar kept: 1 turn)
        df["turns"] = df["turns"].fillna(1).astype("int64")
        df["tool_latency_s"] = df["tool_latency_s"].fillna(0.0)
    return df.sort_values(["step", "prompt_id", "sample_index"])


def env_errors(ledger: list[dict]) -> dict:
    """Finished trajectories scored 0 because the environment (or verifier) failed, counted by
    reason (``reward_timeout``, ``prompt_invalid``, ...), and the first detail of each."""
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    for row in ledger:
        error = getattr(row["traj"], "env_error", "")
        if error:
            reason = error.partition(":")[0]
            counts[reason] = counts.get(reason, 0) + 1
            examples.setdefault(reason, error)
    return {"env_errors": dict(sorted(counts.items())), "env_error_examples": examples}


def accounting(result: dict, samples_per_prompt: int) -> dict:
    """The ledger's counts: issued = consumed + finished-but-unconsumed + in progress + lost."""
    ledger = result["ledger"]
    issued = result["issued_groups"] * samples_per_prompt
    consumed = sum(1 for r in ledger if r["consumed_version"] >= 0)
    finished_ids = {r["traj"].traj_id for r in ledger}
    pending_ids = {t.traj_id for t in result["pending"]}
    finished, pending = len(finished_ids), len(pending_ids)
    delivery = result.get("delivery", {})
    return {
        "trajectories_issued": issued,
        "trajectories_generated": finished,
        "trajectories_consumed": consumed,
        "trajectories_pending": (finished - consumed) + pending,
        "trajectories_in_progress": pending,
        "trajectories_lost": issued - len(finished_ids | pending_ids),
        "trajectories_double_counted": len(finished_ids & pending_ids),
        # handed to the trainer more than once (the buffer's exactly-once guarantee: 0)
        "trajectories_duplicated": len(delivery.get("consumed_twice", [])),
        # deliveries of an already finished trajectory, dropped by the buffer (a replica
        # declared dead that still delivered, or recovery racing a delivery)
        "duplicate_deliveries_dropped": len(delivery.get("duplicate_deliveries", [])),
        "trajectories_restarted": len(result["manager"].get("restarted", [])),
    }


def ledger_problems(summary: dict) -> str:
    """Empty when every issued trajectory ended consumed once, pending, or restarted and then
    one of those; else what is wrong, in words."""
    bad = [
        f"{summary[k]} {k.removeprefix('trajectories_').replace('_', ' ')}"
        for k in ("trajectories_lost", "trajectories_duplicated", "trajectories_double_counted")
        if summary.get(k)
    ]
    return ", ".join(bad)


def skipped_faults(summary: dict) -> str:
    """Empty when every scheduled fault happened; else each one that did not, with why (the
    supervisor's ``skipped``: no such target at run time, or the run ended first). A fault
    asked for and not carried out is a failed run, not a survived one (issue 32)."""
    bad = [f"{f.get('spec', f['kind'])} ({f['skipped']})" for f in summary.get("faults", [])
           if f.get("skipped")]  # fmt: skip
    return "; ".join(bad)


def generated_tokens(result: dict) -> int:
    """Tokens every rollout generated in the run, the dead ones' too: a live rollout's own count
    at the end, a dead one's last count the manager polled (its ``kv_series``; what it made
    after that poll is not seen). Counting the live rollouts alone lost a dead rollout's tokens,
    all of them when the run's trajectories were generated before the deaths."""
    last: dict[str, int] = {}
    polled = result.get("manager", {}).get("kv_series", [])
    for i, s in enumerate([*polled, *result["rollout_stats"]]):
        rid = s.get("replica_id") or f"#{i}"  # one without an id is a rollout of its own
        last[rid] = max(last.get(rid, 0), int(s["gen_tokens"]))
    return sum(last.values())


def summarize(cfg: LaminarConfig, result: dict) -> dict:
    """``summary.json``: every figure the issue asks for, plus what explains them."""
    steps, wall_s = result["steps"], result["wall_s"]
    k = max(1, len(steps) // 5)  # reward_first/last: mean over the first/last fifth of steps
    rewards = [s["reward_mean"] for s in steps]
    consumed = [r for r in result["ledger"] if r["consumed_version"] >= 0]
    stale = [r["consumed_version"] - r["traj"].version for r in consumed]
    gen_tokens = generated_tokens(result)
    events = result["manager"]["events"]
    repacks = [e for e in events if e["kind"] == "repack"]
    return {
        "mode": cfg.runtime.mode,
        "steps": len(steps),
        "wall_s": wall_s,
        "setup_s": result["setup_s"],
        "train_tokens_per_s": sum(s["tokens"] for s in steps) / wall_s,
        "gen_tokens_per_s": gen_tokens / wall_s,
        # Held-out evaluation with the first (warm-up) and the final weights: unbiased, unlike
        # training batches, whose mix of short and long answers varies from step to step.
        "reward_first": result["eval_first"]["reward"],
        "reward_last": result["eval_last"]["reward"],
        "reward_first_version": result["eval_first"]["version"],
        "reward_last_version": result["eval_last"]["version"],
        "train_reward_first": statistics.fmean(rewards[:k]) if rewards else math.nan,
        "train_reward_last": statistics.fmean(rewards[-k:]) if rewards else math.nan,
        "staleness_mean": statistics.fmean(stale) if stale else 0.0,
        "staleness_max": max(stale, default=0),
        **accounting(result, cfg.workload.samples_per_prompt),
        **env_errors(result["ledger"]),
        "repack_moves": len(repacks),
        "repack_trajectories_moved": sum(e["moved"] for e in repacks),
        "recoveries": sum(1 for e in events if e["kind"] == "recovery"),
        "rollouts_failed": result.get("dead_rollouts", []),
        "faults": [
            {k: v for k, v in f.items() if k != "open"} for f in result["info"].get("faults", [])
        ],
        "resumed": result["info"].get("resumed"),
        "actor_stall_s_mean": statistics.fmean(s["publish_s"] for s in steps) if steps else 0.0,
        "trainer_wait_s": sum(s["wait_s"] for s in steps),
        "weight_loads": sum(len(s["loads"]) for s in result["rollout_stats"]),
        "rollouts": cfg.runtime.rollouts,
        "params": result["info"].get("params"),
        "warmup_s": result["info"].get("warmup_s"),
        "warmup_cached": result["info"].get("warmup_cached"),
        "engine_start_s": result["info"].get("engine_start_s"),
        "engine_shm_files": result["info"].get("engine_shm_files", []),
        "peak_rss_gib": {k: v / 2**30 for k, v in result["peak_rss_bytes"].items()},
        "run_id": result["run_id"],
    }


def write_run_dir(cfg: LaminarConfig, result: dict, out: Path) -> dict:
    """Write every file of the run directory into ``out`` (a staging dir); return the summary."""
    summary = summarize(cfg, result)
    write_resolved(as_ran(cfg), out)  # the bound repack ran with (manager.as_ran)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    pd.DataFrame(result["steps"]).to_csv(out / "steps.csv", index=False)
    if result["ledger"]:
        frame = trajectory_frame(result["ledger"], len(result["steps"]))
        write_trace(frame, out / "trajectories.parquet")
    events = result["manager"]["events"]
    pd.DataFrame(events or [{"kind": None}]).dropna(how="all").to_csv(
        out / "events.csv", index=False
    )
    pd.DataFrame(result["manager"]["kv_series"]).to_csv(out / "kv.csv", index=False)
    (out / "faults.json").write_text(json.dumps(summary["faults"], indent=2, default=str) + "\n")
    pending = [
        {
            "traj_id": t.traj_id,
            "replica_id": t.replica_id,
            "weight_version": t.version,
            "tokens": len(t.tokens),
            "migrations": t.migrations,
        }
        for t in result["pending"]
    ]
    pd.DataFrame(
        pending, columns=["traj_id", "replica_id", "weight_version", "tokens", "migrations"]
    ).to_csv(out / "in_progress.csv", index=False)
    write_profile(cfg, result, out)
    return summary
