"""Investigation (issue 31): does work on the other core slow a core's work on this machine?

A victim process pinned to core 0 times a fixed piece of work (the speed probe's pure-Python
loop and its 192x192 float32 matrix products, ``laminar.runtime.profiling.speedprobe``) while
a second process pinned to core 1 does one of: nothing; vLLM's idle wait (a ``sched_yield()``
loop, what an engine's worker does for 1 s after its last step); a pure-Python loop; the same
matrix products; a memory stream (copies of a 64 MiB array). Rounds interleave the modes, so a
drift of the machine hits each alike; the figure is each mode's median time over the idle
mode's, per workload. Needs two cores and the heavy-work lock:

    flock /tmp/laminar-heavy.lock python benchmarks/cross_core_ab.py --rounds 12
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

MODES = ("idle", "spin", "python", "matmul", "stream")


def _interfere(mode: str, core: int, stop) -> None:
    os.sched_setaffinity(0, {core})
    if mode == "idle":
        stop.wait()
        return
    if mode in ("matmul", "stream"):
        import numpy as np

        if mode == "matmul":
            import torch

            torch.set_num_threads(1)
            a, b = torch.randn(192, 192), torch.randn(192, 192)
        else:
            src = np.ones(64 * 2**20 // 8)
            dst = np.empty_like(src)
    acc = 0
    while not stop.is_set():
        if mode == "spin":
            for _ in range(1000):
                os.sched_yield()
        elif mode == "python":
            for i in range(20_000):
                acc = (acc + i * i) % 1_000_003
        elif mode == "matmul":
            for _ in range(20):
                torch.mm(a, b)
        else:
            np.copyto(dst, src)


def _victim(core: int, repeats: int) -> dict[str, float]:
    os.sched_setaffinity(0, {core})
    import torch

    from laminar.runtime.profiling.speedprobe import _python_work

    torch.set_num_threads(1)
    a, b = torch.randn(192, 192), torch.randn(192, 192)
    out = {"python_s": [], "matmul_s": []}
    for _ in range(repeats):
        t = time.perf_counter()
        _python_work()
        out["python_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(40):
            torch.mm(a, b)
        out["matmul_s"].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--repeats", type=int, default=30, help="timed pieces per mode and round")
    args = p.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        p.error("needs two cores")
    ctx = mp.get_context("spawn")
    times: dict[str, dict[str, list[float]]] = {m: {"python_s": [], "matmul_s": []} for m in MODES}
    for r in range(args.rounds):
        order = MODES if r % 2 == 0 else tuple(reversed(MODES))
        for mode in order:
            stop = ctx.Event()
            other = ctx.Process(target=_interfere, args=(mode, 1, stop))
            other.start()
            time.sleep(0.3)  # the interferer at work
            with ctx.Pool(1) as pool:
                got = pool.apply(_victim, (0, args.repeats))
            stop.set()
            other.join()
            for k, v in got.items():
                times[mode][k].append(v)
    print("| other core | python work / idle | matmul work / idle |")
    print("|---|---|---|")
    base = {k: statistics.median(times["idle"][k]) for k in ("python_s", "matmul_s")}
    for mode in MODES:
        ratio = [statistics.median(times[mode][k]) / base[k] for k in ("python_s", "matmul_s")]
        print(f"| {mode} | {ratio[0]:.3f} | {ratio[1]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
