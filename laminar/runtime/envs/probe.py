"""The start-up check of a user's module in a child process, bounded in time: an import or
factory that hangs, exits, is interrupted or kills its process is refused naming the entry and
what it did, and never hangs, ends or interrupts ``laminar train`` itself.

``python -m laminar.runtime.envs.probe`` reads one JSON request on stdin (the task section's
``entry`` or ``reward``, ``module_dir``, ``args``, the seed) and ends with one line
``laminar-probe: {json}`` on stdout: ``{"ok": true}`` or ``{"error": message}``; lines
``laminar-probe-stage: ...`` before it say how far it got (import, factory).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from laminar.errors import ConfigError
from laminar.runtime.envs.load import entry_error as refusal  # the one message shape

MARK = "laminar-probe: "
STAGE = "laminar-probe-stage: "
START_BOUND_S = 60.0
"""The least time the import and the factory get together (a task's own ``timeout_s`` /
``reward_timeout_s`` bounds one call, not an import of a large library)."""
stage = ""  # the child's stage (its last _stage)
_STAGES = {"import": "importing the module", "factory": "calling the factory",
           "checked": "checking what the factory returned"}  # fmt: skip


def _fields(cfg: Any, key: str) -> dict:
    return {"key": key, key: getattr(cfg, key), "module_dir": cfg.module_dir,
            "args": dict(getattr(cfg, "args", None) or {})}  # fmt: skip


def check_in_child(cfg: Any, seed: int, key: str = "entry", timeout_s: float = 0.0) -> None:
    """Import ``cfg.<key>`` (``module:name``) and, for an environment's ``entry``, build it
    with ``factory(args, seed)``, in a child process within ``max(START_BOUND_S, timeout_s)``;
    a ``ConfigError`` naming ``runtime.task.<key>`` for anything but a clean answer."""
    where = Path(cfg.module_dir).expanduser() if cfg.module_dir else None
    if where is not None and not where.is_dir():
        raise ConfigError("runtime.task.module_dir", "", f"{cfg.module_dir!r} is not a directory "
                          "(the directory the module of runtime.task." + key + " is in)")
    bound = max(START_BOUND_S, float(timeout_s or 0.0))
    request = json.dumps({**_fields(cfg, key), "seed": int(seed)}, default=str)
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "laminar.runtime.envs.probe"],  # -P: not the cwd
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,  # a Ctrl-C reaches laminar, which ends the child below
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )  # fmt: skip  (the child looks where this process looks)
    try:
        out, err = proc.communicate(request.encode(), timeout=bound)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        reached = _last_stage(out)
        raise refusal(cfg, f"{_STAGES.get(reached, 'starting')} did not end within "
                       f"{bound:g} s (a module that waits at import or a factory that never "
                       "returns; docs/environments.md)", key) from None  # fmt: skip
    except BaseException:
        _kill(proc)
        raise
    answer = _answer(out)
    if answer is None:
        reached = _last_stage(out)
        how = _how_it_ended(proc.returncode)
        tail = _tail(err)
        raise refusal(cfg, f"the process {how} while {_STAGES.get(reached, 'starting')}"
                       f"{': ' + tail if tail else ''}", key)  # fmt: skip
    if "error" in answer:
        raise ConfigError(f"runtime.task.{key}", "", str(answer["error"]))


def _kill(proc: subprocess.Popen) -> None:
    """The child and whatever it started (its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()


def _how_it_ended(rc: int | None) -> str:
    if rc is not None and rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"ended with exit code {rc}"


def _lines(out: bytes) -> list[str]:
    return out.decode("utf-8", "replace").splitlines()


def _answer(out: bytes) -> dict | None:
    for line in reversed(_lines(out)):
        if line.startswith(MARK):
            try:
                answer = json.loads(line[len(MARK):])
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None


def _last_stage(out: bytes) -> str:
    stages = [ln[len(STAGE):].strip() for ln in _lines(out) if ln.startswith(STAGE)]
    return stages[-1] if stages else ""


def _tail(err: bytes) -> str:
    """The last line the child wrote to stderr, cut to one short line."""
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _stage(name: str) -> None:
    global stage
    stage = name
    sys.stdout.write(f"{STAGE}{name}\n")
    sys.stdout.flush()


def _child() -> int:
    from laminar.runtime.envs.load import build_env, load_factory

    request = json.loads(sys.stdin.read())
    key = request["key"]
    cfg = SimpleNamespace(**{k: v for k, v in request.items() if k not in ("key", "seed")})
    result: dict
    try:
        _stage("import")
        factory = load_factory(cfg, key)
        if key == "entry":  # an environment's factory: build one
            _stage("factory")
            build_env(cfg, factory, int(request["seed"]))
        _stage("checked")
        result = {"ok": True}
    except ConfigError as e:
        result = {"error": e.detail}
    except BaseException as e:  # a user module may raise anything, KeyboardInterrupt too
        said = f": {e}" if str(e) else ""
        result = {"error": f"{getattr(cfg, key)!r}: {type(e).__name__}{said} (raised while "
                           f"{_STAGES.get(stage, 'starting')})"}
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child())
