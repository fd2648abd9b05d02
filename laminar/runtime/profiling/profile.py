"""What ``laminar calibrate`` needs from a run, recorded in the run directory's ``profile/``.

- ``engine_steps.csv``: engine steps, sampled (every step until ``MAX_STEP_ROWS``, then every
  2nd, 4th, ...): the step's wall seconds on the engine's own clock (the median inter-token
  latency of the sequences it decoded, so the front end's delays do not count), sequences
  decoded, prompt tokens prefilled in it, KV tokens held (prompt + generated tokens of the
  replica's trajectories), vLLM's block-level KV use, running/waiting counts;
- ``trainer_steps.csv``: per trainer step: wall and CPU seconds of the update, tokens and the
  sum of squared sequence lengths trained on, publish seconds (the actor stall), load average;
- ``weight_loads.csv``: every weight load of a rollout (seconds, bytes);
- ``speed_probe.csv``: the machine's speed beside the run (``speedprobe.py``);
- ``core_cpu.csv``: where the job's cores went beside the run (``corecpu.py``);
- ``machine.json``: where things ran (cores of every replica and of the trainer, threads), KV
  capacity, weight bytes, model size, CPU count: what the simulator needs to rebuild the job.

The rollout actor owns one :class:`EngineStepRecorder` per job; the engine calls it after every
step it runs (``VllmEngine.step_listener``). Nothing here imports vLLM, Ray or torch.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path

import pandas as pd

from laminar.runtime.profiling import speedprobe

PROFILE_DIR = "profile"
MAX_STEP_ROWS = 20_000  # per replica and job; past it the sampling stride doubles
ENGINE_COLUMNS = [
    "replica_id",
    "at_s",
    "step_s",
    "decode_seqs",
    "prefill_seqs",
    "prefill_tokens",
    "kv_tokens",
    "kv_usage",
    "running",
    "waiting",
]


class EngineStepRecorder:
    """Sampled engine-step rows of one replica in one job (module docstring)."""

    def __init__(self, replica_id: str, t0_s: float, max_rows: int = MAX_STEP_ROWS):
        self.replica_id = replica_id
        self.t0_s = t0_s
        self.max_rows = max_rows
        self.rows: list[tuple] = []
        self.stride = 1
        self.seen = 0

    def record(
        self,
        at_unix_s: float,
        step_latencies_s: list[float],
        prefill_seqs: int,
        prefill_tokens: int,
        kv_tokens: int,
        kv_usage: float,
        running: int,
        waiting: int,
    ) -> None:
        """One engine step. Steps with no decoded sequence carry no timing and are skipped."""
        if not step_latencies_s:
            return
        self.seen += 1
        if self.seen % self.stride:
            return
        step_s = statistics.median(step_latencies_s)
        self.rows.append(
            (self.replica_id, at_unix_s - self.t0_s, step_s, len(step_latencies_s),
             prefill_seqs, prefill_tokens, kv_tokens, kv_usage, running, waiting)
        )  # fmt: skip
        if len(self.rows) >= self.max_rows:  # keep every other row, sample half as often
            self.rows = self.rows[::2]
            self.stride *= 2

    def table(self) -> list[tuple]:
        """The rows recorded so far (``ENGINE_COLUMNS``)."""
        return list(self.rows)


def machine_facts() -> dict:
    """The host: CPU count, model name, Python; recorded once per run."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_count": os.cpu_count(), "cpu_model": cpu, "python": platform.python_version()}


def write_profile(cfg, result: dict, out: Path) -> None:
    """Write ``out/profile/`` from a finished run's raw results (see module docstring)."""
    prof = out / PROFILE_DIR
    prof.mkdir(exist_ok=True)
    stats = result.get("rollout_stats", [])
    rows = [row for s in stats for row in s.get("engine_steps", [])]
    pd.DataFrame(rows, columns=ENGINE_COLUMNS).to_csv(prof / "engine_steps.csv", index=False)
    info = result.get("info", {})
    weight_bytes = info.get("weight_bytes") or 0
    loads = [
        {"replica_id": s["replica_id"], "at_s": at, "version": v, "load_s": sec,
         "bytes": weight_bytes}
        for s in stats
        for at, v, sec in s.get("loads", [])
    ]  # fmt: skip
    pd.DataFrame(loads, columns=["replica_id", "at_s", "version", "load_s", "bytes"]).to_csv(
        prof / "weight_loads.csv", index=False
    )
    _trainer_table(result).to_csv(prof / "trainer_steps.csv", index=False)
    speed = result.get("speed_probe")
    (speedprobe.empty() if speed is None else speed).to_csv(prof / "speed_probe.csv", index=False)
    cores = result.get("core_cpu")
    (speedprobe.empty_cores() if cores is None else cores).to_csv(prof / "core_cpu.csv",
                                                                   index=False)
    (prof / "machine.json").write_text(json.dumps(_machine(cfg, result), indent=2) + "\n")


def _trainer_table(result: dict) -> pd.DataFrame:
    """Per trainer step: what it trained on (from the ledger) and what it took."""
    sq: dict[int, int] = {}
    for row in result.get("ledger", []):
        step = row.get("step")
        if step is None or row["consumed_version"] < 0:
            continue
        t = row["traj"]
        n = len(t.prompt_ids) + len(t.tokens)
        sq[step] = sq.get(step, 0) + n * n
    cols = ["step", "train_s", "train_cpu_s", "publish_s", "wait_s", "tokens", "trajectories"]
    cols += ["loadavg_1m"]
    df = pd.DataFrame(result.get("steps", []))
    df = df.reindex(columns=cols)
    df["tokens_sq"] = [sq.get(int(s), 0) for s in df["step"]] if len(df) else []
    return df


def _machine(cfg, result: dict) -> dict:
    rt = cfg.runtime
    where = rt.placement()
    info = result.get("info", {})
    stats = result.get("rollout_stats", [])
    caps = [s.get("kv_capacity_tokens") for s in stats if s.get("kv_capacity_tokens")]
    return {
        "mode": rt.mode,
        "device": rt.device,
        "rollouts": rt.rollouts,
        "rollout_cpus": [list(c) for c in where.rollout_cpus],
        "trainer_cpus": list(where.trainer_cpus),
        "trainer_threads": where.trainer_threads(rt.trainer_threads),
        "trainer_ranks": getattr(rt, "trainer_ranks", 1),
        "rollout_threads": rt.rollout_threads,
        "max_batch": rt.max_batch,
        "kv_capacity_tokens": min(caps) if caps else None,
        "params": info.get("params"),
        "weight_bytes": info.get("weight_bytes"),
        "model": cfg.model.name,
        **machine_facts(),
    }
