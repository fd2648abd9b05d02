"""Import ``runtime.task.entry`` and build the environment; a failure is a ``ConfigError``
naming the entry, the module's file and the cause (exit 2 before anything starts).

The module is looked up in ``runtime.task.module_dir`` first (the config file's directory
unless set), then on ``sys.path`` (the ``PYTHONPATH``). Every process that needs the
environment (the prompt pool, each rollout, the trainer's warm-up, the driver's check at
start) builds its own with ``factory(args, seed)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Any

from laminar.errors import ConfigError

REQUIRED = ("prompt", "reward")  # methods every environment has
OPTIONAL = ("target", "step")  # the warm-up's answer; the next message of a multi-turn one


def _cause(e: BaseException) -> str:
    """The exception in one line, with where in the user's code it was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def entry_error(cfg: Any, message: str, key: str = "entry") -> ConfigError:
    return ConfigError(f"runtime.task.{key}", "", f"{getattr(cfg, key)!r}: {message}")


def module_file(cfg: Any, key: str = "entry") -> str | None:
    """The file the ``module:name`` of ``cfg.<key>`` would be imported from (None: not
    found)."""
    name = getattr(cfg, key).partition(":")[0]
    _search_path(cfg)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return getattr(spec, "origin", None) if spec is not None else None


def _search_path(cfg: Any) -> None:
    """``module_dir`` first on ``sys.path`` (once)."""
    if cfg.module_dir:
        where = str(Path(cfg.module_dir).expanduser().resolve())
        if where not in sys.path:
            sys.path.insert(0, where)


def load_factory(cfg: Any, key: str = "entry") -> Any:
    """The callable ``cfg.<key>`` names (``module:name``: the environment's factory, or a
    JSONL task's ``reward``); a ``ConfigError`` naming module, file and cause."""
    name, _, attr = getattr(cfg, key).partition(":")
    _search_path(cfg)
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit) as e:  # a user module may raise anything, exit too
        looked = f"{cfg.module_dir or '(no module_dir)'} and PYTHONPATH"
        where = module_file(cfg, key)
        raise entry_error(
            cfg,
            f"cannot import module {name!r} ({where or 'not found in ' + looked}): {_cause(e)}",
            key,
        ) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise entry_error(cfg, f"{getattr(module, '__file__', name)} has no callable {attr!r}", key)
    return factory


def load_env(cfg: Any, seed: int) -> Any:
    """``factory(args, seed)``, checked: it has ``prompt`` and ``reward`` (and, a multi-turn
    environment, ``step``: ``laminar.runtime.rollout.turns``)."""
    return build_env(cfg, load_factory(cfg), seed)


def build_env(cfg: Any, factory: Any, seed: int) -> Any:
    """The environment ``factory`` (``cfg.entry``'s) builds, checked as ``load_env`` says."""
    where = getattr(sys.modules.get(cfg.entry.partition(":")[0]), "__file__", "?")
    try:
        env = factory(dict(cfg.args), seed)
    except (Exception, SystemExit) as e:
        raise entry_error(cfg, f"the factory failed (module {where}): {_cause(e)}") from None
    if isinstance(env, type):
        raise entry_error(cfg, f"the factory returned the class {env.__name__}, not an environment "
                     f"(call it: return {env.__name__}(...); module {where})")  # fmt: skip
    missing = [m for m in REQUIRED if not callable(getattr(env, m, None))]
    if missing:
        raise entry_error(
            cfg,
            f"the factory returned {type(env).__name__}, which has no "
            f"{' or '.join(missing)} method (module {where}; docs/environments.md)",
        )
    if hasattr(env, "step") and not callable(env.step):
        kind = type(env.step).__name__
        raise entry_error(cfg, f"the environment's step is a {kind}, not a method "
                          f"(module {where}; docs/environments.md)")  # fmt: skip
    return env


def multi_turn(env: Any) -> bool:
    """Whether ``env`` plays several turns (it has ``step``)."""
    return callable(getattr(env, "step", None))
