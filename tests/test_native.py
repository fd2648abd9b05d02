"""The compiled simulator modules (``laminar.native``): loaded only when fresh, same bits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from laminar import native

ROOT = Path(__file__).resolve().parents[1]

# A small run of every mechanism the compiled modules carry: repack moves, KV-bound
# preemption, several systems; its summary and trajectory table as exact text.
PROBE = """
import hashlib, json, sys
from laminar.config import load_config
from laminar import native
from laminar.sim import simulate
import laminar.sim.replica as replica
cfg = load_config(preset="paper-math-7b", overrides=[
    "cluster.gpus=64", "workload.prompts_per_step=32", "workload.steps=3",
    "sim.warmup_steps=0", "sim.systems=[laminar,verl,partial]",
])
r = simulate(cfg)
trajs = r.trajectories.to_csv(index=False, float_format="%.17g")
print(json.dumps({
    "active": native.active(),
    "file": replica.__file__,
    "summary": r.summary.to_csv(index=False, float_format="%.17g"),
    "trajectories": hashlib.sha256(trajs.encode()).hexdigest(),
    "rows": len(r.trajectories),
}))
"""


def _probe(env_extra: dict[str, str], pythonpath: Path = ROOT) -> dict:
    env = {**os.environ, **env_extra, "PYTHONPATH": str(pythonpath)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600,
        cwd=pythonpath,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "stderr": out.stderr}


def _fake_build(tmp_path: Path, **changes) -> Path:
    """A build directory whose manifest matches this checkout's sources (files empty)."""
    d = tmp_path / "_native"
    d.mkdir()
    modules = {}
    for m in native.MODULES:
        (d / f"{m}.so").write_bytes(b"")
        modules[m] = {"file": f"{m}.so", "sha256": native._sha256(native.source_path(m))}
    (d / "group.so").write_bytes(b"")
    manifest = {"abi": native._abi(), "mypy": "test", "modules": modules,
                "group": {"name": "g__mypyc", "file": "group.so"}, **changes}  # fmt: skip
    (d / native.MANIFEST).write_text(json.dumps(manifest))
    return d


def test_a_fresh_build_is_taken(tmp_path, monkeypatch):
    monkeypatch.delenv(native.ENV, raising=False)
    files, reason = native.check(_fake_build(tmp_path))
    assert files is not None and reason.startswith("compiled")
    assert set(files) == {*native.MODULES, "g__mypyc"}


def test_an_edited_source_falls_back_to_pure_python(tmp_path, monkeypatch):
    monkeypatch.delenv(native.ENV, raising=False)
    d = _fake_build(tmp_path)
    manifest = json.loads((d / native.MANIFEST).read_text())
    manifest["modules"]["laminar.sim.replica"]["sha256"] = "0" * 64
    (d / native.MANIFEST).write_text(json.dumps(manifest))
    files, reason = native.check(d)
    assert files is None and "laminar/sim/replica.py changed since the build" in reason


@pytest.mark.parametrize(
    "change, words",
    [({"abi": "cpython-39.so"}, "built for cpython-39.so"),
     ({"modules": {}}, "another module list"),
     ({"group": None}, "unreadable build manifest")],
)  # fmt: skip
def test_a_foreign_or_broken_build_is_refused(tmp_path, monkeypatch, change, words):
    monkeypatch.delenv(native.ENV, raising=False)
    files, reason = native.check(_fake_build(tmp_path, **change))
    assert files is None and words in reason


def test_a_missing_file_or_the_switch_means_pure_python(tmp_path, monkeypatch):
    monkeypatch.delenv(native.ENV, raising=False)
    d = _fake_build(tmp_path)
    (d / "group.so").unlink()
    assert "build incomplete" in native.check(d)[1]
    (tmp_path / "fresh").mkdir()
    fresh = _fake_build(tmp_path / "fresh")
    monkeypatch.setenv(native.ENV, "0")
    files, reason = native.check(fresh)
    assert files is None and reason.startswith(f"{native.ENV}=0")
    monkeypatch.delenv(native.ENV)
    assert "not built" in native.check(tmp_path / "nowhere")[1]


needs_build = pytest.mark.skipif(
    native.check()[0] is None and not os.environ.get("LAMINAR_EXPECT_NATIVE"),
    reason=f"compiled simulator not built here: {native.check()[1]}",
)


@pytest.mark.slow
@needs_build
def test_compiled_and_pure_python_give_the_same_bits():
    compiled = _probe({})
    pure = _probe({native.ENV: "0"})
    assert compiled["active"] and "/_native/" in compiled["file"], compiled
    assert not pure["active"] and pure["file"].endswith("replica.py")
    assert compiled["rows"] > 1000
    assert compiled["summary"] == pure["summary"]
    assert compiled["trajectories"] == pure["trajectories"]


@pytest.mark.slow
@needs_build
def test_an_edited_checkout_runs_its_edit_not_the_old_build(tmp_path):
    """A copy of the package with its build, one compiled source edited: the edit runs."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "laminar", copy / "laminar",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    src = copy / "laminar" / "sim" / "replica.py"
    src.write_text(src.read_text() + "\nEDITED = True\n")
    out = _probe({}, pythonpath=copy)
    assert not out["active"] and out["file"] == str(src)
    assert "replica.py changed since the build" in out["stderr"]
