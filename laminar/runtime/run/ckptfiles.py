"""A run checkpoint's own files, written and read back with checks (``laminar train --resume``).

``checkpoints/LATEST`` names the newest ``step-NNNNNN/``; in it, ``meta.json`` (step, run
clock, faults and events so far, and the SHA-256 of the pools' file) and ``pools.json``: the
pools' state (prompts handed out, partial responses, finished experience consumed or not).

The pools were a pickle once; unpickling a file runs whatever code it names, so a run
directory from elsewhere could run code in ``--resume``. They are plain JSON now, every field
checked when read (a :class:`~laminar.runtime.records.Traj` is rebuilt from known fields only),
and a checkpoint whose ``pools.json`` does not hash to what its ``meta.json`` recorded (damaged,
truncated, or not this run's) is refused. An old ``pools.pkl`` is refused by name, not loaded.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

from laminar.inputfile import MiB, read_bytes, read_text
from laminar.runfiles.tables import COUNT, SECONDS, field, file_error, read_json_object
from laminar.runfiles.train import check_fault
from laminar.runtime.records import Traj, traj_id

POOLS = "pools.json"
MAX_POOLS_BYTES = 4096 * MiB  # every in-progress and finished trajectory's tokens
MAX_META_BYTES = 256 * MiB  # events so far
CHECKPOINT_NAME = re.compile(r"^step-\d{6,}$")


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint ``checkpoints/LATEST`` names (None when there is no LATEST: the run
    stopped before its first checkpoint); a LATEST that names anything else is an error."""
    path = Path(run_dir) / "checkpoints" / "LATEST"
    if not path.exists():
        return None
    name = read_text(path, kind="checkpoint pointer (LATEST)", max_bytes=4096).strip()
    if not CHECKPOINT_NAME.match(name):
        raise file_error(path, f"expected a checkpoint's name (step-NNNNNN), got {name[:40]!r}")
    d = path.parent / name
    if d.is_symlink() or not d.is_dir():
        raise file_error(path, f"names {name}, which is not a directory beside it")
    return d


def trainer_state(d: Path, meta: dict) -> str:
    """Where the checkpoint ``d``'s trainer state is: ``d/trainer``, or the directory under
    ``runtime.storage`` its ``meta.json`` names (``trainer_dir``, an absolute path)."""
    where = meta.get("trainer_dir")
    if where is None:
        return str(d / "trainer")
    if not isinstance(where, str) or not where.startswith("/") or "\0" in where:
        raise file_error(d / "meta.json", f"trainer_dir: expected an absolute path, got "
                         f"{where!r:.60}")  # fmt: skip
    return where


def write_pools(d: Path, pools: dict) -> str:
    """Write the pools' state into the checkpoint directory ``d``; return its SHA-256."""
    raw = json.dumps(encode_pools(pools), separators=(",", ":"), default=_plain).encode()
    (d / POOLS).write_bytes(raw)
    return hashlib.sha256(raw).hexdigest()


def read_meta(d: Path) -> dict:
    """``meta.json`` of the checkpoint ``d``, its fields checked."""
    path = d / "meta.json"
    meta = read_json_object(path, kind="checkpoint metadata", max_bytes=MAX_META_BYTES, nan=True)
    if "step" not in meta:
        raise file_error(path, "missing key 'step'")
    step = int(field(meta, "step", COUNT, path))
    if d.name != f"step-{step:06d}":
        raise file_error(path, f"step {step} is not its checkpoint's ({d.name})")
    for key in ("elapsed_s", "wall_s"):
        field(meta, key, SECONDS, path)
    for key in ("faults", "events", "rollouts"):
        if not isinstance(meta.get(key, []), list):
            raise file_error(path, f"{key}: expected a list")
    for i, fault in enumerate(meta.get("faults", [])):
        check_fault(fault, path, f"faults[{i}].")
    if not all(isinstance(e, dict) for e in meta.get("events", [])):
        raise file_error(path, "events: expected a list of objects")
    return meta


def read_pools(d: Path, meta: dict) -> dict:
    """The pools' state of the checkpoint ``d`` (module docstring)."""
    path = d / POOLS
    if not path.exists() and (d / "pools.pkl").exists():
        raise file_error(d / "pools.pkl", "a checkpoint of an older Laminar (a pickle, not "
                         "loaded: unpickling runs code); resume it with the version that wrote "
                         "it, or start a new run")  # fmt: skip
    if not path.exists():
        raise file_error(path, "missing (the checkpoint is incomplete)")
    raw = read_bytes(path, kind="checkpoint pools", max_bytes=MAX_POOLS_BYTES)
    if hashlib.sha256(raw).hexdigest() != meta.get("pools_sha256"):
        raise file_error(path, "does not match the SHA-256 its meta.json recorded (damaged, "
                         "truncated, or not this checkpoint's)")  # fmt: skip
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise file_error(path, f"not valid JSON ({str(e)[:100]})") from None
    try:
        return decode_pools(data)
    except (KeyError, TypeError, ValueError) as e:
        raise file_error(path, f"not a checkpoint's pools: {str(e)[:200]}") from None


# The JSON form --------------------------------------------------------------------------------

TRAJ_INTS = ("prompt_id", "sample_index", "version", "max_tokens", "migrations")
TRAJ_FLOATS = ("gen_start_s", "gen_end_s", "reward")
# Added later (a checkpoint of an earlier Laminar has none of them): their defaults then
TRAJ_LATER = {"env_error": "", "source_id": "", "turns": 0, "obs_spans": [], "obs_messages": [],
              "tool_s": 0.0}  # fmt: skip


def encode_pools(pools: dict) -> dict:
    buffer = pools["buffer"]
    return {
        "partial": [_traj_out(t) for t in pools["partial"]],
        "buffer": {
            "rows": [{**_floats_out(r), "traj": _traj_out(r["traj"])} for r in buffer["rows"]],
            "duplicates": [_floats_out(x) for x in buffer.get("duplicates", [])],
        },
        "prompts": dict(pools["prompts"]),
    }


def decode_pools(data: Any) -> dict:
    """The pools' state from its JSON form; KeyError/TypeError/ValueError naming the field."""
    _expect(data, dict, "the file")
    prompts = _expect(data["prompts"], dict, "prompts")
    buffer = _expect(data["buffer"], dict, "buffer")
    rows = []
    for i, row in enumerate(_expect(buffer["rows"], list, "buffer.rows")):
        where = f"buffer.rows[{i}]"
        row = _expect(row, dict, where)
        out = {"traj": _traj_in(row["traj"], f"{where}.traj")}
        out["consumed_version"] = _int(row["consumed_version"], f"{where}.consumed_version", -1)
        out["consumed_s"] = _float(row["consumed_s"], f"{where}.consumed_s")
        if "step" in row:
            out["step"] = _int(row["step"], f"{where}.step", 0)
        rows.append(out)
    dups = _expect(buffer.get("duplicates", []), list, "buffer.duplicates")
    partial = _expect(data["partial"], list, "partial")
    return {
        "partial": [_traj_in(t, f"partial[{i}]") for i, t in enumerate(partial)],
        "buffer": {
            "rows": rows,
            "duplicates": [_duplicate(x, f"buffer.duplicates[{i}]") for i, x in enumerate(dups)],
        },
        "prompts": {k: _int(prompts[k], f"prompts.{k}", 0) for k in ("issued", "consumed_steps")},
    }


def _traj_out(t: Traj) -> dict:
    out = {name: getattr(t, name) for name in Traj.__slots__}
    out["prompt_ids"] = list(t.prompt_ids)
    out["logprobs"] = [_float_out(x) for x in t.logprobs]
    out["obs_spans"] = [list(span) for span in t.obs_spans]
    for name in (*TRAJ_FLOATS, "tool_s"):
        out[name] = _float_out(out[name])
    return out


def _traj_in(d: Any, where: str) -> Traj:
    d = _expect(d, dict, where)
    kw: dict[str, Any] = {n: _int(d[n], f"{where}.{n}", -1) for n in TRAJ_INTS}
    kw.update({n: _float(d[n], f"{where}.{n}") for n in TRAJ_FLOATS})
    kw["traj_id"] = _expect(d["traj_id"], str, f"{where}.traj_id")
    kw["replica_id"] = _expect(d["replica_id"], str, f"{where}.replica_id")
    reason = d["finish_reason"]
    kw["finish_reason"] = None if reason is None else _expect(reason, str, f"{where}.finish_reason")
    kw["prompt_ids"] = tuple(_ints(d["prompt_ids"], f"{where}.prompt_ids"))
    kw["tokens"] = _ints(d["tokens"], f"{where}.tokens")
    kw["logprobs"] = [_float(x, f"{where}.logprobs") for x in _expect(d["logprobs"], list, where)]
    later = {k: d.get(k, v) for k, v in TRAJ_LATER.items()}
    kw["env_error"] = _expect(later["env_error"], str, f"{where}.env_error")
    kw["source_id"] = _expect(later["source_id"], str, f"{where}.source_id")
    kw["turns"] = _int(later["turns"], f"{where}.turns", 0)
    kw["tool_s"] = _float(later["tool_s"], f"{where}.tool_s")
    kw["obs_spans"] = _spans(later["obs_spans"], len(kw["tokens"]), f"{where}.obs_spans")
    messages = _expect(later["obs_messages"], list, f"{where}.obs_messages")
    kw["obs_messages"] = [_expect(m, dict, f"{where}.obs_messages") for m in messages]
    if len(kw["obs_messages"]) != len(kw["obs_spans"]):
        raise ValueError(f"{where}.obs_messages: {len(messages)} messages for "
                         f"{len(kw['obs_spans'])} observation spans")  # fmt: skip
    if kw["traj_id"] != traj_id(kw["prompt_id"], kw["sample_index"]):
        raise ValueError(f"{where}.traj_id: {kw['traj_id']!r:.40} is not its prompt and sample's")
    return Traj(**kw)


def _spans(values: Any, tokens: int, where: str) -> list[tuple[int, int]]:
    """Observation spans: ``[start, end)`` pairs in order, within the trajectory's tokens."""
    out, at = [], 0
    for span in _expect(values, list, where):
        if not isinstance(span, list) or len(span) != 2:
            raise ValueError(f"{where}: expected [start, end] pairs")
        start, end = (_int(x, where, 0) for x in span)
        if not at <= start < end <= tokens:
            raise ValueError(f"{where}: span {span} out of order or past the {tokens} tokens")
        out.append((start, end))
        at = end
    return out


def _duplicate(x: Any, where: str) -> dict:
    x = _expect(x, dict, where)
    return {"traj_id": _expect(x["traj_id"], str, f"{where}.traj_id"),
            "replica_id": _expect(x["replica_id"], str, f"{where}.replica_id"),
            "at_s": _float(x["at_s"], f"{where}.at_s")}  # fmt: skip


def _expect(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{where}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{where}: expected a whole number >= {low}, got {value!r:.40}")
    return value


def _ints(values: Any, where: str) -> list[int]:
    values = _expect(values, list, where)
    if not all(type(v) is int and v >= 0 for v in values):
        raise ValueError(f"{where}: expected token ids (whole numbers >= 0)")
    return values


# Non-finite floats as text: JSON has no NaN, and a NaN reward or an unconsumed row's time is
# data here, not damage.
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _plain(x: Any) -> Any:
    """A numpy scalar as the Python number it holds (what the actors may hand back)."""
    if hasattr(x, "item"):
        return _float_out(x.item()) if isinstance(x.item(), float) else x.item()
    raise TypeError(f"{type(x).__name__} is not a pools' value")


def _float_out(x: float) -> float | str:
    return x if math.isfinite(x) else str(float(x))


def _floats_out(row: dict) -> dict:
    return {k: _float_out(v) if isinstance(v, float) else v for k, v in row.items()}


def _float(value: Any, where: str) -> float:
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: expected a number, got {value!r:.40}")
    return float(value)

