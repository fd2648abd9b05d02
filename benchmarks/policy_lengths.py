"""How a run's policy answered the repeat task, and how the calibrated length model predicts it.

Issue 31: a prediction from the task's lengths missed by what the policy really generated. For
each ``laminar train`` run directory given (repeat task, with its trace), prints

- response / exact answer by exact-length bucket and by weight version (the exact answer of
  each prompt from ``laminar.policy.repeatanswers``, the runtime's own draw);
- held-out prompts: ``laminar.calibrate.answers`` fitted on the even prompt ids, the odd ones'
  responses drawn from it (``laminar.sim.local_workload.as_answered``, 20 draws) against their
  measured responses and their exact answers.

    python benchmarks/policy_lengths.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pandas as pd

from laminar.calibrate import answers
from laminar.calibrate.rundir import read_run
from laminar.sim.local_workload import as_answered


def _stats(v) -> dict[str, float]:
    v = np.asarray(v, dtype=float)
    return {"mean": v.mean(), "p50": np.median(v), "p90": np.quantile(v, 0.9),
            "p99": np.quantile(v, 0.99), "max": v.max()}  # fmt: skip


def report(path: str) -> str:
    run = read_run(path)
    df = answers.answered(run)
    if df is None:
        return f"{path}: no repeat task with a trace"
    df["prompt_id"] = run.lengths["prompt_id"].to_numpy()
    cap = run.config.workload.max_response_len
    hit, ran = (df.response == df.exact).mean(), df.at_cap.mean()
    out = [f"{path}: {len(df)} trajectories, max_response_len {cap}, exact length hit "
           f"{hit:.0%}, ran to the cap {ran:.1%}"]  # fmt: skip
    edges = [1, 4, 8, 16, 32, 64, 128, 256, 1 << 30]
    rows = []
    for lo, hi in itertools.pairwise(edges):
        m = (df.exact >= lo) & (df.exact < hi)
        if m.any():
            r, e = df.response[m], df.exact[m]
            rows.append({"exact": f"{lo}-{hi - 1}", "n": int(m.sum()),
                         "mean response / mean exact": r.mean() / e.mean(),
                         "median response / exact": float(np.median(r / e))})  # fmt: skip
    out.append(pd.DataFrame(rows).round(2).to_string(index=False))
    traj = pd.read_parquet(run.path / "trajectories.parquet")
    if "weight_version" in traj and len(traj) == len(df):
        g = df.assign(v=traj["weight_version"].to_numpy()).groupby("v")
        out.append("by weight version, mean response / mean exact: " + ", ".join(
            f"v{v} {r:.2f}" for v, r in (g.response.mean() / g.exact.mean()).items()))  # fmt: skip
    fit, test = df.prompt_id % 2 == 0, df.prompt_id % 2 == 1
    run.lengths = run.lengths[fit.to_numpy()]
    block = answers.policy_lengths([run])
    draws = [as_answered(df.exact[test].to_numpy(), block, cap, np.random.default_rng(s))
             for s in range(20)]  # fmt: skip
    table = {"measured (odd prompt ids)": _stats(df.response[test]),
             "as answered (fitted on even ids)": {k: np.mean([_stats(d)[k] for d in draws])
                                                  for k in _stats(draws[0])},
             "exact answers": _stats(df.exact[test])}  # fmt: skip
    out.append(f"held-out prompts ({int(fit.sum())} fitted, {int(test.sum())} predicted):")
    out.append(pd.DataFrame(table).T.round(1).to_string())
    return "\n".join(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(report(p), end="\n\n")
