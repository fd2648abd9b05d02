"""The simulator's hot modules compiled with mypyc, used when built and fresh; else pure Python.

The simulator's decode loop (``replica``, ``decoder``, ``decode``), its trajectory records
(``pools``), the rollout manager's repack checks (``manager``) and the trainer's consumption
(``trainer``) are per-segment and per-trajectory Python: ~200 K segment ends in the 1024-GPU
headline. mypyc compiles the same source files, unchanged, to C extensions (native classes,
typed attributes), which runs them about 2x as fast with the same arithmetic, so the same bits
(``tests/test_native.py``; ``benchmarks/RESULTS.md``). Declared types are what make it pay: an
attribute or list left ``Any`` is boxed and added through the generic number protocol. The hook
is installed from ``laminar/__init__.py``, before any of them can be imported, so every process
of a checkout runs the same modules whatever it imports first. Of the policy layer only repack's
best-fit search is compiled (``laminar.policy.bestfit``, ~15% of the headline's instructions
when interpreted); its records (``laminar.policy.repack``) stay pure Python, so they pickle the
default way, as the runtime needs.

Built on request, never at run time: ``python -m laminar.native_build`` (``scripts/setup.sh``
does it; it needs the ``native`` extra, mypy, and a C compiler) writes the extensions and a
manifest of their sources' hashes to ``laminar/_native/``. They are kept apart from the
sources, so an edited source is never shadowed by an old build: the import hook below loads the
build only while every compiled source still matches its hash (and the interpreter is the one it
was built for), and otherwise warns once and runs the pure Python. ``LAMINAR_NATIVE=0``
turns the build off; ``python -m laminar.native_build status`` says which one a process runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import warnings
from pathlib import Path

# Compiled together (one mypyc group: native classes see each other's attributes directly).
MODULES = (
    "laminar.policy.bestfit",
    "laminar.sim.decode",
    "laminar.sim.pools",
    "laminar.sim.replica_outside",
    "laminar.sim.replica",
    "laminar.sim.decoder",
    "laminar.sim.manager",
    "laminar.sim.trainer",
)
GROUP = "laminar_native"  # mypyc's shared library: the module ``laminar_native__mypyc``
ENV = "LAMINAR_NATIVE"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # holds the ``laminar`` package
NATIVE_DIR = Path(__file__).resolve().parent / "_native"
MANIFEST = "manifest.json"


def source_path(module: str, root: Path = PACKAGE_ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _sha256(path: Path) -> str:
    import hashlib  # here, not at the top: ~2 ms of every process's start when nothing is built

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _abi() -> str:
    return f"{sys.implementation.cache_tag}{sysconfig.get_config_var('EXT_SUFFIX')}"


class _Finder:
    """Finds the compiled modules (and mypyc's shared library) in the build directory (a
    ``sys.meta_path`` finder; not an ``importlib.abc`` subclass, whose import costs ~6 ms of
    every process's start)."""

    def __init__(self, files: dict[str, Path]):
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        f = self.files.get(fullname)
        if f is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(f))
        return importlib.util.spec_from_file_location(fullname, f, loader=loader)


_state: dict[str, object] = {"active": False, "reason": "not looked for yet"}


def _switched_off() -> bool:
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off")


def check(native_dir: Path = NATIVE_DIR, root: Path = PACKAGE_ROOT) -> tuple[dict | None, str]:
    """(the build's module -> file map, or None; why not / what it is)."""
    if _switched_off():
        return None, f"{ENV}=0: pure Python"
    manifest_path = native_dir / MANIFEST
    if not manifest_path.is_file():
        return None, "not built (python -m laminar.native_build): pure Python"
    import json

    try:
        manifest = json.loads(manifest_path.read_text())
        modules, abi = dict(manifest["modules"]), str(manifest["abi"])
        group_name, group_file = str(manifest["group"]["name"]), str(manifest["group"]["file"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, f"unreadable build manifest {manifest_path} ({e}): pure Python"
    if abi != _abi():
        return None, f"built for {abi}, this interpreter is {_abi()}: pure Python"
    if sorted(modules) != sorted(MODULES):
        return None, "built for another module list: pure Python (rebuild)"
    files: dict[str, Path] = {}
    for name, entry in modules.items():
        src = source_path(name, root)
        if not src.is_file() or _sha256(src) != entry["sha256"]:
            return None, (
                f"{src.relative_to(root)} changed since the build: pure Python "
                "(rebuild: python -m laminar.native_build)"
            )
        files[name] = native_dir / entry["file"]
    files[group_name] = native_dir / group_file
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        return None, f"build incomplete (missing {missing[0]}): pure Python"
    return files, f"compiled (mypyc {manifest.get('mypy', '?')}): {native_dir}"


def install() -> bool:
    """Load the compiled modules from now on, when built and fresh; once per process."""
    if _state["reason"] != "not looked for yet":
        return bool(_state["active"])
    files, reason = check()
    if files is not None:
        sys.meta_path.insert(0, _Finder(files))
    elif not _switched_off() and (NATIVE_DIR / MANIFEST).is_file():
        # a build is there but unusable (stale, foreign, broken): say so once
        warnings.warn(f"laminar.native: {reason}", RuntimeWarning, stacklevel=2)
    _state.update(active=files is not None, reason=reason)
    return files is not None


def active() -> bool:
    """Whether this process runs the compiled simulator modules."""
    return bool(_state["active"])


def status() -> str:
    """What :func:`install` decided, and why."""
    return str(_state["reason"])
