"""``fidelity.py`` with every run predicted at one repack step bound, not the one it ran with.

Before run directories recorded the bound repack ran with (``laminar.runtime.manager.as_ran``),
a run trained without a cost file (no step bound) was predicted with the config's default bound
(``repack.max_step_slowdown``, 1.15), which on CPU costs blocks every move. This replays that
prediction, to show what the recorded bound changes. Same arguments as ``fidelity.py`` plus
``--bound`` (default: the config default); write it somewhere other than ``docs/fidelity``::

    python benchmarks/fidelity_bound.py --runs runs/fidelity10 \\
        --calibrate laminar sync sync-1rollout --data /tmp/bound --doc /tmp/bound/README.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from laminar.config.policy import SLOWDOWN_DEFAULT

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fidelity


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    bound = SLOWDOWN_DEFAULT
    if "--bound" in argv:
        i = argv.index("--bound")
        bound = float(argv[i + 1])
        del argv[i : i + 2]

    def at_bound(cfg):
        repack = cfg.repack.model_copy(update={"max_step_slowdown": bound})
        return cfg.model_copy(update={"repack": repack})

    fidelity.as_ran = at_bound  # job_config asks it for the bound of every run
    return fidelity.main(argv)


if __name__ == "__main__":
    sys.exit(main())
