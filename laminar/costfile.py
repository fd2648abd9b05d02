"""A cost file, read and checked in one place for every command that takes one.

``laminar simulate``/``replay``/``plan`` (``sim.cost_file``, ``--cost``) build the simulator's
cost model from it (``laminar.sim.cost``), ``laminar train`` takes repack's step bound from it
(``laminar.runtime.data.manager``), and a file written by ``laminar calibrate`` carries a
``runtime`` block that makes the simulator rebuild the runtime's own job
(``laminar/sim/local.py``). All of them read it through :func:`read_cost_file`: a regular file of
at most :data:`MAX_COST_FILE_BYTES`, JSON at most 64 deep (``laminar.inputfile``), then every
coefficient and every figure of the runtime block present, a real number (not a boolean or a
string), finite and within the range below. Anything else is a :class:`ConfigError` naming the
file and the key, with the range expected.

The ranges are wide on purpose: they hold every coefficient ``laminar.sim.costdata`` derives for
the catalog (every model x GPU x TP/EP x dtype x quantisation) and every file ``laminar
calibrate`` wrote for the fidelity campaigns (``docs/fidelity``), with about two orders of
magnitude to spare either way, so what they refuse is a unit slip (ms for s, GB for bytes), a
sign, an overflow or a hand edit gone wrong, never a real machine. The ``fit`` block (each fit's
quality: ``laminar calibrate``'s report) is not read by any command; older files hold ``NaN``
there where a figure is undefined, so Python's ``NaN``/``Infinity`` are parsed, and every figure
a command uses is checked finite. The ``ranges`` block (``laminar calibrate``: what its fit saw
of batch, KV tokens and lengths; files before it have none) is checked the same way.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from laminar.costlengths import check_policy_lengths
from laminar.errors import ConfigError
from laminar.inputfile import InputFileError, MiB, load_json

MAX_COST_FILE_BYTES = 1 * MiB
"""Largest cost file read (bytes); ``laminar calibrate`` writes ~10 kB."""


@dataclass(frozen=True, slots=True)
class Range:
    """Where one figure may lie: ``low``..``high`` (``low`` itself excluded when ``open_low``),
    a whole number when ``whole``; ``why`` says where the bounds come from."""

    low: float
    high: float
    why: str
    open_low: bool = False
    whole: bool = False

    def check(self, value: Any, unit: str) -> str | None:
        """What is wrong with ``value`` (None when it is in range)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
            return f"expected a number, got {_clip(shown)}"
        if isinstance(value, int) and abs(value) > 10**30:
            return f"a whole number of {len(str(abs(value))):,} digits is out of range"
        if not math.isfinite(value):
            return f"{value} is not a finite number"
        unit_ = f" {unit}" if unit not in ("", "1") else ""
        if value < self.low or (self.open_low and value == self.low) or value > self.high:
            op = ">" if self.open_low else ""
            return (f"{value:g}{unit_} is out of range; expected {op}{self.low:g}..{self.high:g}"
                    f"{unit_} ({self.why})")  # fmt: skip
        if self.whole and value != int(value):
            return f"{value:g} must be a whole number"
        return None


# Sources of the bounds (module docstring): the extremes of the catalog's derived coefficients
# and of the calibrated CPU files, each about 100x (at least 60x) inside the bound.
_STEP_S = Range(0.0, 10.0, "a decode step reads the weights in 0.4-57 ms in the catalog")
_PER_SEQ_S = Range(0.0, 0.1, "a sequence's or token's share of a step: <= 0.9 ms in the catalog")
_PER_KV_S = Range(0.0, 1e-4, "one cached token's K and V: <= 0.3 us in the catalog")
_PER_SQ_S = Range(0.0, 1e-6, "causal attention per squared length: <= 1.3e-8 s in the catalog")
_FLOP_WHY = "about 8 x parameters: 4.3e6 (tiny-llama) to 4.3e11 (DeepSeek-V3)"
_FLOP_TOKEN = Range(1e3, 1e14, _FLOP_WHY)
_FLOP_TOKEN0 = Range(0.0, 1e14, _FLOP_WHY)
_FLOP_SQ = Range(0.0, 1e9, "attention FLOPs per squared length: <= 7.5e6 in the catalog")
_FLOP_RATE = Range(1e8, 1e17, "a trainer: 4.4e10 (one CPU core, calibrated) to 8.9e14 (B200)")
_LINK = Range(1e6, 1e14, "a link: 6.7e7 (CPU shared memory, calibrated) to 9e11 (NVLink 5)")
_BYTES = Range(0.0, 1e15, "weights: 2.1e6 (tiny-llama) to 2.7e12 (DeepSeek-V3 fp32)")
_TOKEN_BYTES_WHY = "a token's activations over every layer: <= 2.7e7 bytes in the catalog"
MAX_TRAIN_S_PER_TOKEN = 1.0
"""Most trainer seconds one GPU may take per token (train_flop_per_token / its FLOP rate):
<= 8 ms in the catalog, 0.1 ms calibrated on a CPU core."""
MAX_WEIGHT_MOVE_S = 3600.0
"""Most seconds the weights may take over the slower of pcie and rdma: <= 105 s in the catalog
(DeepSeek-V3 in fp32 over PCIe), 30 ms calibrated."""

# name -> (unit, range). A cost file must give each one; ``laminar.sim.costdata`` derives them.
COEFFICIENTS: dict[str, tuple[str, Range]] = {
    # GPUs of one rollout replica (its TP degree)
    "replica_gpus": ("GPUs", Range(1, 65536, "cluster.gpus' bound", whole=True)),
    # the whole model's weights
    "weight_bytes": ("bytes", Range(1e4, 1e15, _BYTES.why)),
    # KV cache of one rollout replica
    "kv_capacity_tokens": ("tokens", Range(1, 1e11, "957 to 2.2e8 in the catalog", whole=True)),
    # per decode step, whatever the batch: reading the weights
    "decode_base_s": ("s", _STEP_S),
    # per running sequence per step: its matmul FLOPs
    "decode_per_seq_s": ("s/sequence", _PER_SEQ_S),
    # per cached token per step: reading its K and V
    "decode_per_kv_token_s": ("s/token", _PER_KV_S),
    # per prefill batch: reading the weights once
    "prefill_base_s": ("s", _STEP_S),
    # per prompt token: its matmul FLOPs
    "prefill_per_token_s": ("s/token", _PER_SEQ_S),
    # per squared sequence length: causal attention
    "prefill_per_token_sq_s": ("s/token^2", _PER_SQ_S),
    # trainer FLOPs per trained token (linear layers)
    "train_flop_per_token": ("FLOP/token", _FLOP_TOKEN),
    # trainer attention FLOPs per squared length
    "train_flop_per_token_sq": ("FLOP/token^2", _FLOP_SQ),
    # achieved trainer FLOP rate of one GPU
    "train_flop_per_s_per_gpu": ("FLOP/s", _FLOP_RATE),
    # host <-> one GPU, effective
    "pcie_bytes_per_s": ("bytes/s", _LINK),
    # GPU <-> GPU inside a machine
    "nvlink_bytes_per_s": ("bytes/s", _LINK),
    # machine <-> machine over all its NICs, effective
    "rdma_bytes_per_s": ("bytes/s", _LINK),
    # per RDMA message (the alpha of App. D)
    "rdma_startup_s": ("s", Range(0.0, 0.01, "one message's start-up: 5 us in the catalog")),
}

# name -> (unit, default when a cost file leaves it out, range). The defaults are what a file
# written before the coefficient existed meant.
OPTIONAL: dict[str, tuple[str, float, Range]] = {
    # routed experts per MoE layer; 0: dense
    "moe_experts": ("experts", 0.0, Range(0, 65536, "DeepSeek-V3 has 256", whole=True)),
    # k: experts each token is routed to
    "moe_experts_per_token": ("experts", 0.0, Range(0, 65536, "at most moe_experts", whole=True)),
    # per distinct routed expert read per step
    "decode_per_expert_s": ("s/expert", 0.0, _PER_SEQ_S),
    # least a decode step takes, whatever its batch: an eager engine's host launches; 0: none
    "decode_min_step_s": ("s", 0.0, _STEP_S),
    # old-log-prob forward, linear layers
    "logprob_flop_per_token": ("FLOP/token", 0.0, _FLOP_TOKEN0),
    # its causal attention
    "logprob_flop_per_token_sq": ("FLOP/token^2", 0.0, _FLOP_SQ),
    # gradients all-reduced per step over trainer GPUs
    "train_sync_bytes": ("bytes", 0.0, _BYTES),
    # GPUs per machine: beyond it, the sync crosses NICs
    "machine_gpus": ("GPUs", 8.0, Range(1, 64, "cluster.gpus_per_machine's bound", whole=True)),
    # GPUs of one NVLink domain: a collective of up to this many stays on NVLink (0: a machine)
    "nvlink_gpus": ("GPUs", 0.0, Range(0, 1024, "72 for a GB200 NVL72 rack", whole=True)),
    # activations a tensor-parallel group all-reduces per trained token (fwd + bwd)
    "train_tp_bytes_per_token": ("bytes/token", 0.0, Range(0.0, 1e9, _TOKEN_BYTES_WHY)),
    # token copies an expert-parallel group sends per trained token (fwd + bwd)
    "train_ep_bytes_per_token": ("bytes/token", 0.0, Range(0.0, 1e9, _TOKEN_BYTES_WHY)),
    # the routed experts' part of train_sync_bytes
    "train_sync_routed_bytes": ("bytes", 0.0, _BYTES),
}

# The runtime block ``laminar calibrate`` writes: name -> range of each figure (of each entry,
# for the ``*_by_threads`` and ``*_by_mode`` tables).
_SECONDS = Range(0.0, 3600.0, "seconds of the local job: <= 2.2 s in the calibrated files")
_SHARING = Range(0.0, 100.0, "a slowdown factor: calibrate fits 0..10")
RUNTIME_FIGURES: dict[str, Range] = {
    "refill_latency_s": _SECONDS,
    "engine_spin_s": _SECONDS,
    "first_prompts_s": _SECONDS,
    "core_sharing_alpha": _SHARING,
    "core_sharing_alpha_spin": _SHARING,
    "core_sharing_alpha_batch": _SHARING,
    "cross_core_gamma": _SHARING,
    "cross_core_gamma_within_runs": _SHARING,  # what the runs support within each run
    "cross_core_gamma_measured": _SHARING,  # what the cores' CPU accounting gives
    "speed_scaled_by": Range(0.0, 1000.0, "a machine's speed over the calibration's", True),
    "trainer_first_step_extra_s": _SECONDS,  # older files' one figure; no longer read
}
RUNTIME_BY_THREADS: dict[str, Range] = {
    "trainer_flop_per_s_by_threads": _FLOP_RATE,
    "trainer_step_base_s_by_threads": _SECONDS,
    "trainer_first_step_extra_s_by_threads": _SECONDS,
}
RUNTIME_BY_MODE: dict[str, Range] = {
    "engine_load_per_rollout_by_mode": _SHARING,
    "engine_factor_by_mode": Range(0.0, 100.0, "a slowdown factor", open_low=True),
}
RUNTIME_MODES = ("laminar", "sync")
MAX_THREADS = 4096
"""Largest trainer thread count a ``*_by_threads`` table may name (``runtime.trainer_threads``
and the machine's cores stay far below)."""
# Informational entries (the runs, the CPU, the speed probe): checked for type only.
RUNTIME_NOTES = ("runs", "cpu_model", "trainer_cpu", "speed_reference")
TOP_KEYS = ("label", "coefficients", "runtime", "fit", "ranges", "policy_lengths")

# The ``ranges`` block ``laminar calibrate`` writes (``laminar.calibrate.ranges``): what its fit
# saw of each quantity, name -> unit; each entry {min, max, unit} with optional p50 and p99,
# numbers >= 0 with min <= p50 <= p99 <= max. Files written before it have none.
RANGE_QUANTITIES: dict[str, str] = {
    "batch_seqs": "sequences",  # sequences decoded in one engine step
    "kv_tokens": "tokens",  # KV tokens an engine held in one step
    "response_len": "tokens",  # response length of a trained trajectory
    "micro_batch_tokens": "tokens",  # padded tokens of one trainer micro-batch
}
_RANGE_VALUE = Range(0.0, 1e12, "a count of sequences or tokens")
RANGE_STATS = ("min", "p50", "p99", "max")


@dataclass(frozen=True, slots=True)
class CostFile:
    """A checked cost file: each coefficient's (value, unit, source), and the runtime block with
    its figures as floats (None when the file has none)."""

    path: str
    label: str
    coefficients: dict[str, tuple[float, str, str]]
    runtime: dict[str, Any] | None
    ranges: dict[str, dict[str, float]] | None = None
    """What the calibration's fit saw (``RANGE_QUANTITIES``); None in files without it."""
    policy_lengths: dict | None = None
    """How the calibration's policy answered its task (``laminar.costlengths``); or None."""


def read_cost_file(path: str | Path) -> CostFile:
    """The checked content of the cost file at ``path`` (module docstring)."""
    text = str(path)
    if "\x00" in text:
        raise ConfigError(repr(text), "", "a path cannot hold a NUL character")
    p = Path(text).expanduser()
    try:
        data = load_json(p, kind="cost file", max_bytes=MAX_COST_FILE_BYTES, allow_nan=True)
    except InputFileError as e:
        raise ConfigError(text, "", e.detail) from None
    return check_cost_content(data, text)


def check_cost_content(data: Any, source: str) -> CostFile:
    """``data`` (a parsed cost file) checked; errors name ``source`` and the key."""
    data = _one_model(data, source)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(source, _clip(str(unknown[0])), f"unknown key; expected {_or(TOP_KEYS)}")
    table = data.get("coefficients")
    if not isinstance(table, dict):
        raise ConfigError(source, "coefficients", "expected a mapping of name -> {value, unit}")
    coeffs = _coefficients(table, source)
    label = data.get("label", Path(source).name)
    if not isinstance(label, str):
        raise ConfigError(source, "label", f"expected text, got {type(label).__name__}")
    runtime = data.get("runtime")
    if runtime is not None:
        runtime = _runtime_block(runtime, source)
        _check_thread_rates(runtime, coeffs["train_flop_per_token"][0], source)
    fit = data.get("fit", {})
    if not isinstance(fit, dict):
        raise ConfigError(source, "fit", f"expected a mapping, got {type(fit).__name__}")
    ranges = _ranges_block(data["ranges"], source) if "ranges" in data else None
    answers = data.get("policy_lengths")
    answers = None if answers is None else check_policy_lengths(answers, source)
    return CostFile(source, _clip(label, 200), coeffs, runtime, ranges, answers)


def _ranges_block(block: Any, source: str) -> dict[str, dict[str, float]]:
    """The ``ranges`` block checked: known quantities, each {min, max, unit} (p50, p99
    optional), every figure a finite number >= 0, in order min <= p50 <= p99 <= max."""
    if not isinstance(block, dict):
        raise ConfigError(source, "ranges", f"expected a mapping, got {type(block).__name__}")
    out: dict[str, dict[str, float]] = {}
    for name, entry in block.items():
        key = f"ranges.{_clip(str(name))}"
        if name not in RANGE_QUANTITIES:
            raise ConfigError(source, key, f"unknown quantity; expected {_or(RANGE_QUANTITIES)}")
        if not isinstance(entry, dict):
            raise ConfigError(source, key, f"expected a mapping, got {type(entry).__name__}")
        extra = sorted(set(map(str, entry)) - {*RANGE_STATS, "unit"})
        if extra:
            raise ConfigError(source, f"{key}.{_clip(extra[0])}",
                              f"unknown key; expected {_or([*RANGE_STATS, 'unit'])}")  # fmt: skip
        unit = RANGE_QUANTITIES[name]
        if entry.get("unit", unit) != unit:
            got = _clip(repr(entry.get("unit")))
            raise ConfigError(source, f"{key}.unit", f"must be {unit!r} (got {got})")
        stats = {}
        for stat in RANGE_STATS:
            if stat in entry:
                stats[stat] = _figure(source, f"{key}.{stat}", _RANGE_VALUE, entry[stat])
            elif stat in ("min", "max"):
                raise ConfigError(source, f"{key}.{stat}", "missing; expected a number >= 0")
        order = [s for s in RANGE_STATS if s in stats]
        for lo, hi in itertools.pairwise(order):
            if stats[lo] > stats[hi]:
                raise ConfigError(source, f"{key}.{lo}",
                                  f"{stats[lo]:g} is above {hi} {stats[hi]:g}; expected "
                                  "min <= p50 <= p99 <= max")  # fmt: skip
        out[name] = stats
    return out


def _one_model(data: Any, source: str) -> dict:
    """The cost model of ``data``: a cost file, or a run directory's ``cost_model.json`` (one
    model per system; ``laminar simulate`` gives every system the same one)."""
    if not isinstance(data, dict):
        raise ConfigError(source, "", f"expected a JSON object, got {type(data).__name__}")
    if "coefficients" in data or not data:
        return data
    models = list(data.values())
    if all(isinstance(m, dict) and "coefficients" in m for m in models):
        if any(m != models[0] for m in models[1:]):
            raise ConfigError(
                source,
                "",
                f"holds a different cost model for each of {_or(list(data))}; "
                "keep one (its label, coefficients) in a file of its own",
            )
        return models[0]
    return data


def _coefficients(table: dict, source: str) -> dict[str, tuple[float, str, str]]:
    unknown = sorted(set(table) - set(COEFFICIENTS) - set(OPTIONAL))
    if unknown:
        raise ConfigError(source, f"coefficients.{_clip(str(unknown[0]))}", "unknown coefficient")
    out = {}
    for name, (unit, bound) in COEFFICIENTS.items():
        out[name] = _coefficient(source, name, unit, bound, table.get(name))
    for name, (unit, default, bound) in OPTIONAL.items():
        if name in table:
            out[name] = _coefficient(source, name, unit, bound, table[name])
        else:
            out[name] = (default, unit, "default")
    _check_together(out, source)
    return out


def _coefficient(source: str, name: str, unit: str, bound: Range, entry: Any) -> tuple:
    key = f"coefficients.{name}"
    if not isinstance(entry, dict) or "value" not in entry:
        raise ConfigError(source, key, f"missing; expected {{value: ..., unit: {unit!r}}}")
    problem = bound.check(entry["value"], unit)
    if problem:
        raise ConfigError(source, key, problem)
    if entry.get("unit", unit) != unit:
        got = _clip(repr(entry.get("unit")))
        raise ConfigError(source, key, f"unit must be {unit!r} (got {got})")
    why = entry.get("source", f"from {source}")
    if not isinstance(why, str):
        raise ConfigError(source, f"{key}.source", f"expected text, got {type(why).__name__}")
    return float(entry["value"]), unit, _clip(why, 2000)


def _check_together(c: dict[str, tuple[float, str, str]], source: str) -> None:
    """What no single range can say: a decode step takes time, a MoE token has 1..E experts, a
    trainer token and a weight transfer take a plausible time (the bounds above)."""
    v = {name: entry[0] for name, entry in c.items()}
    if v["decode_base_s"] + v["decode_per_seq_s"] <= 0:
        raise ConfigError(
            source,
            "coefficients.decode_base_s",
            "a decode step must take time: decode_base_s + decode_per_seq_s > 0",
        )
    experts, k = v["moe_experts"], v["moe_experts_per_token"]
    if k > experts or (experts > 0 and k < 1):
        raise ConfigError(
            source,
            "coefficients.moe_experts_per_token",
            f"{k:g} with moe_experts {experts:g}: expected 1..moe_experts (0 for a dense model)",
        )
    per_token_s = v["train_flop_per_token"] / v["train_flop_per_s_per_gpu"]
    if per_token_s > MAX_TRAIN_S_PER_TOKEN:
        msg = (
            f"train_flop_per_token / train_flop_per_s_per_gpu is {per_token_s:.3g} s a token on "
            f"one GPU; expected <= {MAX_TRAIN_S_PER_TOKEN:g} s (<= 8 ms in the catalog)"
        )
        raise ConfigError(source, "coefficients.train_flop_per_s_per_gpu", msg)
    move_s = v["weight_bytes"] / min(v["pcie_bytes_per_s"], v["rdma_bytes_per_s"])
    if move_s > MAX_WEIGHT_MOVE_S:
        msg = (
            f"the weights take {move_s:.3g} s over the slower of pcie_bytes_per_s and "
            f"rdma_bytes_per_s; expected <= {MAX_WEIGHT_MOVE_S:g} s (<= 105 s in the catalog)"
        )
        raise ConfigError(source, "coefficients.weight_bytes", msg)


def _check_thread_rates(runtime: dict, flop_per_token: float, source: str) -> None:
    """The runtime block's trainer rates, each within :data:`MAX_TRAIN_S_PER_TOKEN` as the
    coefficient they stand in for (``laminar.sim.local.placed_cost``)."""
    for threads, rate in runtime.get("trainer_flop_per_s_by_threads", {}).items():
        if flop_per_token / rate > MAX_TRAIN_S_PER_TOKEN:
            raise ConfigError(
                source,
                f"runtime.trainer_flop_per_s_by_threads.{threads}",
                f"{rate:.3g} FLOP/s takes {flop_per_token / rate:.3g} s a token of "
                f"train_flop_per_token; expected <= {MAX_TRAIN_S_PER_TOKEN:g} s",
            )


def _runtime_block(block: Any, source: str) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise ConfigError(source, "runtime", f"expected a mapping, got {type(block).__name__}")
    known = (*RUNTIME_FIGURES, *RUNTIME_BY_THREADS, *RUNTIME_BY_MODE, *RUNTIME_NOTES,
             "placements")
    out: dict[str, Any] = {}
    for name, value in block.items():
        key = f"runtime.{_clip(str(name))}"
        if name in RUNTIME_FIGURES:
            out[name] = _figure(source, key, RUNTIME_FIGURES[name], value)
        elif name in RUNTIME_BY_THREADS:
            out[name] = _table(source, key, value, RUNTIME_BY_THREADS[name], _thread_key)
        elif name in RUNTIME_BY_MODE:
            out[name] = _table(source, key, value, RUNTIME_BY_MODE[name], _mode_key)
        elif name in RUNTIME_NOTES:
            out[name] = _note(source, key, name, value)
        elif name == "placements":
            out[name] = _placements(source, key, value)
        else:
            raise ConfigError(source, key, f"unknown key; expected one of {', '.join(known)}")
    return out


def _figure(source: str, key: str, bound: Range, value: Any) -> float:
    problem = bound.check(value, "")
    if problem:
        raise ConfigError(source, key, problem)
    return float(value)


def _thread_key(key: Any) -> str | None:
    digits = isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 5
    if digits and 1 <= int(key) <= MAX_THREADS:
        return None
    return f"a trainer thread count 1..{MAX_THREADS}"


def _mode_key(key: Any) -> str | None:
    return None if key in RUNTIME_MODES else f"a runtime mode ({_or(RUNTIME_MODES)})"


def _table(source: str, key: str, value: Any, bound: Range, check_key) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ConfigError(source, key, f"expected a mapping, got {type(value).__name__}")
    out = {}
    for k, v in value.items():
        wrong = check_key(k)
        if wrong:
            raise ConfigError(source, f"{key}.{_clip(str(k))}", f"expected {wrong} as the key")
        out[k] = _figure(source, f"{key}.{k}", bound, v)
    return out


def _placements(source: str, key: str, value: Any) -> list[dict[str, Any]]:
    """The calibration runs' placements: a list of {mode, rollouts} (``laminar calibrate``)."""
    if not isinstance(value, list) or len(value) > 1000:
        raise ConfigError(source, key, "expected a list of {mode, rollouts} (at most 1,000)")
    out = []
    for i, entry in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"mode", "rollouts"}:
            raise ConfigError(source, where, "expected a mapping with mode and rollouts")
        if entry["mode"] not in RUNTIME_MODES:
            raise ConfigError(source, f"{where}.mode", f"expected {_or(RUNTIME_MODES)}")
        n = entry["rollouts"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_THREADS:
            raise ConfigError(source, f"{where}.rollouts", f"expected a whole number "
                              f"1..{MAX_THREADS}")  # fmt: skip
        out.append({"mode": entry["mode"], "rollouts": n})
    return out


def _note(source: str, key: str, name: str, value: Any) -> Any:
    """An informational entry, checked for shape: text, a list of text, or numbers by name."""
    if name == "cpu_model" and isinstance(value, str):
        return value
    if name == "runs" and isinstance(value, list) and all(isinstance(r, str) for r in value):
        return value
    if name in ("trainer_cpu", "speed_reference") and isinstance(value, dict):
        return value
    raise ConfigError(source, key, f"unexpected {type(value).__name__}")


def _or(names) -> str:
    names = [str(n) for n in names][:8]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
