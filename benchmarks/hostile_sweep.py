"""A hostile user's sweep of the `laminar` CLI (issue 32, "Done when").

Runs each case as a subprocess of `laminar` (timeout each: a hang), in a directory of its own
holding copies of its inputs, and classifies it:

- clean: refused with exit 2, one `error:` line naming the file/field/row, no traceback; or
  accepted (exit 0) where the input is valid;
- traceback, hang, other-exit (any exit but 0/2 without a traceback);
- data loss (a file that existed before, input or previous output, changed or vanished);
- leftover (a refusal that left new files behind: half-written);
- nonsense (exit 0 on input that must be refused), unclear (exit 2 without one clear line
  naming what is wrong), false-refusal (exit 2 on valid input).

Every case runs in its own directory under $SWEEP_ROOT (default /tmp/hostile-sweep); no case
names a real device, /, or anything outside that directory as an output (an early version of
this sweep named /dev/null, and `simulate --out /dev/null --force` replaced it: device cases use
a node made inside the case directory). `train` cases end at a refused --address port
(:data:`BACKSTOP`) so that no engine ever starts.

Usage: python benchmarks/hostile_sweep.py [--quick] [--jobs 2] [--only SUBSTR] [--list]
(the repo is $LAMINAR_REPO, else the directory above this file's when it holds .venv, else
/work/main)
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_HERE = Path(__file__).resolve().parents[1]
REPO = Path(os.environ.get("LAMINAR_REPO") or (
    _HERE if (_HERE / ".venv").is_dir() else "/work/main")).resolve()  # fmt: skip
LAMINAR = str(REPO / ".venv" / "bin" / "laminar")
PY = str(REPO / ".venv" / "bin" / "python")
ROOT = Path(os.environ.get("SWEEP_ROOT", "/tmp/hostile-sweep"))
FX = ROOT / "fx"
WORK = ROOT / "work"
TIMEOUT = 60

REFUSE, OK, EITHER = "refuse", "ok", "either"
BACKSTOP = "127.0.0.1:1"
"""`train`'s --address in cases about other inputs: a refused port, checked after every input
and before anything starts or is written, so an input that passes ends there in a second
(never a real training run); an input that should have been refused and reaches it is
nonsense accepted."""
BAD = ["traceback", "hang", "other-exit", "data-loss", "leftover", "nonsense", "unclear",
       "false-refusal"]  # fmt: skip


@dataclass
class Case:
    surface: str
    name: str
    args: list[str]
    expect: str = REFUSE
    setup: Callable[[Path], None] | None = None
    outputs: list[str] = field(default_factory=list)  # paths (relative) it may write
    words: list[str] = field(default_factory=list)  # any one must be in the message
    timeout: float = TIMEOUT
    stdin: bytes | None = None


# ---------------------------------------------------------------- fixtures


def sh(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=True, capture_output=True, **kw)


SMALL = ["--set", "cluster.gpus=16", "--set", "workload.steps=4", "--set",
         "sim.warmup_steps=1", "--set", "workload.prompts_per_step=8"]  # fmt: skip


def build_fixtures() -> None:
    if (FX / "done").exists():
        return
    shutil.rmtree(FX, ignore_errors=True)
    FX.mkdir(parents=True)
    code = (
        "import sys; sys.path.insert(0, '.');"
        "from pathlib import Path;"
        "from tests.hostile.rundirs import train_run, calibration_run;"
        f"r = Path({str(FX)!r}); train_run(r); calibration_run(r)"
    )
    sh([PY, "-c", code], cwd=REPO)
    small = sh([LAMINAR, "config", "show", "--preset", "paper-math-7b", *SMALL]).stdout
    (FX / "small.yaml").write_bytes(small)
    sh([LAMINAR, "simulate", str(FX / "small.yaml"), "--out", str(FX / "simrun")])
    sh([LAMINAR, "calibrate", str(FX / "cal"), "-o", str(FX / "cost.json")])
    shutil.copy(REPO / "traces" / "dapo-math-small.csv", FX / "trace.csv")
    (FX / "done").write_text("ok\n")


def cp(*names: str) -> Callable[[Path], None]:
    """A setup copying fixtures into the case directory."""

    def go(d: Path) -> None:
        for n in names:
            src = FX / n
            if src.is_dir():
                shutil.copytree(src, d / n, symlinks=True)
            else:
                shutil.copy(src, d / n)

    return go


def chain(*fs: Callable[[Path], None]) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        for f in fs:
            f(d)

    return go


def write(name: str, data: bytes | str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    return go


def _clear(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()


def fifo(name: str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        _clear(d / name)
        os.mkfifo(d / name)

    return go


def devnull(name: str) -> Callable[[Path], None]:
    """A character device like /dev/null, inside the case directory: an output case may
    destroy it without harming the machine (never name the real /dev/null as an output)."""

    def go(d: Path) -> None:
        if os.geteuid() == 0:
            os.mknod(d / name, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        else:
            os.mkfifo(d / name)

    return go


def link(name: str, target: str) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        if (d / name).exists() or (d / name).is_symlink():
            if (d / name).is_dir() and not (d / name).is_symlink():
                shutil.rmtree(d / name)
            else:
                (d / name).unlink()
        os.symlink(target, d / name)

    return go


def mkdir(name: str, mode: int | None = None) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        if (d / name).exists() and not (d / name).is_dir():
            _clear(d / name)
        (d / name).mkdir(parents=True, exist_ok=True)
        if mode is not None:
            os.chmod(d / name, mode)

    return go


def edit_json(name: str, fn: Callable[[dict], object]) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        data = json.loads((d / name).read_text())
        out = fn(data)
        (d / name).write_text(json.dumps(data if out is None else out, allow_nan=True))

    return go


def edit_text(name: str, fn: Callable[[str], str]) -> Callable[[Path], None]:
    def go(d: Path) -> None:
        (d / name).write_text(fn((d / name).read_text()))

    return go


def coef(name: str, value: object, file: str = "cost.json") -> Callable[[Path], None]:
    def fn(data: dict) -> None:
        if value == "<missing>":
            del data["coefficients"][name]
        else:
            data["coefficients"][name]["value"] = value

    return edit_json(file, fn)


# ---------------------------------------------------------------- cases

BIN = bytes(range(256)) * 4
LATIN = "model: {name: 'caf\xe9'}\n".encode("latin-1")
DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_YAML = "a: " + "[" * 50_000 + "]" * 50_000 + "\n"
BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


LENGTHS_BUCKET = {"answer_min": 1, "answer_max": 8, "samples": 20, "cap_frac": 0.0,
                  "ratio_q": [1.0]}  # fmt: skip


def cost_cases() -> list[Case]:
    base = ["simulate", "train/config.yaml", "--cost", "cost.json", "--out", "out"]
    setup = cp("train", "cost.json")
    out = []
    bad_values = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "neg": -1.0,
                  "str": "abc", "null": None, "missing": "<missing>", "huge": 1e308,
                  "bool": True, "list": [1]}  # fmt: skip
    for cname in ["decode_base_s", "decode_per_kv_token_s", "prefill_per_token_s",
                  "train_flop_per_s_per_gpu", "weight_bytes", "kv_capacity_tokens",
                  "replica_gpus", "machine_gpus"]:  # fmt: skip
        for vname, v in bad_values.items():
            if cname not in ("decode_base_s", "kv_capacity_tokens", "train_flop_per_s_per_gpu") \
                    and vname in ("null", "bool", "list", "-inf"):  # fmt: skip
                continue
            exp = EITHER if (cname, vname) == ("machine_gpus", "missing") else REFUSE
            out.append(Case("cost", f"{cname}={vname}", base, exp,
                            chain(setup, coef(cname, v)), ["out"] if exp == EITHER else [],
                            [cname]))  # fmt: skip
    for cname in ["train_flop_per_s_per_gpu", "kv_capacity_tokens", "replica_gpus",
                  "rdma_bytes_per_s", "decode_per_seq_s"]:  # fmt: skip
        out.append(Case("cost", f"{cname}=0", base, EITHER if cname == "decode_per_seq_s"
                        else REFUSE, chain(setup, coef(cname, 0)), ["out"], [cname]))  # fmt: skip
    out.append(Case("cost", "kv_capacity=0.5", base, REFUSE,
                    chain(setup, coef("kv_capacity_tokens", 0.5)), words=["kv_capacity"]))
    out.append(Case("cost", "tiny-values", base, EITHER,
                    chain(setup, coef("decode_base_s", 1e-300)), ["out"], ["decode_base_s"]))
    whole = {
        "empty": write("cost.json", b""), "list": write("cost.json", "[]"),
        "obj": write("cost.json", "{}"), "binary": write("cost.json", BIN),
        "latin1": write("cost.json", '{"label": "caf\xe9"}'.encode("latin-1")),
        "deep": write("cost.json", DEEP_JSON), "NaN-literal": write("cost.json", "NaN"),
        "big-int": write("cost.json", '{"coefficients": ' + "9" * 5000 + "}"),
        "dir": mkdir("cost.json"), "fifo": fifo("cost.json"),
        "link-loop": link("cost.json", "cost.json"),
        "no-coefs": write("cost.json", '{"label": "x"}'),
        "coefs-list": write("cost.json", '{"coefficients": [1,2]}'),
        "value-obj": edit_json("cost.json", lambda d: d["coefficients"].update(
            decode_base_s={"value": {"value": 1}})),
        "unknown-key": edit_json("cost.json", lambda d: d["coefficients"].update(
            bogus_s={"value": 1.0, "unit": "s", "source": "x"})),
        "tasks-text": edit_json("cost.json", lambda d: d.update(policy_lengths={
            "runs": 1, "tasks": "x", "buckets": [LENGTHS_BUCKET]})),
        "tasks-nan": edit_json("cost.json", lambda d: d.update(policy_lengths={
            "runs": 1, "buckets": [LENGTHS_BUCKET], "tasks": [
                {"median_len": float("nan"), "tail_ratio": 10, "max_response_len": 128}]})),
    }  # fmt: skip
    for name, s in whole.items():
        out.append(Case("cost", f"file-{name}", base, REFUSE, chain(setup, s),
                        words=["cost.json", "cost file"]))  # fmt: skip
    out.append(Case("cost", "big-file", base, REFUSE,
                    chain(setup, write("cost.json", b" " * (40 << 20))), words=["cost.json"]))
    out.append(Case("cost", "dev-zero", [*base[:3], "/dev/zero", *base[4:]], REFUSE, setup,
                    words=["/dev/zero"]))  # fmt: skip
    out.append(Case("cost", "nonexistent", [*base[:3], "nope.json", *base[4:]], REFUSE, setup,
                    words=["nope.json"]))  # fmt: skip
    out.append(Case("cost", "symlink-ok", [*base[:3], "l.json", *base[4:]], OK,
                    chain(setup, link("l.json", "cost.json")), ["out"]))  # fmt: skip
    out.append(Case("cost", "sim-cost-model-json", ["simulate", "small.yaml", "--cost",
                    "simrun/cost_model.json", "--out", "out"], OK, cp("small.yaml", "simrun"),
                    ["out"]))  # fmt: skip
    out.append(Case("cost", "calibrated-on-default-1024", ["simulate", "--cost", "cost.json",
                    "--out", "out"], REFUSE, cp("cost.json"), words=["cost"]))  # fmt: skip
    out.append(Case("cost", "sim-cost-nan-in-system", ["simulate", "small.yaml", "--cost",
                    "simrun/cost_model.json", "--out", "out"], REFUSE,
                    chain(cp("small.yaml", "simrun"), edit_json("simrun/cost_model.json",
                          lambda d: d["laminar"]["coefficients"]["decode_base_s"].update(
                              value=float("nan")))), words=["decode_base_s"]))  # fmt: skip
    out.append(Case("cost", "cost-for-other-system", ["simulate", "small.yaml", "--cost",
                    "c.json", "--systems", "verl", "--out", "out"], EITHER,
                    chain(cp("small.yaml", "simrun"), lambda d: shutil.copy(
                        d / "simrun/cost_model.json", d / "c.json")), ["out"],
                    ["verl", "c.json"]))  # fmt: skip
    out.append(Case("cost", "calibrate-then-replay", ["replay", "trace.csv", "--config",
                    "train/config.yaml", "--out", "out"], EITHER, cp("train", "trace.csv"),
                    ["out"], ["trace", "config"]))  # fmt: skip
    return out


def config_cases() -> list[Case]:
    out: list[Case] = []
    y = "config.yaml"
    show = ["config", "show", y]
    sim = ["simulate", y, *SMALL, "--out", "out"]
    cfgs = {
        "yes-count": ("cluster: {gpus: yes}\n", ["cluster.gpus"]),
        "on-bool-count": ("workload: {steps: on}\n", ["workload.steps"]),
        "string-count": ("cluster: {gpus: '64'}\n", ["cluster.gpus"]),  # lax: either
        "float-count": ("cluster: {gpus: 64.5}\n", ["cluster.gpus"]),
        "nan": ("sim: {gpu_memory_utilization: .nan}\n", ["gpu_memory_utilization"]),
        "inf": ("sim: {max_sim_time_s: .inf}\n", ["max_sim_time_s"]),
        "neg-gpus": ("cluster: {gpus: -8}\n", ["cluster.gpus"]),
        "zero-gpus": ("cluster: {gpus: 0}\n", ["cluster.gpus"]),
        "huge-gpus": ("cluster: {gpus: 100000000000000000000}\n", ["cluster.gpus"]),
        "5000-digit": ("cluster: {gpus: " + "9" * 5000 + "}\n", ["gpus", "digits"]),
        "unknown-key": ("cluster: {gpuz: 8}\n", ["gpuz"]),
        "unknown-section": ("clusterz: {gpus: 8}\n", ["clusterz"]),
        "top-list": ("- 1\n- 2\n", ["config"]),
        "top-scalar": ("42\n", ["config"]),
        "section-scalar": ("cluster: 8\n", ["cluster"]),
        "dup-key": ("cluster: {gpus: 8}\ncluster: {gpus: 16}\n", ["cluster", "duplicate"]),
        "python-tag": ("cluster: !!python/object/apply:os.system ['true']\n", ["cluster", "tag"]),
        "billion-laughs": (BOMB, ["config", "alias"]),
        "deep-yaml": (DEEP_YAML, ["config", "deep", "nest"]),
        "tab-indent": ("cluster:\n\tgpus: 8\n", ["config"]),
        "bad-hw-name": ("cluster: {hardware: h9000}\n", ["h9000", "hardware"]),
        "hw-spec-5000pct": ("cluster: {hardware_spec: {hbm_bytes_per_s: 1.675e14}}\n",
                            ["hbm"]),
        "hw-spec-neg": ("cluster: {hardware_spec: {hbm_bytes_per_s: -1}}\n", ["hbm"]),
        "hw-spec-str": ("cluster: {hardware_spec: {hbm_bytes_per_s: fast}}\n", ["hbm"]),
        "hw-spec-unknown": ("cluster: {hardware_spec: {warp_drive: 1}}\n", ["warp_drive"]),
        "hw-spec-list": ("cluster: {hardware_spec: [1, 2]}\n", ["hardware_spec"]),
        "model-unknown": ("model: {name: gpt-17}\n", ["gpt-17", "model"]),
        "systems-unknown": ("sim: {systems: [laminar, bogus]}\n", ["bogus"]),
        "systems-empty": ("sim: {systems: []}\n", ["systems"]),
        "tp-3": ("model: {rollout_tp: 3}\n", ["rollout_tp"]),
        "tp-16-over-machine": ("model: {rollout_tp: 16}\n", ["rollout_tp"]),
        "trainer-frac-1": ("cluster: {trainer_fraction: 1.0}\n", ["trainer_fraction"]),
        "trainer-frac-0": ("cluster: {trainer_fraction: 0.0}\n", ["trainer_fraction"]),
        "max-resp-0": ("workload: {max_response_len: 0}\n", ["max_response_len"]),
        "gpm-3": ("cluster: {gpus: 16, gpus_per_machine: 3}\n", ["gpus_per_machine"]),
        "gpus-not-multiple": ("cluster: {gpus: 17}\n", ["gpus"]),
        "source-bad-type": ("workload: {source: {type: telepathy}}\n", ["source", "telepathy"]),
        "source-trace-missing": ("workload: {source: {type: trace, path: nope.csv}}\n",
                                 ["nope.csv"]),
        "source-trace-fifo": ("workload: {source: {type: trace, path: f.csv}}\n", ["f.csv"]),
        "source-trace-devzero": ("workload: {source: {type: trace, path: /dev/zero}}\n",
                                 ["/dev/zero"]),
        "synth-param-nan": ("workload: {source: {params: {response_median_tokens: .nan}}}\n",
                            ["response_median_tokens"]),
        "synth-param-neg": ("workload: {source: {params: {response_median_tokens: -5}}}\n",
                            ["response_median_tokens"]),
        "synth-param-unknown": ("workload: {source: {params: {bogus: 1}}}\n", ["bogus"]),
        "fault-inf": ("faults: {events: [{at_s: .inf, kind: rollout}]}\n", ["faults"]),
        "resp-mean-gt-max": ("workload: {response_len_mean: 99999999}\n",
                             ["response_len_mean"]),
        "cost-file-fifo": ("sim: {cost_file: f.csv}\n", ["f.csv"]),
        "hf-config-missing": ("model: {hf_config: nope/config.json}\n", ["nope"]),
        "hf-config-devzero": ("model: {hf_config: /dev/zero}\n", ["/dev/zero"]),
    }  # fmt: skip
    # names and files a config refers to are resolved by the commands that use them
    resolve = {"bad-hw-name", "model-unknown", "tp-3", "tp-16-over-machine", "systems-unknown",
               "source-trace-missing", "source-trace-fifo", "source-trace-devzero",
               "synth-param-neg", "synth-param-unknown", "cost-file-fifo", "hf-config-missing",
               "hf-config-devzero", "synth-param-nan"}  # fmt: skip
    for name, (text, words) in cfgs.items():
        setup = write(y, text)
        if "fifo" in name:
            setup = chain(setup, fifo("f.csv"))
        exp = EITHER if name == "string-count" else REFUSE
        out.append(Case("config", name, sim if name in resolve else show, exp, setup,
                        words=words, timeout=30))  # fmt: skip
    whole = {
        "empty-file": (write(y, b""), EITHER),
        "binary": (write(y, BIN), REFUSE),
        "latin-1": (write(y, LATIN), REFUSE),
        "dir": (mkdir(y), REFUSE),
        "fifo": (fifo(y), REFUSE),
        "big": (write(y, b"# x\n" * (10 << 20)), REFUSE),
        "link-loop": (link(y, y), REFUSE),
        "utf8-bom": (write(y, "\ufeffcluster: {gpus: 16}\n"), EITHER),
    }
    for name, (setup, exp) in whole.items():
        out.append(Case("config", f"file-{name}", show, exp, setup, words=[y], timeout=30))
    out.append(Case("config", "dev-zero", ["config", "show", "/dev/zero"], REFUSE,
                    words=["/dev/zero"]))  # fmt: skip
    out.append(Case("config", "txt-ext", ["config", "show", "c.txt"], REFUSE,
                    write("c.txt", "cluster: {gpus: 16}\n"), words=["c.txt"]))  # fmt: skip
    out.append(Case("config", "toml-huge-int", ["config", "show", "c.toml"], REFUSE,
                    write("c.toml", "[cluster]\ngpus = " + "9" * 5000 + "\n"),
                    words=["c.toml", "gpus"]))  # fmt: skip
    out.append(Case("config", "toml-nan", ["config", "show", "c.toml"], REFUSE,
                    write("c.toml", "[sim]\ngpu_memory_utilization = nan\n"),
                    words=["gpu_memory_utilization"]))  # fmt: skip
    out.append(Case("config", "toml-bad", ["config", "show", "c.toml"], REFUSE,
                    write("c.toml", "[cluster\ngpus = 1\n"), words=["c.toml"]))  # fmt: skip
    out.append(Case("config", "unicode-path-ok", ["config", "show", "конфиг ✓.yaml"], OK,
                    write("конфиг ✓.yaml", "cluster: {gpus: 16}\n")))  # fmt: skip
    out.append(Case("config", "newline-path", ["config", "show", "a\nb.yaml"], EITHER,
                    write("a\nb.yaml", "cluster: {gpus: 16}\n")))  # fmt: skip
    out.append(Case("config", "long-path", ["config", "show", "x" * 300 + ".yaml"], REFUSE,
                    words=["x" * 20]))  # fmt: skip
    out.append(Case("config", "unreadable", ["config", "show", y], REFUSE,
                    chain(write(y, "cluster: {gpus: 16}\n"), lambda d: os.chmod(d / y, 0)),
                    words=[y]) if os.geteuid() != 0 else None)  # fmt: skip
    out.append(Case("config", "config-fit-ok", ["config", "fit", "small.yaml"], EITHER,
                    cp("small.yaml")))  # fmt: skip
    out.append(Case("config", "seed-neg", ["config", "show", "--seed", "-1"], REFUSE,
                    words=["seed"]))  # fmt: skip
    out.append(Case("config", "seed-huge", ["config", "show", "--seed", "99999999999999"],
                    REFUSE, words=["seed"]))  # fmt: skip
    out.append(Case("config", "preset-unknown", ["config", "show", "--preset", "../etc"],
                    REFUSE, words=["preset"]))  # fmt: skip
    out.append(Case("config", "set-no-eq", ["config", "show", "--set", "cluster.gpus"],
                    REFUSE, words=["cluster.gpus", "KEY=VALUE"]))  # fmt: skip
    out.append(Case("config", "set-unknown", ["config", "show", "--set", "cluster.gpuz=1"],
                    REFUSE, words=["gpuz"]))  # fmt: skip
    out.append(Case("config", "set-section", ["config", "show", "--set", "cluster=1"],
                    REFUSE, words=["cluster"]))  # fmt: skip
    out.append(Case("config", "set-yaml-flow", ["config", "show", "--set",
                    "cluster.gpus={a: 1}"], REFUSE, words=["cluster.gpus"]))  # fmt: skip
    # hf_config config.json
    hf = {
        "nan-dim": '{"hidden_size": NaN}', "inf-dim": '{"hidden_size": Infinity}',
        "huge-layers": '{"num_hidden_layers": 1000000000000}',
        "neg-heads": '{"num_attention_heads": -4}', "str-dim": '{"hidden_size": "4096"}',
        "zero-heads": '{"num_attention_heads": 0}', "list": "[1, 2]", "empty": "",
        "deep": DEEP_JSON, "big-int": '{"hidden_size": ' + "9" * 5000 + "}",
        "experts-huge": '{"num_local_experts": 1000000000000, "num_experts_per_tok": 2}',
        "heads-not-divisor": '{"hidden_size": 4096, "num_attention_heads": 7}',
    }  # fmt: skip
    base_hf = json.loads(((REPO / "laminar" / "specs").exists() and "{}") or "{}")
    del base_hf
    for name, text in hf.items():
        def mk(d: Path, text=text, name=name) -> None:
            good = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8,
                    "num_key_value_heads": 8, "intermediate_size": 4096,
                    "vocab_size": 32000, "model_type": "llama"}  # fmt: skip
            try:
                extra = json.loads(text, parse_constant=lambda c: float(c))
                if isinstance(extra, dict):
                    good.update(extra)
                    body = json.dumps(good, allow_nan=True)
                    if "big-int" in name:
                        body = text
                else:
                    body = text
            except (ValueError, RecursionError):
                body = text
            (d / "m").mkdir()
            (d / "m" / "config.json").write_text(body)
            (d / y).write_text("model: {name: custom, hf_config: m/config.json}\n")

        out.append(Case("hf_config", name, sim, REFUSE, mk, words=["config.json"],
                        timeout=30))  # fmt: skip
    out.append(Case("hf_config", "latin-1", sim, REFUSE, chain(
        write("m/config.json", '{"model_type": "caf\xe9"}'.encode("latin-1")),
        write(y, "model: {name: custom, hf_config: m/config.json}\n")),
        words=["config.json"]))  # fmt: skip
    out.append(Case("hf_config", "dir", sim, REFUSE, chain(
        mkdir("m/config.json"), write(y, "model: {name: custom, hf_config: m/config.json}\n")),
        words=["config.json"]))  # fmt: skip
    out.append(Case("hf_config", "fifo", sim, REFUSE, chain(
        fifo("m/config.json"), write(y, "model: {name: custom, hf_config: m/config.json}\n")),
        words=["config.json"]))  # fmt: skip
    out.append(Case("hf_config", "set-devzero", ["simulate", *SMALL, "--set",
                    "model.hf_config=/dev/zero", "--out", "out"], REFUSE,
                    words=["/dev/zero"]))  # fmt: skip
    return [c for c in out if c is not None]


def set_cases(quick: bool) -> list[Case]:
    """-1 / 0 / 1e300 / a 30-digit integer for every numeric field `config show` prints, and a
    word that is no truth value for every boolean one."""
    import yaml

    text = subprocess.run([LAMINAR, "config", "show", "--preset", "tiny-cpu"],
                          capture_output=True, check=True).stdout  # fmt: skip
    tree = yaml.safe_load(text)
    fields: list[tuple[str, object]] = []
    flags: list[str] = []

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(node, bool):
            flags.append(prefix)
        elif isinstance(node, int | float):
            fields.append((prefix, node))

    walk("", tree)
    # -1 means "off" for these; a negative nice is a request the OS may grant
    neg_ok = {"runtime.kill_rollout_at_step", "runtime.kill_trainer_at_step",
              "runtime.rollout_nice"}  # fmt: skip
    zero_bad = {"cluster.gpus", "cluster.gpus_per_machine", "workload.prompts_per_step",
                "workload.samples_per_prompt", "workload.max_prompt_len",
                "workload.max_response_len", "workload.steps", "sim.max_batch",
                "model.rollout_tp", "model.rollout_ep", "sim.gpu_memory_utilization",
                "relay.link_bytes_per_s", "relay.heartbeat_s", "relay.dead_after_beats",
                "relay.keep_versions", "sim.max_sim_time_s", "runtime.rollouts",
                "runtime.max_batch", "runtime.kv_cache_gib", "runtime.gpu_memory_fraction",
                "runtime.gpu_share", "runtime.trainer_threads", "runtime.step_timeout_s",
                "runtime.model.layers", "runtime.model.hidden", "runtime.task.median_len",
                "runtime.trainer_ranks", "runtime.warmup.batch",
                "runtime.grpo.micro_batch_tokens", "runtime.grpo.temperature",
                "runtime.flush_interval_s", "runtime.faults.poll_s",
                "runtime.faults.health_timeout_s",
                "cluster.trainer_fraction", "runtime.grpo.lr",
                "runtime.eval_samples"}  # fmt: skip
    huge_ok = {"sim.max_sim_time_s", "runtime.step_timeout_s"}
    out = [Case("--set", f"{key}=maybe", ["config", "show", "--set", f"{key}=maybe"], REFUSE,
                words=[key]) for key in flags]  # fmt: skip
    for key, _ in fields:
        if key == "seed":
            continue
        out.append(Case("--set", f"{key}=-1", ["config", "show", "--set", f"{key}=-1"],
                        EITHER if key in neg_ok else REFUSE, words=[key]))  # fmt: skip
        if key in zero_bad or not quick:
            out.append(Case("--set", f"{key}=0", ["config", "show", "--set", f"{key}=0"],
                            REFUSE if key in zero_bad else EITHER, words=[key]))  # fmt: skip
        out.append(Case("--set", f"{key}=1e300", ["config", "show", "--set", f"{key}=1e300"],
                        EITHER if key in huge_ok else REFUSE, words=[key]))  # fmt: skip
        if not isinstance(_, int) or quick:
            continue
        big = "1" + "0" * 30
        out.append(Case("--set", f"{key}=1e30int", ["config", "show", "--set", f"{key}={big}"],
                        EITHER if key in huge_ok else REFUSE, words=[key]))  # fmt: skip
    return out


def output_cases() -> list[Case]:
    out = []
    sim = ["simulate", "small.yaml"]
    s = cp("small.yaml", "simrun", "train", "cal", "cost.json")
    col = {
        "sim-over-train": ([*sim, "--out", "train"], REFUSE, ["train"]),
        "sim-over-train-force": ([*sim, "--out", "train", "--force"], REFUSE, ["train"]),
        "sim-over-train-file": ([*sim, "--out", "train/config.yaml", "--force"], REFUSE,
                                ["train"]),
        "sim-into-train-sub": ([*sim, "--out", "train/checkpoints"], REFUSE, ["train"]),
        "sim-into-train-sub-force": ([*sim, "--out", "train/profile", "--force"], REFUSE,
                                     ["train"]),
        "sim-over-cal": ([*sim, "--out", "cal"], REFUSE, ["cal"]),
        "sim-over-config": ([*sim, "--out", "small.yaml", "--force"], REFUSE, ["small.yaml"]),
        "sim-over-own-dir": ([*sim, "--out", "."], REFUSE, ["."]),
        "sim-over-cost-input": ([*sim, "--cost", "simrun/cost_model.json", "--out", "simrun"],
                                REFUSE, ["simrun"]),
        "sim-over-file": ([*sim, "--out", "cost.json"], REFUSE, ["cost.json"]),
        "sim-out-through-file": ([*sim, "--out", "cost.json/sub"], REFUSE, ["cost.json"]),
        "sim-out-devnull": ([*sim, "--out", "devnull", "--force"], REFUSE, ["devnull"]),
        "sim-out-fifo": ([*sim, "--out", "fifo", "--force"], REFUSE, ["fifo"]),
        "sim-out-longname": ([*sim, "--out", "x" * 300], REFUSE, ["x" * 20]),
        "plot-over-train": (["plot", "train", "--out", "train", "--force"], REFUSE, ["train"]),
        "plot-over-sim": (["plot", "simrun", "--out", "simrun"], REFUSE, ["simrun"]),
        "plot-over-parent": (["plot", "train", "--out", ".", "--force"], REFUSE, ["."]),
        "plot-over-file-of-run": (["plot", "simrun", "--out", "simrun/steps.csv", "--force"],
                                  REFUSE, ["simrun"]),
        "plot-over-other-run": (["plot", "simrun", "--out", "train", "--force"], REFUSE,
                                ["train"]),
        "calib-over-config": (["calibrate", "cal", "-o", "cal/config.yaml"], REFUSE, ["cal"]),
        "calib-over-run": (["calibrate", "cal", "-o", "cal"], REFUSE, ["cal"]),
        "calib-over-train-cfg": (["calibrate", "cal", "-o", "train/config.yaml"], REFUSE,
                                 ["train"]),
        "calib-over-sim-cost": (["calibrate", "cal", "-o", "simrun/cost_model.json"], REFUSE,
                                ["simrun"]),
        "calib-over-small": (["calibrate", "cal", "-o", "small.yaml"], REFUSE, ["small.yaml"]),
        "calib-out-dir": (["calibrate", "cal", "-o", "newdir/"], EITHER, ["newdir"]),
        "calib-out-devnull": (["calibrate", "cal", "-o", "devnull"], REFUSE, ["devnull"]),
        "synth-out-fifo": (["trace", "synth", "dapo-math", "--steps", "1", "-o", "fifo"],
                           REFUSE, ["fifo"]),
        "plot-out-devnull": (["plot", "simrun", "--out", "devnull", "--force"], REFUSE,
                             ["devnull"]),
        "calib-speed-of-garbage": (["calibrate", "cal", "-o", "c2.json", "--at-speed-of",
                                    "small.yaml"], REFUSE, ["small.yaml"]),
        "calib-speed-of-self-out": (["calibrate", "cal", "-o", "train/profile/speed_probe.csv",
                                     "--at-speed-of", "train"], REFUSE, ["train"]),
        "replay-over-trace": (["replay", "trace.csv", "--config", "small.yaml", "--out",
                               "trace.csv", "--force"], REFUSE, ["trace.csv"]),
        "replay-over-dir-of-trace": (["replay", "tdir/t.csv", "--config", "small.yaml",
                                      "--out", "tdir", "--force"], REFUSE, ["tdir"]),
        "trace-plot-over-trace": (["trace", "show", "trace.csv", "--plot", "trace.csv"],
                                  REFUSE, ["trace.csv"]),
        "trace-plot-over-config": (["trace", "show", "trace.csv", "--plot", "small.yaml"],
                                   REFUSE, ["small.yaml"]),
        "trace-plot-into-train": (["trace", "show", "trace.csv", "--plot",
                                   "train/summary.json"], REFUSE, ["train"]),
        "synth-over-trace": (["trace", "synth", "dapo-math", "--steps", "1",
                              "--prompts-per-step", "2", "--samples-per-prompt", "2", "-o",
                              "trace.csv"], EITHER, ["trace.csv"]),
        "synth-over-config": (["trace", "synth", "dapo-math", "--steps", "1", "-o",
                               "small.yaml"], REFUSE, ["small.yaml"]),
        "synth-into-train": (["trace", "synth", "dapo-math", "--steps", "1", "-o",
                              "train/steps.csv"], REFUSE, ["train"]),
        "plan-over-config": (["plan", "small.yaml", "--out", "small.yaml", "--force",
                              "--no-cache"], REFUSE, ["small.yaml"]),
        "plan-over-train": (["plan", "small.yaml", "--out", "train", "--force", "--no-cache"],
                            REFUSE, ["train"]),
        "plan-over-sim": (["plan", "small.yaml", "--out", "simrun", "--no-cache"], REFUSE,
                          ["simrun"]),
        "plan-cache-is-input": (["plan", "small.yaml", "--cache-dir", "train", "--gpus", "16",
                                 "--systems", "laminar", "--tp", "1", "--max-batch", "64",
                                 "--trainer-fractions", "0.25", "--repack", "on", "--out",
                                 "p"], REFUSE, ["train"]),
        "train-over-sim": (["train", "--out", "simrun", "--address", "bogus"], REFUSE,
                           ["simrun", "bogus"]),
        "train-over-cal-force-bad-addr": (["train", "--out", "cal", "--force", "--address",
                                           "bogus"], REFUSE, ["bogus", "cal"]),
        "train-over-train-bad-addr": (["train", "--out", "train", "--address", "bogus"],
                                      REFUSE, ["bogus"]),
        "train-over-config": (["train", "small.yaml", "--out", "small.yaml", "--force"],
                              REFUSE, ["small.yaml"]),
    }  # fmt: skip
    for name, (args, exp, words) in col.items():
        setup = chain(s, devnull("devnull"), fifo("fifo"))
        if "tdir" in " ".join(args):
            setup = chain(s, mkdir("tdir"), lambda d: shutil.copy(FX / "trace.csv",
                                                                  d / "tdir/t.csv"))
        if "trace.csv" in " ".join(args):
            setup = chain(setup, cp("trace.csv"))
        outs = ["newdir"] if name == "calib-out-dir" else (
            ["trace.csv"] if name == "synth-over-trace" else [])  # fmt: skip
        out.append(Case("outputs", name, args, exp, setup, outs, words, timeout=45))
    # read-only output places
    out.append(Case("outputs", "sim-out-readonly-parent", [*sim, "--out", "ro/run"], REFUSE,
                    chain(cp("small.yaml"), mkdir("ro", 0o555)), words=["ro"]) if
               os.geteuid() != 0 else None)  # fmt: skip
    out.append(Case("outputs", "sim-out-symlink-to-train", [*sim, "--out", "l"], REFUSE,
                    chain(s, link("l", "train")), words=["l", "train"]))  # fmt: skip
    out.append(Case("outputs", "sim-out-dangling-symlink", [*sim, "--out", "l"], EITHER,
                    chain(s, link("l", "nowhere")), ["l", "nowhere"], words=["l"]))
    out.append(Case("outputs", "sim-out-unicode-ok", [*sim, "--out", "rün ✓"], OK,
                    cp("small.yaml"), ["rün ✓"]))  # fmt: skip
    out.append(Case("outputs", "sim-replace-own-previous", [*sim, "--out", "simrun"], OK,
                    s, ["simrun"]))  # fmt: skip
    out.append(Case("outputs", "plot-default-ok", ["plot", "simrun"], OK, s,
                    ["simrun/plots"]))  # fmt: skip
    return [c for c in out if c is not None]


def run_file_cases() -> list[Case]:
    """Damaged run directories for plot / calibrate / train --resume."""
    out = []
    damage = {
        "empty": lambda p: p.write_bytes(b""),
        "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2 + 3]),
        "binary": lambda p: p.write_bytes(BIN),
        "foreign": lambda p: p.write_text("a,b,c\n1,2,3\n" if p.suffix == ".csv" else
                                          '{"hello": "world"}'),
        "header-only": lambda p: p.write_text(p.read_text().splitlines()[0] + "\n")
        if p.suffix == ".csv" else p.write_text("{}"),
        "nan-cells": lambda p: p.write_text(_nan_cells(p.read_text()))
        if p.suffix == ".csv" else p.write_text(p.read_text().replace("1", "NaN", 3)),
        "neg-cells": lambda p: p.write_text(_neg_cells(p.read_text()))
        if p.suffix == ".csv" else None,
        "fifo": lambda p: (p.unlink(), os.mkfifo(p)),
        "dir": lambda p: (p.unlink(), p.mkdir()),
        "gone": lambda p: p.unlink(),
        "dev-zero-link": lambda p: (p.unlink(), os.symlink("/dev/zero", p)),
    }  # fmt: skip

    def spoil(rel: str, how: str) -> Callable[[Path], None]:
        def go(d: Path) -> None:
            r = damage[how](d / rel)
            del r

        return go

    targets = [
        ("plot", "simrun", "steps.csv", ["plot", "simrun", "--out", "pl"]),
        ("plot", "simrun", "summary.csv", ["plot", "simrun", "--out", "pl"]),
        ("plot", "simrun", "trajectories.parquet", ["plot", "simrun", "--out", "pl"]),
        ("plot", "simrun", "config.yaml", ["plot", "simrun", "--out", "pl"]),
        ("plot", "train", "steps.csv", ["plot", "train", "--out", "pl"]),
        ("plot", "train", "summary.json", ["plot", "train", "--out", "pl"]),
        ("plot", "train", "kv.csv", ["plot", "train", "--out", "pl"]),
        ("calibrate", "cal", "profile/engine_steps.csv", ["calibrate", "cal", "-o", "c.json"]),
        ("calibrate", "cal", "profile/trainer_steps.csv", ["calibrate", "cal", "-o",
                                                           "c.json"]),
        ("calibrate", "cal", "profile/machine.json", ["calibrate", "cal", "-o", "c.json"]),
        ("calibrate", "cal", "config.yaml", ["calibrate", "cal", "-o", "c.json"]),
        ("calibrate", "cal", "profile/weight_loads.csv", ["calibrate", "cal", "-o", "c.json"]),
        ("calibrate", "cal", "profile/core_cpu.csv", ["calibrate", "cal", "-o", "c.json"]),
        ("resume", "train", "checkpoints/step-000002/meta.json",
         ["train", "--resume", "train", "--address", BACKSTOP]),
        ("resume", "train", "checkpoints/step-000002/pools.json",
         ["train", "--resume", "train", "--address", BACKSTOP]),
        ("resume", "train", "checkpoints/LATEST", ["train", "--resume", "train", "--address",
                                                   BACKSTOP]),
        ("resume", "train", "config.yaml", ["train", "--resume", "train", "--address",
                                            BACKSTOP]),
        ("resume", "train", ".laminar-run.json", ["train", "--resume", "train", "--address",
                                                  BACKSTOP]),
    ]  # fmt: skip
    for surface, run, rel, args in targets:
        for how in damage:
            if _skip_damage(surface, rel, how):
                continue
            exp = _damage_expect(surface, run, rel, how)
            out.append(Case(surface, f"{rel}:{how}", args, exp, chain(cp(run), spoil(
                f"{run}/{rel}", how)), ["pl", "c.json"] if exp == EITHER else [],
                words=[rel.split("/")[-1], run], timeout=45))
    # whole-directory oddities
    for cmd, extra in [("plot", ["--out", "pl"]), ("calibrate", ["-o", "c.json"]),
                       ("resume", [])]:  # fmt: skip
        def args(x: str, cmd=cmd, extra=extra) -> list[str]:
            return ["train", "--resume", x, "--address", BACKSTOP] if cmd == "resume" else \
                [cmd, x, *extra]  # fmt: skip

        odd = {
            "nonexistent": ("nope", None), "empty-dir": ("e", mkdir("e")),
            "a-file": ("f", write("f", "x")), "fifo": ("f", fifo("f")),
            "dev-null": ("devnull", devnull("devnull")), "sim-run": ("simrun", cp("simrun")),
            "cal-run": ("cal", cp("cal")) if cmd != "calibrate" else ("train", cp("train")),
            "symlink-loop": ("l", link("l", "l")),
        }  # fmt: skip
        for name, (x, setup) in odd.items():
            exp = REFUSE
            if cmd == "calibrate" and name == "cal-run":
                exp = EITHER  # a train run has a profile: fitting it is fine
            if cmd == "plot" and name == "cal-run":
                exp = EITHER
            if cmd == "plot" and name == "sim-run":
                exp = OK
            out.append(Case(cmd if cmd != "resume" else "resume", f"dir-{name}", args(x), exp,
                            setup, ["pl", "c.json"] if exp != REFUSE else [],
                            words=[x], timeout=45))  # fmt: skip
    out.append(Case("plot", "same-run-twice", ["plot", "simrun", "simrun", "--out", "pl"],
                    EITHER, cp("simrun"), ["pl"], ["simrun"]))  # fmt: skip
    out.append(Case("plot", "no-out-several", ["plot", "simrun", "train"], REFUSE,
                    cp("simrun", "train"), words=["--out", "separately"]))  # fmt: skip
    out.append(Case("calibrate", "same-run-twice", ["calibrate", "cal", "cal", "-o", "c.json"],
                    EITHER, cp("cal"), ["c.json"], ["cal"]))  # fmt: skip
    out.append(Case("calibrate", "speed-of-nonexistent", ["calibrate", "cal", "-o", "c.json",
                    "--at-speed-of", "nope"], REFUSE, cp("cal"), words=["nope"]))
    out.append(Case("calibrate", "speed-probe-nan", ["calibrate", "cal", "-o", "c.json",
                    "--at-speed-of", "train"], REFUSE, chain(cp("cal", "train"), edit_text(
                        "train/profile/speed_probe.csv", _nan_cells)),
                    words=["speed_probe", "train/profile"]))  # fmt: skip
    return out


def _skip_damage(surface: str, rel: str, how: str) -> bool:
    table = rel.endswith(".csv") or rel.endswith(".json")
    if how in ("neg-cells", "header-only", "nan-cells") and not table:
        return True
    if how == "neg-cells" and not rel.endswith(".csv"):
        return True
    if surface == "resume" and how in ("dev-zero-link", "neg-cells"):
        return True
    return how in ("fifo", "dir", "dev-zero-link", "gone") and surface == "plot" and rel in (
        "kv.csv", "trajectories.parquet")


def _damage_expect(surface: str, run: str, rel: str, how: str) -> str:
    if surface == "plot" and rel == "kv.csv" and how in ("empty", "header-only"):
        return EITHER
    if surface == "plot" and rel == "config.yaml" and run == "simrun":
        return EITHER  # plotting a simulation does not read its config
    if surface == "plot" and rel == "summary.json" and how in ("foreign", "header-only"):
        return EITHER  # its fields are optional (older runs): an object is enough
    if surface == "resume" and rel == ".laminar-run.json" and how not in ("dir", "fifo"):
        return EITHER  # --resume reads config.yaml and checkpoints; it rewrites the marker
    if surface == "calibrate" and rel == "config.yaml" and how == "empty":
        return EITHER  # the profile and machine.json say what was measured
    if surface == "calibrate" and rel.endswith("core_cpu.csv") and how in ("empty", "gone",
                                                                           "header-only"):
        return EITHER  # optional: runs recorded before it, or with no probe, have no rows
    return REFUSE


def _nan_cells(text: str) -> str:
    lines = text.splitlines()
    if len(lines) > 1:
        lines[1] = ",".join("nan" for _ in lines[1].split(","))
    return "\n".join(lines) + "\n"


def _neg_cells(text: str) -> str:
    lines = text.splitlines()
    for i in range(1, len(lines)):
        lines[i] = ",".join(("-" + f) if f[:1].isdigit() else f for f in lines[i].split(","))
    return "\n".join(lines) + "\n"


def trace_cases() -> list[Case]:
    out = []
    hdr = "step,prompt_id,sample_index,prompt_len,response_len,finish_reason\n"
    good_rows = "".join(f"0,{p},{s},100,{50 + 7 * s},stop\n" for p in range(4) for s in range(4))
    traces = {
        "empty": b"",
        "header-only": hdr,
        "binary": BIN,
        "neg-resp": hdr + good_rows + "0,9,0,100,-5,stop\n",
        "nan-resp": hdr + good_rows + "0,9,0,100,nan,stop\n",
        "inf-prompt": hdr + good_rows + "0,9,0,inf,50,stop\n",
        "huge-resp": hdr + good_rows + "0,9,0,100,1000000000000,stop\n",
        "text-resp": hdr + good_rows + "0,9,0,100,lots,stop\n",
        "zero-resp": hdr + "".join(f"0,{p},{s},100,0,stop\n" for p in range(4) for s in range(4)),
        "float-resp": hdr + good_rows + "0,9,0,100,50.5,stop\n",
        "missing-col": "step,prompt_id,prompt_len\n0,0,10\n",
        "foreign": "a,b,c\n1,2,3\n",
        "ragged": hdr + good_rows + "0,9,0,100\n",
        "extra-field": hdr + good_rows + "0,9,0,100,50,stop,zzz\n",
        "neg-step": hdr + good_rows + "-3,9,0,100,50,stop\n",
        "huge-step": hdr + good_rows + "99999999999,9,0,100,50,stop\n",
        "bad-finish": hdr + good_rows + "0,9,0,100,50,exploded\n",
        "dup-header": hdr + good_rows + hdr,
        "latin-1": (hdr + good_rows + "0,caf\xe9,0,100,50,stop\n").encode("latin-1"),
        "one-row": hdr + "0,0,0,100,50,stop\n",
        "big-int": hdr + good_rows + "0,9,0,100," + "9" * 5000 + ",stop\n",
        "nul-bytes": (hdr + good_rows).encode() + b"\x00" * 100,
    }  # fmt: skip
    for name, body in traces.items():
        setup = write("t.csv", body)
        exp = EITHER if name in ("float-resp", "one-row", "latin-1", "extra-field",
                                 "zero-resp") else REFUSE  # fmt: skip
        w = ["t.csv"]
        out.append(Case("trace show", name, ["trace", "show", "t.csv"], exp, setup, words=w))
        out.append(Case("trace fit", name, ["trace", "fit", "t.csv"], exp, setup, words=w))
        out.append(Case("replay", name, ["replay", "t.csv", "--config", "small.yaml", "--out",
                                         "out"], exp, chain(setup, cp("small.yaml")),
                        ["out"] if exp != REFUSE else [], words=w))  # fmt: skip
    others = {
        "jsonl-garbage": ("t.jsonl", '{"a": 1}\nnot json\n'),
        "jsonl-deep": ("t.jsonl", DEEP_JSON + "\n"),
        "parquet-garbage": ("t.parquet", BIN),
        "parquet-empty": ("t.parquet", b""),
        "unknown-ext": ("t.xlsx", "a,b\n"),
    }  # fmt: skip
    for name, (fn, body) in others.items():
        out.append(Case("trace show", name, ["trace", "show", fn], REFUSE, write(fn, body),
                        words=[fn]))  # fmt: skip
        out.append(Case("replay", name, ["replay", fn, "--config", "small.yaml", "--out",
                                         "out"], REFUSE, chain(write(fn, body),
                                                               cp("small.yaml")), words=[fn]))
    for name, setup, fn in [("fifo", fifo("t.csv"), "t.csv"), ("dir", mkdir("t.csv"), "t.csv"),
                            ("devzero", None, "/dev/zero"), ("nonexistent", None, "no.csv")]:
        out.append(Case("trace show", name, ["trace", "show", fn], REFUSE, setup, words=[fn]))
        out.append(Case("replay", name, ["replay", fn, "--out", "out"], REFUSE, setup,
                        words=[fn]))  # fmt: skip
    for v in ["-1", "0", "1e300", "nan"]:
        out.append(Case("trace show", f"max-resp={v}", ["trace", "show", "trace.csv",
                        "--max-response-len", v], REFUSE, cp("trace.csv"),
                        words=["max-response-len", "max_response_len"]))  # fmt: skip
    synth = ["trace", "synth", "dapo-math", "-o", "s.csv"]
    for flag, v in [("--steps", "0"), ("--steps", "-1"), ("--steps", "100000000"),
                    ("--prompts-per-step", "0"), ("--samples-per-prompt", "-2"),
                    ("--max-response-len", "0"), ("--max-prompt-len", "-1"),
                    ("--param", "response_median_tokens=nan"), ("--param", "bogus=1"),
                    ("--param", "response_median_tokens=-5"), ("--seed", "-1")]:
        out.append(Case("trace synth", f"{flag}={v}", [*synth, flag, v], REFUSE,
                        words=[flag.lstrip("-").split("-")[0], v.split("=")[0]],
                        timeout=30))  # fmt: skip
    out.append(Case("trace synth", "unknown-preset", ["trace", "synth", "../../etc/passwd",
                    "-o", "s.csv"], REFUSE, words=["preset", "passwd"]))  # fmt: skip
    out.append(Case("replay", "replay-ok", ["replay", "trace.csv", "--config", "small.yaml",
                    "--out", "out"], EITHER, cp("trace.csv", "small.yaml"), ["out"]))
    return out


def plan_cases() -> list[Case]:
    base = ["plan", "small.yaml", "--gpus", "16", "--systems", "laminar", "--tp", "1",
            "--max-batch", "64", "--trainer-fractions", "0.25", "--repack", "on", "--top",
            "1", "--jobs", "1", "--out", "p", "--cache-dir", "cache"]  # fmt: skip
    setup = chain(cp("small.yaml"), devnull("devnull"))

    def with_(flag: str, value: str) -> list[str]:
        a = list(base)
        if flag in a:
            a[a.index(flag) + 1] = value
        else:
            a += [flag, value]
        return a

    out = []
    bad = [("--vary", "sim.max_batch"), ("--vary", "bogus.key=1,2"), ("--vary", "seed="),
           ("--vary", "sim.kv_watermark=nan,0.1"), ("--vary", "cluster.gpus=16,32"),
           ("--vary", "sim.kv_watermark=-1"), ("--vary", "=1,2"),
           ("--max-points", "0"), ("--max-points", "-1"), ("--max-points", "abc"),
           ("--max-points", "1e999"), ("--gpus", "-8"), ("--gpus", "0"),
           ("--gpus", "1000000000000"), ("--gpus", "16,,32"), ("--gpus", "12"),
           ("--trainer-fractions", "0"), ("--trainer-fractions", "1.5"),
           ("--trainer-fractions", "nan"), ("--tp", "0"), ("--tp", "-1"),
           ("--max-batch", "0"), ("--max-batch", "nan"), ("--jobs", "0"), ("--jobs", "-1"),
           ("--jobs", "100000"), ("--top", "-1"), ("--short-steps", "0"),
           ("--short-steps", "-3"), ("--short-warmup", "-1"), ("--short-warmup", "10"),
           ("--screen-keep", "2"), ("--screen-keep", "nan"), ("--screen-keep", "-1"),
           ("--gpu-hour-price", "-1"), ("--gpu-hour-price", "nan"),
           ("--gpu-hour-price", "inf"), ("--show", "-1"), ("--systems", "bogus"),
           ("--systems", ""), ("--address", "bogus"), ("--address", "host:99999"),
           ("--cache-dir", "small.yaml"), ("--cache-dir", "devnull"),
           ("--repack", "maybe")]  # fmt: skip
    for flag, value in bad:
        out.append(Case("plan", f"{flag}={value}", with_(flag, value), REFUSE, setup,
                        words=[flag.lstrip("-").replace("-", "_"), flag, value or flag],
                        timeout=45))  # fmt: skip
    # the jobs huge one: a bound; either a refusal or capped run is fine
    out[-1 - len(bad) + bad.index(("--jobs", "100000")) + 1].expect = EITHER
    out[-1 - len(bad) + bad.index(("--jobs", "100000")) + 1].outputs = ["p", "cache"]
    dup = [*base, "--vary", "sim.kv_watermark=0.01,0.01"]
    out.append(Case("plan", "vary-dup-values", dup, EITHER, setup, ["p", "cache"],
                    ["kv_watermark"], timeout=60))  # fmt: skip
    out.append(Case("plan", "vary-twice", [*base, "--vary", "sim.kv_watermark=0.01",
                    "--vary", "sim.kv_watermark=0.02"], REFUSE, setup,
                    words=["kv_watermark"]))  # fmt: skip
    out.append(Case("plan", "huge-grid", ["plan", "small.yaml", "--gpus",
                    ",".join(str(16 * i) for i in range(1, 60)), "--out", "p", "--no-cache"],
                    REFUSE, setup, words=["--max-points", "points"]))  # fmt: skip
    # cache corruption: a good run first (in setup), then spoil every entry
    for how, body in [("garbage", b"\x00\xff garbage"), ("empty", b""),
                      ("neg-staleness", None), ("huge-rate", None), ("deep", DEEP_JSON),
                      ("list", b"[]"), ("wrong-key", None), ("fifo", None)]:
        def spoil(d: Path, how=how, body=body) -> None:
            subprocess.run([LAMINAR, *base[:-4], "--out", "p0", "--cache-dir", "cache"],
                           cwd=d, capture_output=True, check=True, env=ENV)  # fmt: skip
            shutil.rmtree(d / "p0")
            for f in (d / "cache").rglob("*.json"):
                if body is not None:
                    f.write_bytes(body.encode() if isinstance(body, str) else body)
                elif how == "fifo":
                    f.unlink()
                    os.mkfifo(f)
                else:
                    e = json.loads(f.read_text())
                    if how == "neg-staleness":
                        e["staleness_mean"] = -5
                    elif how == "huge-rate":
                        e["train_tokens_per_s"] = 1e300
                    else:
                        e["key"] = "0" * 64
                    f.write_text(json.dumps(e))

        out.append(Case("plan", f"cache-{how}", base, OK, chain(setup, spoil), ["p", "cache"],
                        timeout=60))  # fmt: skip
    out.append(Case("plan", "calibrated-cost", ["plan", "train/config.yaml", "--cost",
                    "cost.json"], REFUSE, cp("train", "cost.json"), words=["cost"]))
    out.append(Case("plan", "set-calibrated-cost", [*base, "--set", "sim.cost_file=cost.json"],
                    REFUSE, chain(setup, cp("cost.json")), words=["cost"]))  # fmt: skip
    return out


def train_cases() -> list[Case]:
    """All refused before any engine starts (a bogus address is the backstop: should a
    check pass, the address refusal ends it fast, and the case shows as unclear)."""
    out = []
    faults = ["kill-rollout@inf", "kill-rollout@infs", "kill-rollout@nans",
              "kill-rollout:r99@2", "kill-rollout@-1", "kill-rollout@-5s", "bogus@2",
              "kill-rollout", "kill-rollout@", "@2", "kill-rollout@1e400s",
              "kill-rollout@999999999", "kill-trainer:r0@2", "kill-rollout:@2",
              "kill-rollout@2@3", "kill-machine:m99@2", "kill-rollout@0",
              "kill-rollout@1e-300s"]  # fmt: skip
    for f in faults:
        exp = REFUSE
        # a machine exists or not under --address: checked once connected (the backstop)
        exp = EITHER if f in ("kill-rollout@0", "kill-machine:m99@2") else REFUSE
        out.append(Case("train --fault", f, ["train", "--fault", f, "--steps", "3", "--out",
                        "t", "--address", BACKSTOP], exp, words=["fault", f.split("@")[0] or "@"],
                        timeout=45))  # fmt: skip
    for a in ["bogus", "host:notaport", "h:70000", "h:0", ":0", "ray://h:10001", "http://x",
              "[::1]", "a b", "127.0.0.1:1"]:  # fmt: skip
        out.append(Case("train --address", a, ["train", "--address", a, "--out", "t"], REFUSE,
                        words=["address", a], timeout=45))  # fmt: skip
    misc = {
        "steps-0": ["train", "--steps", "0", "--out", "t", "--address", BACKSTOP],
        "steps-neg": ["train", "--steps", "-1", "--out", "t", "--address", BACKSTOP],
        "steps-huge": ["train", "--steps", "99999999999999999999", "--out", "t", "--address",
                       BACKSTOP],
        "rollouts-0": ["train", "--set", "runtime.rollouts=0", "--out", "t"],
        "cpu-binds-garbage": ["train", "--set", "runtime.cpu_binds=[banana]", "--out", "t"],
        "cpu-binds-huge": ["train", "--set", "runtime.cpu_binds=['99999']", "--out", "t"],
        "trainer-cpus-garbage": ["train", "--set", "runtime.trainer_cpus=1-", "--out", "t"],
        "device-bogus": ["train", "--set", "runtime.device=tpu", "--out", "t"],
        "model-type-bogus": ["train", "--set", "runtime.model.type=gpt5", "--out", "t"],
        "task-type-bogus": ["train", "--set", "runtime.task.type=chess", "--out", "t"],
        "mode-bogus": ["train", "--mode", "fast", "--out", "t"],
        "resume-and-out": ["train", "--resume", "train", "--out", "t2", "--address", BACKSTOP],
        "resume-set-shape": ["train", "--resume", "train", "--set", "runtime.model.hidden=256",
                             "--address", BACKSTOP],
        "resume-steps-below": ["train", "--resume", "train", "--steps", "1", "--address",
                               BACKSTOP],
        "resume-cost-file": ["train", "--resume", "cost.json"],
        "resume-latest-escape": ["train", "--resume", "train", "--address", BACKSTOP],
        "resume-latest-abs": ["train", "--resume", "train", "--address", BACKSTOP],
        "resume-pools-sha": ["train", "--resume", "train", "--address", BACKSTOP],
        "preset-sim": ["train", "--preset", "paper-math-7b", "--out", "t"],
        "out-devnull": ["train", "--out", "devnull", "--force", "--address", BACKSTOP],
        "kill-rollout-at-step-big": ["train", "--set", "runtime.kill_rollout_at_step=1000",
                                     "--steps", "3", "--out", "t"],
    }  # fmt: skip
    setups = {
        "resume-latest-escape": write("train/checkpoints/LATEST", "../../../etc\n"),
        "resume-latest-abs": write("train/checkpoints/LATEST", "/tmp\n"),
        "resume-pools-sha": edit_json("train/checkpoints/step-000002/meta.json",
                                      lambda m: m.update(pools_sha256="0" * 64)),
    }
    words = {"steps-0": ["steps"], "steps-neg": ["steps"], "steps-huge": ["steps"],
             "rollouts-0": ["rollouts"], "cpu-binds-garbage": ["cpu_binds"],
             "cpu-binds-huge": ["cpu_binds", "99999"], "trainer-cpus-garbage": ["trainer_cpus"],
             "device-bogus": ["device", "tpu"], "model-type-bogus": ["gpt5", "model"],
             "task-type-bogus": ["chess", "task"], "mode-bogus": ["mode", "fast"],
             "resume-and-out": ["--out", "--resume"],
             "resume-set-shape": ["hidden"], "resume-steps-below": ["steps"],
             "resume-cost-file": ["cost.json"], "resume-latest-escape": ["LATEST"],
             "resume-latest-abs": ["LATEST"], "resume-pools-sha": ["pools"],
             "preset-sim": ["paper-math-7b", "preset", "device", "runtime"],
             "out-devnull": ["devnull", BACKSTOP],
             "kill-rollout-at-step-big": ["kill_rollout_at_step"]}
    for name, args in misc.items():
        setup = chain(cp("train", "cost.json"), setups.get(name, lambda d: None))
        if "--address" not in args and name != "mode-bogus":
            args = [*args, "--address", BACKSTOP]
        exp = EITHER if name == "preset-sim" else REFUSE
        out.append(Case("train", name, args, exp, setup, words=words[name], timeout=45))
    return out


GOOD_ENV = ("class E:\n    def prompt(self, i): return {'id': i, 'prompt': '1+1'}\n"
            "    def reward(self, s, m): return 1.0\ndef make(args, seed): return E()\n")
ENV_MODULES = {
    "import-hangs": "import time\ntime.sleep(600)\n" + GOOD_ENV,
    "import-exits-0": "import os\nos._exit(0)\n",
    "import-kills-itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "import-raises-keyboardinterrupt": "raise KeyboardInterrupt\n",
    "import-sys-exit": "import sys\nsys.exit(0)\n",
    "import-forks-a-sleeper": ("import subprocess, sys, time\nsubprocess.Popen([sys.executable,"
                               " '-c', 'import time; time.sleep(600)'])\ntime.sleep(600)\n"),
    "import-syntax-error": "def make(:\n",
    "factory-hangs": GOOD_ENV.replace("return E()", "import time; time.sleep(600)"),
    "factory-exits": GOOD_ENV.replace("return E()", "raise SystemExit(0)"),
    "factory-returns-none": GOOD_ENV.replace("return E()", "return None"),
    "factory-returns-class": GOOD_ENV.replace("return E()", "return E"),
    "step-not-callable": GOOD_ENV.replace("class E:", "class E:\n    step = 3"),
    "no-factory": "x = 1\n",
    "binary-module": "\x00\x01\xff",
}  # fmt: skip


def env_cases() -> list[Case]:
    """A user's environment (``runtime.task.type: python``) or JSONL reward module that is
    hostile at start: refused naming ``runtime.task.entry`` / ``reward`` before anything
    starts (the start-up check runs the module in a child process, bounded in time)."""
    out = []
    for name, text in ENV_MODULES.items():
        mod = "lam_sweep_" + name.replace("-", "_")
        entry = f"{mod}:make"
        cfg = f"runtime:\n  task: {{type: python, entry: '{entry}'}}\n"
        out.append(Case("environments", name, ["train", "task.yaml", "--out", "t", "--address",
                        BACKSTOP], REFUSE, chain(write(f"{mod}.py", text.encode("latin-1")),
                        write("task.yaml", cfg)), words=["runtime.task.entry", mod],
                        timeout=100))  # fmt: skip
    for name in ("import-exits-0", "import-hangs", "no-factory"):
        mod = "lam_sweep_" + name.replace("-", "_")
        cfg = (f"runtime:\n  task: {{type: jsonl, path: q.jsonl, reward: '{mod}:make'}}\n")
        out.append(Case("environments", f"jsonl-reward-{name}", ["train", "task.yaml", "--out",
                        "t", "--address", BACKSTOP], REFUSE, chain(write(f"{mod}.py",
                        ENV_MODULES[name]), write("q.jsonl", '{"prompt": "1+1=", "answer": 2}\n'),
                        write("task.yaml", cfg)), words=["runtime.task.reward", mod],
                        timeout=100))  # fmt: skip
    for name, cfg, words in [
        ("module-dir-missing", "{type: python, entry: 'm:make', module_dir: nowhere}", ["m"]),
        ("module-dir-is-a-file", "{type: python, entry: 'm:make', module_dir: task.yaml}", ["m"]),
        ("args-not-a-mapping", "{type: python, entry: 'm:make', args: [1, 2]}", ["args"]),
        ("timeout-zero", "{type: python, entry: 'm:make', timeout_s: 0}", ["timeout_s"]),
        ("max-turns-negative", "{type: python, entry: 'm:make', max_turns: -1}", ["max_turns"]),
        ("entry-path-like", "{type: python, entry: '../m:make'}", ["entry"]),
        ("loggers-bogus", "{type: python, entry: 'm:make'}\n  loggers: [neptune]", ["loggers"]),
    ]:  # fmt: skip
        out.append(Case("environments", name, ["train", "task.yaml", "--out", "t", "--address",
                        BACKSTOP], REFUSE, chain(write("m.py", GOOD_ENV),
                        write("task.yaml", f"runtime:\n  task: {cfg}\n")), words=words,
                        timeout=100))  # fmt: skip
    return out


def all_cases(quick: bool = False) -> list[Case]:
    cases = [*cost_cases(), *config_cases(), *set_cases(quick), *output_cases(),
             *run_file_cases(), *trace_cases(), *plan_cases(), *train_cases(),
             *env_cases()]  # fmt: skip
    if quick:  # every fourth case of each surface: each surface and most classes, ~1/4
        n = collections.Counter()
        kept = []
        for c in cases:
            n[c.surface] += 1
            if n[c.surface] % 4 == 1:
                kept.append(c)
        cases = kept
    seen = collections.Counter()
    for c in cases:
        seen[(c.surface, c.name)] += 1
        if seen[(c.surface, c.name)] > 1:
            c.name += f"#{seen[(c.surface, c.name)]}"
    return cases


# ---------------------------------------------------------------- running

ENV = dict(os.environ, XDG_CACHE_HOME=str(ROOT / "xdg"), MPLBACKEND="Agg",
           PYTHONUNBUFFERED="1", COLUMNS="100", LAMINAR_NO_PROGRESS="1")  # fmt: skip


def snapshot(root: Path, skip: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    skips = [s.rstrip("/") for s in skip] + ["cache", ".cache"]
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        keep = []
        for n in dirnames:
            rel = os.path.normpath(os.path.join(rel_dir, n))
            if any(rel == s or rel.startswith(s + "/") for s in skips):
                continue
            keep.append(n)
        dirnames[:] = keep
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = os.path.normpath(os.path.join(rel_dir, n))
            if any(rel == s or rel.startswith(s + "/") for s in skips):
                continue
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = f"dir:{oct(st.st_mode)}"
            else:
                out[rel] = f"special:{oct(st.st_mode)}"
    return out


def error_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "error:" in ln]


def classify(c: Case, rc: int | None, err: str, before: dict, after: dict) -> tuple[str, str]:
    """The class of one outcome (module docstring) and a detail for the report."""
    first = _harm(rc, err, before, after)
    if first is not None:
        return first
    msg = (error_lines(err) or [err.strip().splitlines()[-1] if err.strip() else ""])[-1]
    if rc == 0:
        return ("nonsense", "exit 0") if c.expect == REFUSE else ("clean", "accepted")
    if rc == 2:
        return _refusal(c, err, msg)
    return "other-exit", f"rc {rc}: {msg[:140]}"


def _harm(rc: int | None, err: str, before: dict, after: dict) -> tuple[str, str] | None:
    if rc is None:
        return "hang", ""
    if "Traceback" in err:
        last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [""]
        return "traceback", last[0][:160]
    lost = [k for k, v in before.items() if after.get(k) != v]
    if lost:
        return "data-loss", "changed: " + ", ".join(lost[:4])
    new = [k for k in after if k not in before]
    if rc == 2 and new:
        return "leftover", "new: " + ", ".join(new[:4])
    return None


def _refusal(c: Case, err: str, msg: str) -> tuple[str, str]:
    if BACKSTOP in c.args and BACKSTOP in msg and BACKSTOP not in c.words:
        if c.expect == REFUSE:
            return "nonsense", "passed every check (stopped by the backstop address)"
        return "clean", "accepted (stopped by the backstop address)"
    if c.expect == OK:
        return "false-refusal", msg[:160]
    lines = error_lines(err)
    if len(lines) != 1 or len(lines[0]) < 25:
        return "unclear", f"{len(lines)} error lines: {msg[:140]}"
    if c.words and not any(w.lower() in err.lower() for w in c.words):
        return "unclear", msg[:160]
    return "clean", msg[:160]


def run_case(i: int, c: Case) -> dict:
    d = WORK / f"{i:04d}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    res = {"surface": c.surface, "name": c.name, "args": c.args, "expect": c.expect,
           "dir": str(d)}  # fmt: skip
    try:
        if c.setup:
            c.setup(d)
    except Exception as e:
        return {**res, "class": "setup-error", "detail": repr(e)[:200], "seconds": 0.0}
    before = snapshot(d, c.outputs)
    t0 = time.monotonic()
    p = subprocess.Popen([LAMINAR, *c.args], cwd=d, env=ENV, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)  # fmt: skip
    try:
        _, err = p.communicate(timeout=c.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        rc = None
    secs = time.monotonic() - t0
    err_s = err.decode("utf-8", "replace")
    after = snapshot(d, c.outputs)
    cls, detail = classify(c, rc, err_s, before, after)
    return {**res, "class": cls, "detail": detail, "rc": rc, "seconds": round(secs, 2),
            "stderr_tail": err_s[-600:]}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="run cases whose surface/name holds this")
    ap.add_argument("--json", default=str(ROOT / "results.json"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="every fourth case of each surface (--set at -1, 1e300 and 0 where "
                    "0 is wrong): about 200 cases, a few minutes")  # fmt: skip
    a = ap.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    build_fixtures()
    cases = [c for c in all_cases(a.quick) if a.only in f"{c.surface}/{c.name}"]
    if a.list:
        for c in cases:
            print(f"{c.surface:16s} {c.name:40s} {c.expect:7s} {' '.join(c.args)}")
        return 0
    shutil.rmtree(WORK, ignore_errors=True)
    t0 = time.monotonic()
    results = []
    with cf.ThreadPoolExecutor(a.jobs) as ex, open(a.json + "l", "w") as log:
        for r in ex.map(lambda ic: run_case(*ic), enumerate(cases)):
            results.append(r)
            log.write(json.dumps(r) + "\n")
            log.flush()
    wall = time.monotonic() - t0
    Path(a.json).write_text(json.dumps(results, indent=1))
    classes = ["clean", *BAD, "setup-error"]
    by = collections.defaultdict(collections.Counter)
    for r in results:
        by[r["surface"]][r["class"]] += 1
    shown = [k for k in classes if k in ("clean", *BAD) or any(by[s][k] for s in by)]
    print(f"{'surface':16s} " + " ".join(f"{k[:9]:>9s}" for k in shown) + f" {'total':>6s}")
    for s in by:
        print(f"{s:16s} " + " ".join(f"{by[s][k]:9d}" for k in shown) +
              f" {sum(by[s].values()):6d}")  # fmt: skip
    tot = collections.Counter(r["class"] for r in results)
    print(f"{'TOTAL':16s} " + " ".join(f"{tot[k]:9d}" for k in shown) + f" {len(results):6d}")
    print(f"\n{len(results)} cases in {wall:.0f} s; details: {a.json}")
    bad = [r for r in results if r["class"] != "clean"]
    for r in bad:
        print(f"  {r['class']:13s} {r['surface']}/{r['name']}: {r['detail']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
