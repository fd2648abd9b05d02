"""``fidelity.py`` with every run predicted at one repack step bound, not the one it ran with.

Before run directories recorded the bound repack ran with (``laminar.runtime.data.manager.as_ran``),
a run trained without a cost file (no step bound) was predicted with the config's default bound
(``repack.max_step_slowdown``, 1.15), which on CPU costs blocks most moves. This replays that
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
    # job_config asks ``as_ran`` for the bound of every run
    fidelity.as_ran = lambda cfg: fidelity.with_repack(cfg, max_step_slowdown=args.bound)
    return fidelity.main(rest)


if __name__ == "__main__":
    sys.exit(main())
