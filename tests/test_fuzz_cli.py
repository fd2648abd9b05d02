"""Property-based fuzzing of the command line (issue 11): config files, ``--set`` values, trace
files and ``--out`` targets for ``config show``, ``simulate``, ``trace show|fit``, ``replay`` and
``plot``. Every generated input must end in exit 0, or exit 2 with one clear line; never a
traceback, never a hang, never a file left behind, never a pre-existing file changed.

The CLI's ``main()`` runs in-process (fast); each example gets a fresh directory as its working
directory, with a user's file in it that must survive. Simulations use a tiny cluster, and
values of the keys that size a simulation are either small or invalid, so every example runs in
about a second. Examples are bounded (``max_examples``) to keep CI time in check.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from laminar.cli import main
from laminar.config import LaminarConfig
from laminar.rundir import MARKER

EXAMPLE_LIMIT_S = 60  # a single example past this is a hang
# LAMINAR_FUZZ_SCALE=10 LAMINAR_FUZZ_RANDOM=1 hunts further (more, and new, examples).
SCALE = float(os.environ.get("LAMINAR_FUZZ_SCALE", "1"))
FUZZ = settings(
    deadline=None,
    derandomize=not os.environ.get("LAMINAR_FUZZ_RANDOM"),  # CI: the same examples each run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

TINY = {
    "cluster.gpus": 8,
    "cluster.trainer_fraction": 0.25,
    "workload.prompts_per_step": 3,
    "workload.samples_per_prompt": 2,
    "workload.steps": 2,
    "workload.max_prompt_len": 64,
    "workload.max_response_len": 256,
}
# Keys whose valid values make a simulation big: fuzzed small or invalid, never big and valid.
SIZE_KEYS = {
    "cluster.gpus": 16,
    "cluster.gpus_per_machine": 8,
    "model.rollout_tp": 8,
    "workload.prompts_per_step": 4,
    "workload.samples_per_prompt": 4,
    "workload.steps": 3,
    "workload.max_prompt_len": 256,
    "workload.max_response_len": 512,
    "sim.max_batch": 64,
    "sim.rollout_batch_prompts": 8,
    "baselines.stream_minibatches": 8,
    "sim.warmup_steps": 3,
}
USER_FILE = "precious.txt"


def _n(examples: int) -> int:
    return max(1, int(examples * SCALE))


# Running one example ---------------------------------------------------------------------------


class Hang(Exception):
    """An example ran past EXAMPLE_LIMIT_S."""


def _snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = (p.stat().st_mode, p.read_bytes() if p.is_file() else None)
    return out


def run_cli(argv: list[str], work: Path, out: str | None = None) -> tuple[int, str]:
    """Run ``laminar ARGV`` in ``work``; check the contract; return (exit code, stderr)."""
    before = _snapshot(work)
    err, cwd = io.StringIO(), os.getcwd()

    def _hang(signum, frame):
        raise Hang(f"laminar {' '.join(argv)[:300]} ran past {EXAMPLE_LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(EXAMPLE_LIMIT_S)
    try:
        os.chdir(work)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's own errors
                code = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    text = err.getvalue()
    event(f"exit {code}")  # --hypothesis-show-statistics shows the mix of outcomes
    event(text.strip().splitlines()[-1][:90] if os.environ.get("FUZZ_WHY") and text.strip() else "")
    assert code in (0, 2), (code, argv, text[-2000:])
    after = _snapshot(work)
    for rel, state in before.items():  # nothing that was there changed, unless it is --out
        if out is None or not _under(work / rel, work / out):
            assert after.get(rel) == state, (rel, argv, text[-500:])
    new = [r for r in after if r not in before and not (out and _under(work / out, work / r))]
    assert not [r for r in new if ".laminar-staging" in r or ".old-" in r], (new, argv)
    if code == 2:
        lines = [line for line in text.splitlines() if "error:" in line]
        assert len(lines) == 1 and len(lines[0]) <= 2100, (argv, text[-2000:])
        assert not new, (new, argv, text)
    else:
        assert all(out is not None and _under(work / r, work / out) for r in new), (new, argv)
    return code, text


def _under(path: Path, root: Path) -> bool:
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    return path == root or root in path.parents


@contextlib.contextmanager
def _workdir():
    """A fresh working directory holding a user's file."""
    work = Path(tempfile.mkdtemp(prefix="laminar-fuzz-"))
    (work / USER_FILE).write_text("a user's file\n")
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Values --------------------------------------------------------------------------------------

HOSTILE_TEXT = [
    "nan", ".nan", "-.inf", ".inf", "1e999", "-1", "0", "0x10", "2023-13-45", "~", "[", "{a: 1}",
    "*x", "&a [*a]", "!!python/object/apply:os.system [ls]", "yes", "1_000", "'", '"',
    "a" * 300, "\x00", "é", "[1, [2, [3]]]", "{type: trace}", "-0",
]  # fmt: skip

numbers = st.one_of(
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**53 + 1, 2**63, 2**64, 1e308, -0.0, 0.5, 1e-300]),
)
scalars = st.one_of(
    numbers, st.booleans(), st.none(), st.text(max_size=20), st.sampled_from(HOSTILE_TEXT)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _leaf_keys() -> list[str]:
    """Every leaf field of the config tree, as a dotted key."""
    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            else:
                out.append(prefix + name)

    walk(LaminarConfig, "")
    return sorted(out)


LEAF_KEYS = _leaf_keys()
ODD_KEYS = [
    "workload.source.params.response_median_tokens",
    "workload.source.params.drift_per_step",
    "workload.source.params.bogus",
    "workload.source.preset",
    "workload.source.path",
    "faults.events",
    "cluster",
    "nope",
    "seed.x",
    "workload.source",
]
KEYS = st.one_of(st.sampled_from(LEAF_KEYS), st.sampled_from(ODD_KEYS))


def small_or_invalid(key: str) -> st.SearchStrategy:
    """A value for a size key: small and valid, or invalid (negative, zero, huge, NaN, text)."""
    top = SIZE_KEYS[key]
    return st.one_of(
        st.integers(1, top),
        st.sampled_from([0, -1, -(2**63), 10**7, 2**64, 10**30, float("nan"), "x", [1], True]),
    )


def _defaults() -> dict[str, object]:
    flat: dict[str, object] = {}

    def walk(node: dict, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[prefix + k] = v

    walk(LaminarConfig().model_dump(mode="json"), "")
    return flat


DEFAULTS = _defaults()


def plausible(key: str) -> st.SearchStrategy:
    """A value near the key's default (valid more often than not), so runs get deep."""
    d = DEFAULTS.get(key)
    if isinstance(d, bool):
        return st.booleans()
    if isinstance(d, int):
        return st.integers(max(-1, d // 2), 2 * d + 1)
    if isinstance(d, float):
        return st.floats(d / 2, 2 * d + 0.01, allow_nan=False)
    return st.just(d) if d is not None else values


def value_for(key: str, *, sim: bool) -> st.SearchStrategy:
    if sim and key in SIZE_KEYS:
        return small_or_invalid(key)
    if sim and key in ("faults.events", "workload.source", "cluster"):
        return st.sampled_from([[], "x", {"type": "relay", "at_s": 1.0},
                                [{"type": "trainer", "at_s": 0.5}],
                                [{"type": "rollout_machine", "at_s": 0.1, "machine": 1}],
                                {"type": "synthetic", "preset": "tool-calling"}])  # fmt: skip
    return st.one_of(plausible(key), plausible(key), values)


@st.composite
def overrides(draw, *, sim: bool, n: int = 3) -> list[str]:
    """``--set KEY=VALUE`` texts; with ``sim``, size keys stay small or invalid."""
    out = []
    for _ in range(draw(st.integers(0, n))):
        key = draw(KEYS)
        value = draw(value_for(key, sim=sim))
        hostile = draw(st.integers(0, 5)) == 0
        text = draw(st.sampled_from(HOSTILE_TEXT)) if hostile else _yaml_flow(value)
        out.append(f"{key}={text}")
    return out


def _yaml_flow(value) -> str:
    try:
        return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix(
            "\n..."
        )
    except (yaml.YAMLError, ValueError):
        return "x"


def _nested(pairs: dict[str, object]) -> dict:
    out: dict = {}
    for key, value in pairs.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[parts[-1]] = value
    return out


@st.composite
def config_files(draw, *, sim: bool) -> bytes:
    """A config file: a YAML/TOML-ish mapping of fuzzed keys, or hostile bytes."""
    kind = draw(st.sampled_from(["mapping"] * 7 + ["bytes", "dup", "bomb"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "dup":
        key = draw(st.sampled_from(["seed", "cluster"]))
        return f"{key}: 1\nworkload: {{}}\n{key}: 2\n".encode()
    if kind == "bomb":
        depth = draw(st.integers(2, 7))
        lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
        lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, depth)]
        lines.append(f"seed: *a{depth - 1}")
        return "\n".join(lines).encode()
    pairs = {}
    for _ in range(draw(st.integers(0, 4))):
        key = draw(KEYS)
        pairs[key] = draw(value_for(key, sim=sim))
    if sim:  # keep the run tiny unless the file sets a size key itself
        pairs = {**{k: v for k, v in TINY.items() if k not in pairs}, **pairs}
    try:
        return yaml.safe_dump(_nested(pairs), allow_unicode=True).encode()
    except (yaml.YAMLError, ValueError):
        return b"seed: [\n"


# Traces ----------------------------------------------------------------------------------------

COLUMNS = ["step", "prompt_id", "sample_index", "prompt_len", "response_len", "finish_reason"]
ODD_CELLS = ["stop", "length", "", "abc", "d41d8cd9", "3f2a7c4e-8e0b", "NaN", "1.5", "1e400",
             "-5", "true", None]  # fmt: skip
trace_cells = st.one_of(st.integers(0, 60), st.integers(0, 3), numbers, st.sampled_from(ODD_CELLS))


@st.composite
def trace_files(draw) -> tuple[str, bytes]:
    """(file name, content): a schema trace with fuzzed cells and columns, or hostile bytes."""
    ext = draw(st.sampled_from([".csv", ".jsonl", ".parquet", ".csv", ".csv", ".txt"]))
    if draw(st.integers(0, 9)) == 0:
        return "t" + ext, draw(st.binary(max_size=300))
    columns = list(COLUMNS)
    if draw(st.integers(0, 3)) == 0:
        columns = draw(st.lists(st.sampled_from([*COLUMNS, "turns", "tool_latency_s", "extra",
                                                 "respons_len", "ContextTokens",
                                                 "GeneratedTokens"]),
                                min_size=1, max_size=8, unique=True))  # fmt: skip
    n_rows = draw(st.integers(0, 12))
    valid_rows = draw(st.integers(0, 3)) > 0
    corrupt_row = draw(st.integers(0, 3 * max(n_rows, 1)))  # one bad cell, a third of the time
    rows = []
    for i in range(n_rows):
        if valid_rows:  # mostly-valid rows exercise the replay and the fit
            row = {"step": i // 6, "prompt_id": draw(st.sampled_from([i // 3, f"id{i // 3}"])),
                   "sample_index": i % 3, "prompt_len": draw(st.integers(1, 60)),
                   "response_len": draw(st.integers(1, 300)),
                   "finish_reason": draw(st.sampled_from(["stop", "length"])),
                   "turns": draw(st.integers(1, 4)), "tool_latency_s": 0.5,
                   "ContextTokens": 10, "GeneratedTokens": 20}  # fmt: skip
            if i == corrupt_row:
                row[draw(st.sampled_from(columns))] = draw(trace_cells)
        else:
            row = {c: draw(trace_cells) for c in columns}
        rows.append({c: row.get(c, draw(trace_cells)) for c in columns})
    return "t" + ext, _encode(rows, columns, ext)


def _encode(rows: list[dict], columns: list[str], ext: str) -> bytes:
    if ext == ".jsonl":
        return "".join(json.dumps(r, default=str) + "\n" for r in rows).encode()
    if ext == ".parquet":
        import pandas as pd

        frame = pd.DataFrame(rows, columns=columns)
        buf = io.BytesIO()
        try:
            frame.astype({c: "string" for c in columns if frame[c].dtype == object}).to_parquet(
                buf, index=False
            )
        except Exception:  # a frame Parquet cannot hold: the file is garbage instead
            return b"PAR1 not parquet"
        return buf.getvalue()
    lines = [",".join(columns)]
    lines += [",".join("" if r[c] is None else str(r[c]) for c in columns) for r in rows]
    return ("\n".join(lines) + "\n").encode()


# --out targets -------------------------------------------------------------------------------

OUT_KINDS = ["new", "nested", "empty", "users", "file", "cwd", "parent", "own", "under_file",
             "proc", "user_file_itself", "nul"]  # fmt: skip


# Mostly targets that work, so that most examples run the command through.
OUTS = st.sampled_from(["new"] * 6 + ["nested", "empty", "own"] * 2 + OUT_KINDS)


def make_out(kind: str, work: Path) -> str:
    """Prepare an --out target of ``kind`` in ``work``; return the argument to pass."""
    if kind == "new":
        return "run"
    if kind == "nested":
        return "a/b/run"
    if kind == "empty":
        (work / "empty").mkdir()
        return "empty"
    if kind == "users":
        (work / "mine").mkdir()
        (work / "mine" / "notes.txt").write_text("mine")
        return "mine"
    if kind == "file":
        (work / "data.csv").write_text("1,2\n")
        return "data.csv"
    if kind == "cwd":
        return "."
    if kind == "parent":
        return ".."
    if kind == "own":
        (work / "old").mkdir()
        (work / "old" / "summary.csv").write_text("old")
        (work / "old" / MARKER).write_text(json.dumps({"entries": ["summary.csv"]}))
        return "old"
    if kind == "under_file":
        return f"{USER_FILE}/run"
    if kind == "user_file_itself":
        return USER_FILE
    if kind == "nul":
        return "run\x00x"
    return "/proc/laminar-fuzz"


def _sim_sets(keep=lambda key: True) -> list[str]:
    return [x for k, v in TINY.items() if keep(k) for x in ("--set", f"{k}={v}")]


# Properties ----------------------------------------------------------------------------------


@settings(FUZZ, max_examples=_n(300))
@given(cfg=config_files(sim=False), sets=overrides(sim=False), ext=st.sampled_from(
    [".yaml", ".toml", ".yml", ".json"]))  # fmt: skip
def test_config_show(cfg, sets, ext):
    with _workdir() as work:
        (work / f"c{ext}").write_bytes(cfg)
        argv = ["config", "show", f"c{ext}", *[x for s in sets for x in ("--set", s)]]
        run_cli(argv, work)


@pytest.mark.slow
@settings(FUZZ, max_examples=_n(200))
@given(cfg=config_files(sim=True), sets=overrides(sim=True, n=2), out=OUTS)
def test_simulate(cfg, sets, out):
    with _workdir() as work:
        (work / "c.yaml").write_bytes(cfg)
        target = make_out(out, work)
        argv = ["simulate", "c.yaml", *[x for s in sets for x in ("--set", s)], "--out", target]
        code, err = run_cli(argv, work, out=target)
        if out in ("users", "file", "cwd", "parent", "under_file", "proc", "user_file_itself",
                   "nul"):  # fmt: skip
            assert code == 2, (out, err)


@settings(FUZZ, max_examples=_n(250))
@given(trace=trace_files(), fit=st.booleans(), cap=st.sampled_from([[], ["--max-response-len",
                                                                        "1000"]]))  # fmt: skip
def test_trace_show_and_fit(trace, fit, cap):
    name, content = trace
    with _workdir() as work:
        (work / name).write_bytes(content)
        run_cli(["trace", "fit" if fit else "show", name, *cap], work)


@pytest.mark.slow
@settings(FUZZ, max_examples=_n(200))
@given(trace=trace_files(), sets=overrides(sim=True, n=1), out=OUTS,
       limits=st.booleans())  # fmt: skip
def test_replay(trace, sets, out, limits):
    name, content = trace
    with _workdir() as work:
        (work / name).write_bytes(content)
        target = make_out(out, work)
        # Without limits, replay takes the length limits from the trace.
        shape = _sim_sets(keep=lambda k: limits or "max_" not in k)
        argv = ["replay", name, *shape, *[x for s in sets for x in ("--set", s)], "--out", target]
        run_cli(argv, work, out=target)


@pytest.fixture(scope="module")
def sim_run_dir(tmp_path_factory):
    """One small simulated run directory, copied into each plot example."""
    root = tmp_path_factory.mktemp("fuzz-run")
    assert main(["simulate", *_sim_sets(), "--set", "sim.systems=[laminar, verl]",
                 "--out", str(root / "run")]) == 0  # fmt: skip
    return root / "run"


CORRUPTIONS = ["none", "none", "delete", "garbage", "empty", "truncate", "marker"]


@pytest.mark.slow
@settings(FUZZ, max_examples=_n(16))
@given(data=st.data())
def test_plot(sim_run_dir, data):
    corruption = data.draw(st.sampled_from(CORRUPTIONS))
    victim = data.draw(st.sampled_from(sorted(p.name for p in sim_run_dir.iterdir())))
    out = data.draw(st.sampled_from([None, *OUT_KINDS]))
    with _workdir() as work:
        run = Path(shutil.copytree(sim_run_dir, work / "sim"))
        path = run / victim
        if corruption == "delete":
            path.unlink()
        elif corruption == "garbage":
            path.write_bytes(data.draw(st.binary(min_size=1, max_size=100)))
        elif corruption == "empty":
            path.write_bytes(b"")
        elif corruption == "truncate":
            path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
        elif corruption == "marker":
            (run / MARKER).write_text(data.draw(st.sampled_from(["", "[]", "{", '{"entries": 5}'])))
        argv = ["plot", "sim"]
        target = "sim/plots" if out is None else make_out(out, work)
        if out is not None:
            argv += ["--out", target]
        run_cli(argv, work, out=target)


def test_the_strategies_reach_every_leaf_key():
    """The fuzzed keys are the config tree's (a new field is fuzzed without editing this file)."""
    assert "cluster.gpus" in LEAF_KEYS and "runtime.kill_trainer_at_step" in LEAF_KEYS
    assert all(k in LEAF_KEYS for k in SIZE_KEYS)
    sections = {k.split(".")[0] for k in LEAF_KEYS}
    assert sections == set(LaminarConfig.model_fields)  # every section has fuzzed keys
    # every kind of --out target the issue names: new, a user's directory, a file, ., ..
    assert {"new", "users", "file", "cwd", "parent", "own", "proc"} <= set(OUT_KINDS)
