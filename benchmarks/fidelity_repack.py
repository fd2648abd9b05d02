"""Repack on / off in the simulator, taken apart on a campaign's own runs.

The fidelity study's repack ranking compares the predictions of the repack-on runs with those
of the repack-off runs, each replaying its own response lengths. This splits that predicted
ratio into what the traces differ by and what the simulated repack does on them: every
repack-on run's job is simulated with the step bound it ran with (``fidelity.job_config``),
with the default bound (``repack.max_step_slowdown``, what predictions used before run
directories recorded the bound) and with repack off, each on the run's own lengths; the
repack-off runs as ``fidelity.py`` predicts them. Run::

    python benchmarks/fidelity_repack.py --runs runs/fidelity10 \\
        --cost docs/fidelity/campaign10/cost.json --out docs/fidelity/campaign10/repack.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from laminar.config.policy import SLOWDOWN_DEFAULT
from laminar.sim import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity import emit, job_config, run_dirs, with_repack


def variants(run: Path, cost: Path) -> dict:
    """Train tokens/s and repack moves of ``run``'s job: as it ran, at the default bound, and
    with repack off (all on the run's own lengths)."""
    cfg = job_config(run, cost)
    jobs = {"as_ran": cfg,
            "default_bound": with_repack(cfg, max_step_slowdown=SLOWDOWN_DEFAULT),
            "off": with_repack(cfg, enabled=False)}  # fmt: skip
    out = {}
    for name, job in jobs.items():
        row = simulate(job).summary.iloc[0]
        out[f"{name}_tokens_per_s"] = float(row["train_tokens_per_s"])
        out[f"{name}_moves"] = int(row["repack_moves"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="output directory of fidelity_runs.py")
    p.add_argument("--cost", required=True, help="cost file (fidelity.py's cost.json)")
    p.add_argument("--on", default="laminar", help="the repack-on setting")
    p.add_argument("--off", default="laminar-norepack", help="the repack-off setting")
    p.add_argument("--out", help="Markdown to write")
    args = p.parse_args(argv)
    runs, cost = run_dirs(Path(args.runs)), Path(args.cost).resolve()
    on = pd.DataFrame([variants(d, cost) for d in runs[args.on]])
    off = [simulate(job_config(d, cost)).summary.iloc[0]["train_tokens_per_s"]
           for d in runs[args.off]]  # fmt: skip
    base = float(pd.Series(off).median())
    lines = [f"Predicted train tokens/s of the `{args.on}` runs' jobs, each on its own lengths, "
             f"against the `{args.off}` runs' (median {base:,.0f}): medians over "
             f"{len(on)} runs, the ratio to that median, and the median per-run ratio to the "
             "same run with repack off (what the simulated repack itself does).", "",
             "| job | moves (median) | tokens/s | / repack-off runs | / same run, repack off |",
             "|---|---|---|---|---|"]  # fmt: skip
    for name, label in (("as_ran", "bound as it ran"),
                        ("default_bound", f"default bound {SLOWDOWN_DEFAULT:g}"),
                        ("off", "repack off")):  # fmt: skip
        tps = on[f"{name}_tokens_per_s"]
        lines.append(f"| {label} | {on[f'{name}_moves'].median():g} | {tps.median():,.0f} | "
                     f"{tps.median() / base:.3f}x | "
                     f"{(tps / on['off_tokens_per_s']).median():.3f}x |")  # fmt: skip
    return emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    sys.exit(main())
