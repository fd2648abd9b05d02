"""One simulation of a plan point, and the cache of their results by config hash.

:func:`evaluate` is what a worker runs (a local process or a Ray task): it takes a config as a
plain mapping, simulates it in summary-only mode and returns plain figures, so nothing but
JSON crosses a process boundary. A config error (a point the simulator refuses) is a result
too: the point is rejected with the message as its reason.

The cache key is a hash of the resolved config and of the simulator's own files (its code,
the cost data, the presets), so a rerun of a plan is instant and a changed simulator never
reuses an old answer. The cache lives in ``$XDG_CACHE_HOME/laminar/plan`` (default
``~/.cache/laminar/plan``) unless ``laminar plan --cache-dir`` says otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import laminar

FIGURES = (
    "train_tokens_per_s",
    "gen_tokens_per_s",
    "staleness_mean",
    "staleness_max",
    "mean_kv_util",
    "rollout_idle_frac",
    "actor_stall_s_mean",
    "weight_wait_s_mean",
    "step_time_s_mean",
)
COUNTS = ("trainer_gpus", "replicas", "steps")

# Parts of the package whose change can change a simulation's result.
_FINGERPRINT_DIRS = ("sim", "policy", "traces", "config", "data", "presets", "specs")


def evaluate(config: dict[str, Any]) -> dict[str, Any]:
    """Simulate ``config`` (a ``LaminarConfig.model_dump``): summary figures, the share of the
    trainer's step time spent waiting for data, training and handing weights over, or
    ``{"ok": False, "reason": ...}`` when the simulator refuses the config."""
    from laminar.config import LaminarConfig
    from laminar.errors import LaminarError
    from laminar.sim import simulate

    try:
        cfg = LaminarConfig.model_validate(config)
        result = simulate(cfg, summary_only=True)
    except LaminarError as e:
        return {"ok": False, "reason": str(e)}
    row = result.summary.iloc[0]
    out: dict[str, Any] = {"ok": True}
    for name in FIGURES:
        v = row[name]
        out[name] = None if v != v else float(v)  # NaN (a run cut short) -> None
    for name in COUNTS:
        out[name] = int(row[name])
    out["steady_state"] = str(row.get("steady_state", ""))
    steps = result.steps
    win = steps[steps["step"] >= int(row["warmup_steps"])]  # ``auto`` resolved by the run
    total = float((win["end_s"] - win["start_s"] + win["data_wait_s"]).sum())
    for key, col in (("wait_frac", "data_wait_s"), ("train_frac", "train_s"),
                     ("stall_frac", "actor_stall_s")):  # fmt: skip
        out[key] = float(win[col].sum()) / total if total > 0 else None
    return out


def bottleneck(result: dict[str, Any]) -> str:
    """What limits a simulated point: the largest share of the trainer's step time.

    Waiting for data means generation is too slow; training time means the trainer is; the
    weight hand-over (actor stall, or a baseline's global sync) means weight sync."""
    parts = {
        "generation": result.get("wait_frac"),
        "training": result.get("train_frac"),
        "weight sync": result.get("stall_frac"),
    }
    parts = {k: v for k, v in parts.items() if v is not None}
    return max(parts, key=parts.get) if parts else ""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "laminar" / "plan"


def code_fingerprint() -> str:
    """A hash of the files a simulation's result depends on (and of the package version)."""
    root = Path(laminar.__file__).parent
    h = hashlib.sha256(laminar.__version__.encode())
    for d in _FINGERPRINT_DIRS:
        for p in sorted((root / d).rglob("*")) if (root / d).is_dir() else []:
            if p.is_file() and p.suffix in (".py", ".json", ".yaml", ".csv"):
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()


class ResultCache:
    """Results by config hash, one JSON file each (``None`` directory: no cache)."""

    def __init__(self, directory: Path | None, fingerprint: str):
        self.dir = directory
        self.fingerprint = fingerprint
        self.hits = 0
        self.misses = 0

    def key(self, config: dict[str, Any]) -> str:
        text = json.dumps(config, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256((self.fingerprint + text).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        if self.dir is None:
            self.misses += 1
            return None
        path = self.dir / key[:2] / f"{key}.json"
        try:
            out = json.loads(path.read_text())
        except (OSError, ValueError):  # absent, or torn by a crash: simulate again
            self.misses += 1
            return None
        self.hits += 1
        return out

    def put(self, key: str, result: dict[str, Any]) -> None:
        if self.dir is None:
            return
        folder = self.dir / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(result, f)
        os.replace(tmp, folder / f"{key}.json")
