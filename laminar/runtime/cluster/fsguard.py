"""An emulated machine's filesystem: its processes may not touch another machine's files.

Emulated machines (:mod:`laminar.runtime.cluster.emulate`) share one host, so a path that only
exists on one real machine (the driver's run directory, another machine's scratch) is silently
reachable from all of them. Every Python process of an emulated machine runs this module at
start-up (as ``sitecustomize``, through its raylet's ``PYTHONPATH``) and installs an audit hook
that refuses, with ``PermissionError`` naming the machine and the path, every open, directory
listing, creation, rename or removal under the cluster's root that is not its own root
(``<root>/<machine>/``) or Ray's (``<root>/ray``, ``<root>/pyhooks``): other machines' roots
and the driver's (``<root>/driver``). On a real cluster such a path does not exist there: the
run would end in ``FileNotFoundError`` (issue 28). Stat calls (``Path.exists``) raise no audit
event and pass; they find nothing wrong on their own.

Standard library only: it runs before anything else is importable.
"""

from __future__ import annotations

import os
import sys

ROOT_ENV = "LAMINAR_EMU_ROOT"
MACHINE_ENV = "LAMINAR_EMU_MACHINE"
SHARED = ("ray", "pyhooks")  # Ray's session files and this hook: every machine's
# audit events that name paths, and which of their arguments are paths
_EVENTS = {
    "open": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.truncate": (0,),
    "os.symlink": (0, 1),
    "os.link": (0, 1),
    "os.chmod": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.copytree": (0, 1),
}


def foreign(path: object, root: str, machine: str) -> bool:
    """True when ``path`` lies under ``root`` but not under ``machine``'s own part of it (nor a
    part every machine shares)."""
    if isinstance(path, int) or path is None:
        return False
    try:
        p = os.fsdecode(os.fspath(path))  # type: ignore[arg-type]
    except TypeError:
        return False
    p = os.path.abspath(p)
    if p != root and not p.startswith(root + os.sep):
        return False
    rest = p[len(root) + 1 :]
    top = rest.split(os.sep, 1)[0]
    return bool(top) and top != machine and top not in SHARED


def install(root: str, machine: str) -> None:
    """Refuse this process's access to another machine's files (module docstring)."""
    root = os.path.abspath(root)

    def hook(event: str, args: tuple) -> None:
        where = _EVENTS.get(event)
        if where is None:
            return
        for i in where:
            if i < len(args) and foreign(args[i], root, machine):
                raise PermissionError(
                    f"emulated machine {machine}: {os.fsdecode(os.fspath(args[i]))} is another "
                    "machine's path (it would not exist here on a real cluster)"
                )

    sys.addaudithook(hook)


def install_from_env() -> bool:
    """:func:`install` when this process belongs to an emulated machine; True if it did."""
    root, machine = os.environ.get(ROOT_ENV), os.environ.get(MACHINE_ENV)
    if not root or not machine:
        return False
    install(root, machine)
    return True
