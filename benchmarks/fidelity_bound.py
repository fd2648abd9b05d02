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

import argparse
import sys
from pathlib import Path

from laminar.config.policy import SLOWDOWN_DEFAULT

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fidelity


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--bound", type=float, default=SLOWDOWN_DEFAULT,
                   help="repack.max_step_slowdown for every run (0: unbounded)")
    args, rest = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    bound = args.bound

    def at_bound(cfg):
        repack = cfg.repack.model_copy(update={"max_step_slowdown": bound})
        return cfg.model_copy(update={"repack": repack})

    fidelity.as_ran = at_bound  # job_config asks it for the bound of every run
    return fidelity.main(rest)


if __name__ == "__main__":
    sys.exit(main())
