"""A ready GPU check: what the runtime and the simulator need measured on one GPU machine.

Usage::

    python benchmarks/gpu_check.py [--out DIR]        # one H200 (or any CUDA GPU), <= 10 min
    python benchmarks/gpu_check.py --dry-run          # the same path on CPU, tiny shapes (CI)

Nothing is downloaded: every model is a random-weight model of a real architecture created
here (``laminar.runtime.models.localmodel``; vLLM's ``load_format="dummy"`` where no file is
needed).
Parts (``gpu_check_parts.py``), each in its own process (a GPU is fully released between them)
with its own time limit:

1. **decode** — vLLM decode step time against batch size and KV tokens, and prefill time, for
   Qwen2.5-1.5B- and 7B-shaped models (bf16): ``max_tokens=T`` minus ``max_tokens=1``, over
   ``T - 1`` steps; fitted to the simulator's ``decode_base_s + b * decode_per_seq_s +
   kv * decode_per_kv_token_s`` and ``prefill_base_s + n * prefill_per_token_s`` (NNLS);
2. **fsdp** — one FSDP2 GRPO step of the trainer ranks (``laminar.runtime.train``) on a
   1.5B-shaped model: seconds, tokens/s, FLOP/s (8 x params x tokens, as the simulator counts);
3. **train** — ``laminar train`` on cuda in both modes through the pretrained path (a
   0.5B-shaped Qwen2 directory, a JSONL arithmetic task, rollout and trainer sharing the GPU);
4. **publish** — ``laminar bench relay`` with 7B-sized weights (bf16 bytes): actor stall and
   broadcast time.

Output: one table on stdout, ``gpu_check.json`` (every measurement), and
``gpu_check-qwen2.5-7b.cost.json``, a cost file ``laminar simulate`` reads (``sim.cost_file``):
the ``h800`` / ``qwen2.5-7b`` preset with the coefficients measured here in place of the
derived ones, each with its source.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_check_parts, beside this file
# per part: (shape, time limit in seconds) on a GPU; dry runs use the tiny shape
DECODE_SHAPES = {"qwen2.5-1.5b": 140, "qwen2.5-7b": 170}
PART_LIMIT_S = {"fsdp": 90, "train": 200, "publish": 70}
BUDGET_S = 600.0  # the whole check on a GPU machine; a part gets at most what is left


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
    for part, err in results.get("errors", {}).items():
        row(part, "FAILED", err.splitlines()[-1][:80] if err else "")
    return "\n".join(lines)


# -- driver -----------------------------------------------------------------------------------


def run_part(name: str, args: argparse.Namespace, limit_s: float, *extra: str) -> dict:
    """One part in a child process (with a time limit); its JSON result. On a GPU, a part
    gets at most what is left of the 10-minute budget (``BUDGET_S``)."""
    if args.dry_run:
        limit_s *= 4  # CPU engines start slowly; CI has its own limit
    else:
        left = BUDGET_S - (time.perf_counter() - args.t0)
        if left < 30:
            raise RuntimeError(f"skipped: {left:.0f} s left of the {BUDGET_S:.0f} s budget")
        limit_s = min(limit_s, left)
    res = Path(args.out) / f"part-{name}{'-' + extra[0] if extra else ''}.json"
    cmd = [sys.executable, __file__, "--part", name, "--out", args.out, "--result", str(res)]
    cmd += [*(["--shape", extra[0]] if extra else []), *(["--dry-run"] if args.dry_run else [])]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.update(HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", RAY_USAGE_STATS_ENABLED="0")
    if args.dry_run:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit_s)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-4000:] or f"exit {proc.returncode}")
    out = json.loads(res.read_text())
    out["part_s"] = time.perf_counter() - t
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="the CPU path with tiny shapes (CI)")
    p.add_argument("--out", default="gpu_check", help="directory for models, runs and results")
    p.add_argument("--skip", action="append", default=[], choices=("decode", *PART_LIMIT_S))
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--shape", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    if args.part:  # a child: one part, its JSON into --result
        from gpu_check_parts import PARTS, part_decode

        fn = part_decode if args.part == "decode" else PARTS[args.part]
        res = fn(args.shape, out, args.dry_run) if args.part == "decode" else fn(out, args.dry_run)
        Path(args.result).write_text(json.dumps(res))
        return 0
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: run with --dry-run for the CPU path", file=sys.stderr)
            return 2
    args.t0 = time.perf_counter()
    label = _machine_label(args.dry_run)
    results: dict[str, Any] = {
        "machine": label,
        "dry_run": args.dry_run,
        "decode": {},
        "errors": {},
    }
    t0 = time.perf_counter()
    if "decode" not in args.skip:
        for shape, limit in DECODE_SHAPES.items():
            if args.dry_run and shape != "qwen2.5-1.5b":
                continue  # one tiny shape stands for both on CPU
            try:
                d = run_part("decode", args, limit, shape)
                d["fit_decode"], d["fit_prefill"] = (
                    fit_decode(d["decode"]),
                    fit_prefill(d["prefill"]),
                )
                results["decode"]["tiny" if args.dry_run else shape] = d
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                results["errors"][f"decode {shape}"] = str(e)
    for name in PART_LIMIT_S:
        if name in args.skip:
            continue
        try:
            results[name] = run_part(name, args, PART_LIMIT_S[name])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            results["errors"][name] = str(e)
    results["total_s"] = time.perf_counter() - t0
    cost_path = out / "gpu_check-qwen2.5-7b.cost.json"
    cost = cost_file(results, label)
    try:  # the checks every command's cost-file reader applies: never write one it refuses
        from laminar.costfile import check_cost_content
        from laminar.errors import ConfigError

        check_cost_content(json.loads(cost), str(cost_path))
        cost_path.write_text(cost)
    except ConfigError as e:
        results["errors"]["cost file"] = str(e)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"\n{results['total_s']:.0f} s; results in {out / 'gpu_check.json'}, cost file "
          f"{out / 'gpu_check-qwen2.5-7b.cost.json'}")  # fmt: skip
    return 1 if results["errors"] else 0


def _machine_label(dry: bool) -> str:
    if dry:
        return f"cpu ({platform.processor() or platform.machine()}, dry run)"
    import torch

    return torch.cuda.get_device_name(0)


if __name__ == "__main__":
    sys.exit(main())
