"""The policy layer imports no engine: both the simulator and the runtime can call it."""

from __future__ import annotations

import subprocess
import sys


def test_policy_imports_no_engine():
    code = (
        "import sys, laminar.policy\n"
        "bad = [m for m in ('simpy', 'ray', 'torch', 'vllm') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
