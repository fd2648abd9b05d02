"""Build (mypyc), report and remove the compiled simulator modules of :mod:`laminar.native`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from laminar.native import (
    GROUP,
    MANIFEST,
    MODULES,
    NATIVE_DIR,
    PACKAGE_ROOT,
    _abi,
    _sha256,
    check,
    source_path,
)


def build(native_dir: Path = NATIVE_DIR, root: Path = PACKAGE_ROOT, quiet: bool = True) -> Path:
    """Compile :data:`MODULES` with mypyc into ``native_dir``; returns the manifest's path."""
    try:
        from mypyc.build import mypycify
        from setuptools import Distribution
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SystemExit(
            "laminar.native: building needs mypy and setuptools "
            f"(pip install -e '.[native]'): {e}"
        ) from e
    sources = [source_path(m, root) for m in MODULES]
    hashes = {m: _sha256(p) for m, p in zip(MODULES, sources, strict=True)}
    with tempfile.TemporaryDirectory(prefix="laminar-native-") as tmp:
        cwd = os.getcwd()
        os.chdir(root)  # mypyc names modules by their path from here
        try:
            exts = mypycify(
                [str(p.relative_to(root)) for p in sources]
                + ["--ignore-missing-imports", "--follow-imports=silent"],
                opt_level="3",
                group_name=GROUP,
                target_dir=str(Path(tmp) / "c"),
                verbose=not quiet,
            )
            dist = Distribution({"name": "laminar-native", "ext_modules": exts})
            dist.script_args = [
                "build_ext", "--build-lib", str(Path(tmp) / "lib"),
                "--build-temp", str(Path(tmp) / "tmp"),
            ]  # fmt: skip
            if quiet:
                dist.script_args.insert(0, "--quiet")
            dist.parse_command_line()
            dist.run_commands()
        finally:
            os.chdir(cwd)
        lib = Path(tmp) / "lib"
        staging = Path(tempfile.mkdtemp(prefix="_native.", dir=native_dir.parent))
        try:
            _stage(lib, staging, hashes)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        # swap in whole: a reader sees the old build or the new one, never half of one
        old = native_dir.with_name(native_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if native_dir.exists():
            os.replace(native_dir, old)
        os.replace(staging, native_dir)
        shutil.rmtree(old, ignore_errors=True)
    return native_dir / MANIFEST


def _stage(lib: Path, staging: Path, hashes: dict[str, str]) -> None:
    """Copy what mypyc built from ``lib`` into ``staging``, with the manifest."""
    modules = {}
    for m in MODULES:
        short = m.rsplit(".", 1)[-1]
        built = list(lib.joinpath(*m.split(".")[:-1]).glob(short + ".*.so"))
        if len(built) != 1:
            raise RuntimeError(f"mypyc built {built} for {m}")
        name = m + built[0].name[len(short):]  # the full module name: unique in one folder
        shutil.copy2(built[0], staging / name)
        modules[m] = {"file": name, "sha256": hashes[m]}
    group = list(lib.glob(f"{GROUP}__mypyc.*.so"))
    if len(group) != 1:
        raise RuntimeError(f"mypyc built {group} for its shared library")
    shutil.copy2(group[0], staging / group[0].name)
    import mypy.version

    manifest = {
        "abi": _abi(),
        "mypy": mypy.version.__version__,
        "group": {"name": f"{GROUP}__mypyc", "file": group[0].name},
        "modules": modules,
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def clean(native_dir: Path = NATIVE_DIR) -> bool:
    if native_dir.exists():
        shutil.rmtree(native_dir)
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m laminar.native_build",
        description="Compile the simulator's hot modules with mypyc (laminar.native).",
    )
    ap.add_argument("command", nargs="?", default="build", choices=("build", "status", "clean"))
    ap.add_argument("-v", "--verbose", action="store_true", help="show the compiler's output")
    args = ap.parse_args(argv)
    if args.command == "build":
        path = build(quiet=not args.verbose)
        print(f"laminar.native: built {len(MODULES)} modules in {path.parent}")
    elif args.command == "clean":
        print(("removed " if clean() else "nothing to remove: ") + str(NATIVE_DIR))
    else:
        print(check()[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
