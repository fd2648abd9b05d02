"""laminar.specs imports neither the simulator nor the runtime: the planner and the sim share it."""

from __future__ import annotations

import subprocess
import sys


def test_specs_import_no_sim_runtime_or_engine():
    code = (
        "import sys, laminar.specs.memory, laminar.specs.trainer\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('simpy', 'ray', 'torch', 'vllm')"
        " or m.startswith(('laminar.sim', 'laminar.runtime'))]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
