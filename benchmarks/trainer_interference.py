"""How much one competing process slows a two-thread torch training step (sync mode's trainer).

Usage::

    flock /tmp/laminar-heavy.lock python benchmarks/trainer_interference.py \
        alone yield@0 busy@1 busy@0
    OMP_WAIT_POLICY=PASSIVE python benchmarks/trainer_interference.py alone busy@1

Each condition runs a small MLP's forward, backward and optimizer step (three per timed
iteration; torch on 2 threads, the process on cores 0 and 1, as sync mode's trainer) next to
the named competitors: ``yield@C`` a process pinned to core C that loops on ``sched_yield()``
(what an idle vLLM worker does for a second after its last step), ``busy@C`` a plain busy loop
on core C; ``alone`` none. Prints the median and worst wall time per iteration and the CPU
share (CPU seconds / wall seconds of the stepping process: 2 is both threads running).
Needs two cores.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time


def competitor(core: int, kind: str, stop) -> None:
    os.sched_setaffinity(0, {core})
    while not stop.is_set():
        if kind == "yield":
            for _ in range(1000):
                os.sched_yield()
        else:
            for _ in range(100_000):
                pass


def steps(iterations: int) -> list[tuple[float, float]]:
    """(wall s, CPU s) of each timed iteration."""
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(),
                                  torch.nn.Linear(512, 128)) for _ in range(4)]  # fmt: skip
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(2500, 128)
    out = []
    for _ in range(iterations):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(3):
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        out.append((time.perf_counter() - t, time.process_time() - c))
    return out


def main(argv: list[str]) -> int:
    import torch

    if (os.cpu_count() or 1) < 2:
        print("needs two cores", file=sys.stderr)
        return 2
    os.sched_setaffinity(0, {0, 1})
    torch.set_num_threads(2)
    steps(2)  # warm up
    for cond in argv or ["alone", "yield@0", "busy@1"]:
        stop, procs = mp.Event(), []
        for part in filter(None, cond.split("+")):
            if part == "alone":
                continue
            kind, _, core = part.partition("@")
            if kind not in ("yield", "busy") or not core.isdigit():
                print(f"bad condition {part!r}: expected alone, yield@CORE or busy@CORE",
                      file=sys.stderr)  # fmt: skip
                return 2
            procs.append(mp.Process(target=competitor, args=(int(core), kind, stop)))
            procs[-1].start()
        time.sleep(0.2)
        res = steps(12)
        stop.set()
        for p in procs:
            p.join()
        wall = sorted(w for w, _ in res)
        share = sorted(c / w for w, c in res)
        print(f"{cond:20s} wall median {wall[len(wall) // 2] * 1e3:6.1f} ms, worst "
              f"{wall[-1] * 1e3:6.1f} ms; CPU share median {share[len(share) // 2]:.2f}, "
              f"lowest {share[0]:.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
