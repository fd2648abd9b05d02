"""``plan.csv`` does not depend on where the simulations ran: in process, in local worker
processes or on a (local) Ray cluster."""

from __future__ import annotations

import dataclasses

import pytest

from laminar.plan import run_plan, write_plan

from .test_plan import OPTS, SPACE, _base

# Enough points that two workers finish them out of order.
SPACE_ONE = dataclasses.replace(SPACE, gpus=(24,))


def _csv(tmp_path, name, **opts) -> bytes:
    result = run_plan(_base(), SPACE_ONE, dataclasses.replace(OPTS, **opts))
    return (write_plan(result, tmp_path / name) / "plan.csv").read_bytes()


@pytest.mark.slow
def test_jobs_1_and_2_write_the_same_plan(tmp_path):
    assert _csv(tmp_path, "one", jobs=1) == _csv(tmp_path, "two", jobs=2)


@pytest.mark.slow
def test_a_local_ray_cluster_writes_the_same_plan(tmp_path):
    pytest.importorskip("ray")
    assert _csv(tmp_path, "one", jobs=1) == _csv(tmp_path, "ray", jobs=2, address="local")


@pytest.mark.slow
def test_the_console_script_runs_worker_processes(tmp_path):
    """Workers must not re-run the ``laminar`` script (it has no ``__main__`` guard)."""
    import subprocess
    import sys
    from pathlib import Path

    from .test_plan import SMALL

    script = Path(sys.executable).parent / "laminar"
    if not script.exists():
        pytest.skip("no laminar console script next to this interpreter")
    sets = [x for s in SMALL for x in ("--set", s)]
    out = tmp_path / "plan"
    proc = subprocess.run(
        [str(script), "plan", *sets, "--systems", "laminar", "--tp", "1", "--max-batch", "8,64",
         "--jobs", "2", "--no-cache", "--short-steps", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (out / "best.yaml").exists() and "Traceback" not in proc.stderr
