"""The cache of plan results by config hash, checked on every read.

The key is a hash of the resolved config and of the simulator's own files (its code, the cost
data, the presets), so a rerun of a plan is instant and a changed simulator never reuses an
old answer. Each entry is one JSON file, written atomically (a temporary file renamed over it).

An entry is used only when it is the result of the config it is read for (:func:`problem`):
its schema and key, its system and GPU count, counts within the config's (trainer GPUs, steps),
finite non-negative figures in range (shares within 0..1, staleness at most the config's steps,
at most a billion tokens/s a GPU). Anything else (torn, not JSON, edited, not a regular file) is
simulated again with a ``laminar: warning`` naming the entry, and replaced.

The cache lives in ``$XDG_CACHE_HOME/laminar/plan`` (default ``~/.cache/laminar/plan``) unless
``laminar plan --cache-dir`` says otherwise. :func:`prepare_cache_dir`: a ``--cache-dir`` that
cannot be used is an error; the default one, a warning and a plan without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import laminar
from laminar.errors import ConfigError, LaminarError, LaminarWarning
from laminar.inputfile import finite_number, load_json
from laminar.plan.evaluate import FIGURES, SHARES

SCHEMA = 2
MAX_ENTRY_BYTES = 1 << 20  # an entry is ~1 KB; a rejection's reason at most a few KB
MAX_TOKENS_PER_S_PER_GPU = 1e9
"""No GPU decodes or trains a billion tokens a second: a cached rate above this is corrupt."""
WARN_EACH = 5  # bad entries named one by one; beyond, one line counts the rest

# Parts of the package whose change can change a simulation's result.
_FINGERPRINT_DIRS = ("sim", "policy", "traces", "config", "data", "presets", "specs")


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


def prepare_cache_dir(path: Path, *, explicit: bool) -> Path | None:
    """``path`` created and checked writable. When it cannot be used: ``explicit``
    (``--cache-dir``) raises ConfigError; the default directory warns and gives None (no
    cache: a read-only home must not stop a plan)."""
    try:
        if "\x00" in str(path):
            raise ValueError("a path cannot hold a NUL character")
        if path.exists() and not path.is_dir():
            raise ValueError("exists and is not a directory")
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        if explicit:
            raise ConfigError("laminar plan", "--cache-dir", f"{path}: {why}") from None
        warnings.warn(f"plan cache {path}: {why}; planning without a cache (--cache-dir DIR to "
                      "use another)", LaminarWarning, stacklevel=2)  # fmt: skip
        return None
    return path


def problem(entry: Any, key: str, config: dict) -> str:
    """Why ``entry`` cannot be the cached result of ``config`` under ``key`` ('' if it can)."""
    if not isinstance(entry, dict):
        return f"expected a JSON object, got {type(entry).__name__}"
    if entry.get("schema") != SCHEMA or entry.get("key") != key:
        return "written by another version, or for another config (schema or key differs)"
    if not isinstance(entry.get("ok"), bool):
        return "'ok' must be true or false"
    if not entry["ok"]:
        reason = entry.get("reason")
        ok = isinstance(reason, str) and 0 < len(reason) <= 100_000
        return "" if ok else "a rejection needs its reason (text)"
    try:
        _check_result(entry, config)
    except ValueError as e:
        return str(e)
    return ""


def _check_result(res: dict, config: dict) -> None:
    """ValueError naming the first figure or count that ``config`` could not have produced."""
    cluster, workload = config["cluster"], config["workload"]
    gpus, steps = cluster["gpus"], workload["steps"]
    if res.get("system") != config["sim"]["systems"][0] or res.get("gpus") != gpus:
        raise ValueError(f"simulated {res.get('system')!r} on {res.get('gpus')!r} GPUs, but "
                         f"the config is {config['sim']['systems'][0]!r} on {gpus}")  # fmt: skip
    for name, high in (("trainer_gpus", gpus), ("replicas", gpus), ("steps", steps)):
        v = res.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= high:
            raise ValueError(f"{name} must be a whole number within 0..{high}, got {v!r:.40}")
    highs = {
        "train_tokens_per_s": MAX_TOKENS_PER_S_PER_GPU * gpus,
        "gen_tokens_per_s": MAX_TOKENS_PER_S_PER_GPU * gpus,
        "staleness_mean": steps,
        "staleness_max": steps,
        "mean_kv_util": 1.0 + 1e-9,
        "rollout_idle_frac": 1.0 + 1e-9,
        "step_time_s_mean": config["sim"]["max_sim_time_s"],
    }
    for name in (*FIGURES, *SHARES):
        v = res.get(name, "absent")
        if v is not None:
            high = highs.get(name, 1.0 + 1e-9 if name in SHARES else None)
            finite_number(v, name, low=0.0, high=high)
    if not isinstance(res.get("steady_state", ""), str):
        raise ValueError("steady_state must be text")


class ResultCache:
    """Results by config hash: one JSON file each under ``directory`` (None: no files), and
    every result of this plan in memory, so one config is simulated once."""

    def __init__(self, directory: Path | None, fingerprint: str):
        self.dir = directory
        self.fingerprint = fingerprint
        self.memory: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0
        self.bad = 0
        self._write_failed = False

    def key(self, config: dict[str, Any]) -> str:
        text = json.dumps(config, sort_keys=True, separators=(",", ":"))
        # the schema too: entries of an older layout are not found, rather than refused
        return hashlib.sha256(f"{self.fingerprint}/{SCHEMA}/{text}".encode()).hexdigest()

    def path(self, key: str) -> Path | None:
        return None if self.dir is None else self.dir / key[:2] / f"{key}.json"

    def get(self, key: str, config: dict[str, Any]) -> dict[str, Any] | None:
        """The result of ``config`` if this plan has it or the cache holds a sound one."""
        if key in self.memory:
            return self.memory[key]
        path = self.path(key)
        if path is None or not os.path.lexists(path):
            self.misses += 1
            return None
        try:
            entry = load_json(path, kind="plan cache entry", max_bytes=MAX_ENTRY_BYTES)
            why = problem(entry, key, config)
        except LaminarError as e:  # not a regular file, too large, not JSON: named already
            why, path = getattr(e, "detail", str(e)), getattr(e, "path", path)
        if why:
            self._warn_bad(path, why)
            self.misses += 1
            return None
        self.hits += 1
        self.memory[key] = entry
        return entry

    def put(self, key: str, result: dict[str, Any], config: dict[str, Any]) -> None:
        """Keep ``result`` for this plan; write it to the cache if it is sound (a failed
        simulation is not cached: it is retried next time)."""
        entry = {**result, "schema": SCHEMA, "key": key}
        self.memory[key] = entry
        path = self.path(key)
        if path is None or self._write_failed or result.get("failed") or path.is_dir():
            return  # a directory in an entry's place was named when read; it is left alone
        why = problem(entry, key, config)
        if why:  # the simulator's own result out of range: say so, never cache it
            warnings.warn(f"plan: a simulation returned {why}; not cached", LaminarWarning,
                          stacklevel=2)  # fmt: skip
            return
        try:
            _write_atomic(path, entry)
        except OSError as e:
            self._write_failed = True  # a full disk: the plan goes on without writing
            warnings.warn(f"plan cache {path}: cannot write ({e.strerror or e}); the rest of "
                          "this plan is not cached", LaminarWarning, stacklevel=2)  # fmt: skip

    def _warn_bad(self, path, why: str) -> None:
        self.bad += 1
        if self.bad <= WARN_EACH:
            warnings.warn(f"plan cache entry {path}: {why}; simulating it again",
                          LaminarWarning, stacklevel=3)  # fmt: skip

    def finish(self) -> None:
        """One line for the bad entries not named one by one."""
        if self.bad > WARN_EACH:
            warnings.warn(f"{self.bad - WARN_EACH} more bad plan cache entries in {self.dir} "
                          "were simulated again", LaminarWarning, stacklevel=2)  # fmt: skip


def _write_atomic(path: Path, entry: dict) -> None:
    """Write ``entry`` as ``path`` whole or not at all (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f, allow_nan=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
