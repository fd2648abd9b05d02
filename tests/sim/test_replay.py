"""``laminar replay TRACE``: the systems on a trace's lengths, same run directory as simulate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from laminar.cli import main
from laminar.config import load_config

from .conftest import SMALL


def _azure(path, rows: int = 60, seed: int = 1):
    """An Azure-style serving trace (TIMESTAMP, ContextTokens, GeneratedTokens)."""
    rng = np.random.default_rng(seed)
    prompt = rng.integers(20, 250, rows)
    gen = np.minimum(rng.lognormal(5.5, 0.9, rows).astype(int) + 1, 1024)
    lines = [f"2023-11-16 18:15:{i % 60:02d}.{i:07d},{p},{g}" for i, (p, g) in
             enumerate(zip(prompt, gen, strict=True))]  # fmt: skip
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(lines) + "\n")
    return prompt, gen


def _sets():
    return [x for s in SMALL for x in ("--set", s)]


def test_replay_of_an_azure_trace_end_to_end(tmp_path, capsys):
    trace = tmp_path / "azure.csv"
    prompt, gen = _azure(trace)
    out = tmp_path / "run"
    code = main(["replay", str(trace), *_sets(), "--systems", "laminar,verl", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "laminar" in printed and "verl" in printed and str(out) in printed
    names = {p.name for p in out.iterdir()}
    assert {"config.yaml", "summary.csv", "steps.csv", "trajectories.parquet"} <= names
    cfg = load_config(out / "config.yaml")
    assert cfg.workload.source.type == "trace" and cfg.workload.source.path == str(trace)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["system"].tolist() == ["laminar", "verl"]
    assert (summary["steps"] == cfg.workload.steps).all()
    traj = pd.read_parquet(out / "trajectories.parquet")
    # Every simulated trajectory carries lengths from the trace, rows taken in file order.
    first = traj[(traj["system"] == "verl") & (traj["epoch"] == 0)].sort_values("traj_id")
    n = len(prompt)
    rows = (first["prompt_id"] * cfg.workload.samples_per_prompt + first["sample_index"]) % n
    assert (first["prompt_len"].to_numpy() == prompt[rows.to_numpy()]).all()
    assert (first["response_len"].to_numpy() == gen[rows.to_numpy()]).all()
    assert set(traj["finish_reason"]) <= {"stop", "length"}


def test_replay_matches_simulate_with_a_trace_source(tmp_path):
    trace = tmp_path / "azure.csv"
    _azure(trace, seed=2)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["replay", str(trace), *_sets(), "--out", str(a)]) == 0
    src = f"workload.source={{type: trace, path: {trace}}}"
    assert main(["simulate", *_sets(), "--set", src, "--out", str(b)]) == 0
    for name in ("summary.csv", "steps.csv", "trajectories.parquet"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize(
    "content, extra, message",
    [
        (None, [], "no such file"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nx,3000,10\n", [], "max_prompt_len"),
        ("a,b\n1,2\n", [], "azure.csv"),
    ],
)
def test_replay_errors_exit_2_and_write_nothing(tmp_path, capsys, content, extra, message):
    trace = tmp_path / "azure.csv"
    if content is not None:
        trace.write_text(content)
    out = tmp_path / "run"
    assert main(["replay", str(trace), *_sets(), *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
