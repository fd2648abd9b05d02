"""The relay tier's chain broadcast against App. D's model and against naive sends.

    python benchmarks/bench_relay.py [--relays 2 4 8] [--mbytes 64 256] [--transports ucx tcp]
                                     [--link-gbps 0 1] [--repeats 3] [--rounds 1]
                                     [--out results.jsonl]

For each (transport, P, M): P relay processes, α and β measured on one link, the broadcast run
``repeats`` times with k = optimal_chunks(P, M, α, β), and the trainer sending M to each relay
in turn (naive). ``rounds`` > 1 runs the whole matrix again, interleaved, so a burst of load
from other users hits every configuration alike. Prints one JSON object per configuration and
round, then a Markdown table of medians over rounds for benchmarks/RESULTS.md.

``--link-gbps 0`` runs the links as fast as this machine moves bytes between processes: every
relay then shares its two cores, so the hops of the chain cannot all run at once, as they would
on separate machines. A value > 0 paces every link (trainer's included) to that bandwidth, below
what the cores sustain for all hops together: the setting the model describes.

Goals (issue 7): measured within 1.5x of broadcast_time(p, k*); actor stall <= 2x one memory
copy of M, independent of P; the chain beats naive from P >= 4.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict

from laminar.runtime.relay.bench import RelayBench

COLUMNS = (
    "| transport | link | P | M (MiB) | k | α (µs) | link (GiB/s) | measured (s) | model (s) "
    "| meas/model | CPU floor (s) | stall (ms) | copy (ms) | shm copy (ms) | stall/copy "
    "| naive (s) | meas/naive | load |"
)


def row(rs: list[dict]) -> str:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rs)

    r = rs[0]
    link = f"{r['link_gbps_emulated']:g} Gb/s" if r.get("link_gbps_emulated") else "unpaced"
    return (
        f"| {r['transport']} | {link} | {r['p']} | {r['nbytes'] >> 20} | {r['chunks']} "
        f"| {med('alpha_s') * 1e6:.0f} | {med('link_gib_per_s'):.2f} | {med('measured_s'):.3f} "
        f"| {med('model_s'):.3f} | {med('measured_over_model'):.2f} | {med('cpu_floor_s'):.3f} "
        f"| {med('actor_stall_s') * 1e3:.1f} | {med('copy_s') * 1e3:.1f} "
        f"| {med('copy_shm_s') * 1e3:.1f} "
        f"| {med('stall_over_copy'):.2f} | {med('naive_s'):.3f} "
        f"| {med('measured_over_naive'):.2f} | {med('load_avg_1m'):.1f} |"
    )


def wait_for_quiet(max_load: float, timeout_s: float = 600.0) -> None:
    """Other users share this machine: start a configuration when their load has dropped."""
    deadline = time.monotonic() + timeout_s
    while max_load > 0 and os.getloadavg()[0] > max_load and time.monotonic() < deadline:
        time.sleep(5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--relays", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--mbytes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--transports", nargs="+", choices=("ucx", "tcp"), default=["ucx", "tcp"])
    ap.add_argument(
        "--link-gbps",
        type=float,
        nargs="+",
        default=[0.0, 1.0],
        help="emulated link bandwidths to run (0: unpaced)",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--kill", action="store_true", help="also time a relay failure (P >= 3)")
    ap.add_argument(
        "--max-load",
        type=float,
        default=0.0,
        help="wait (up to 10 min) for the 1-min load average to drop below this "
        "before each configuration; 0: do not wait",
    )
    ap.add_argument("--out", help="append each configuration's JSON to this file")
    args = ap.parse_args()
    results: dict[tuple, list[dict]] = defaultdict(list)
    for _ in range(args.rounds):
        for gbps in args.link_gbps:
            for transport in args.transports:
                for mbytes in args.mbytes:
                    for p in args.relays:
                        wait_for_quiet(args.max_load)
                        r = RelayBench(
                            p,
                            mbytes << 20,
                            transport,
                            repeats=args.repeats,
                            kill=args.kill and p >= 3,
                            link_gbps=gbps,
                        ).run()
                        results[(gbps, transport, mbytes, p)].append(r)
                        line = json.dumps(r)
                        print(line, flush=True)
                        if args.out:
                            with open(args.out, "a") as f:
                                f.write(line + "\n")
    print()
    print(COLUMNS)
    print("|---" * (COLUMNS.count("|") - 1) + "|")
    for key in sorted(results):
        print(row(results[key]))


if __name__ == "__main__":
    main()
