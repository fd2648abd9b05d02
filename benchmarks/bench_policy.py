"""Time the policy layer's hot decisions.

    python benchmarks/bench_policy.py [--repeats 50] [--replicas 1024]

- ``plan_repack`` over N candidate replicas in one weight-version group (the worst case: every
  replica is a candidate and all may merge with each other), median of repeated runs.
  Goal (issue 2): <= 25 ms for N = 1024.
- ``optimal_chunks`` and ``rebuild_chain`` for p = 1024.
Prints one JSON object; copy the figures into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from laminar.policy.relay import optimal_chunks, plan_chain, rebuild_chain
from laminar.policy.repack import ReplicaState, TrajectoryState, plan_repack


def long_tail_replicas(n: int, seed: int) -> list[ReplicaState]:
    """N replicas late in a batch: 1..B-1 long trajectories each, KV falling (all candidates)."""
    rng = random.Random(seed)
    cap, batch = 200_000, 64
    out = []
    for i in range(n):
        k = rng.randint(1, batch - 1)
        lens = [int(rng.lognormvariate(7.5, 1.0)) + 1 for _ in range(k)]
        while sum(lens) >= cap:
            lens.pop()
        used = sum(lens)
        trajs = tuple(TrajectoryState(f"r{i}/t{j}", n_) for j, n_ in enumerate(lens))
        out.append(ReplicaState(f"r{i}", 7, cap, used, used + 1000, batch, trajs))
    return out


def no_room_replicas(n: int) -> list[ReplicaState]:
    """Adversarial: every replica holds B-1 trajectories, so no source fits anywhere and every
    source scans every destination (the O(|S|^2) worst case of best fit)."""
    cap, batch = 10**9, 8
    out = []
    for i in range(n):
        trajs = tuple(TrajectoryState(f"r{i}/t{j}", 100 + i) for j in range(batch - 1))
        used = sum(t.kv_tokens for t in trajs)
        out.append(ReplicaState(f"r{i}", 0, cap, used, used + 1, batch, trajs))
    return out


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--replicas", type=int, default=1024)
    args = ap.parse_args()
    rs = long_tail_replicas(args.replicas, seed=0)
    moves = plan_repack(rs)
    adversarial = no_room_replicas(args.replicas)
    chain = plan_chain([f"relay-{i}" for i in range(1024)], "relay-0")
    failed = {f"relay-{i}" for i in range(0, 1024, 7)}
    result = {
        "replicas": args.replicas,
        "moves": len(moves),
        "plan_repack_ms_median": round(median_ms(lambda: plan_repack(rs), args.repeats), 3),
        "plan_repack_no_room_ms_median": round(
            median_ms(lambda: plan_repack(adversarial), max(3, args.repeats // 10)), 3
        ),
        "optimal_chunks_us_median": round(
            1e3 * median_ms(lambda: optimal_chunks(1024, 140e9, 5e-6, 1 / 50e9), 1000), 3
        ),
        "rebuild_chain_ms_median_p1024": round(
            median_ms(lambda: rebuild_chain(chain, failed), 200), 4
        ),
        "plan_chain_ms_median_p1024": round(
            median_ms(lambda: plan_chain(chain.nodes, "relay-0"), 50), 3
        ),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
