"""The house rules of ``laminar/`` (README, "Layout"), read from the source with ``ast``: no import
circle anywhere, floors import only downwards (``sim`` and ``runtime`` never each other), and the
runtime's root holds only its face and its shared contracts, everything else in a room."""

from __future__ import annotations

import ast
from pathlib import Path

import laminar

ROOT = Path(laminar.__file__).parent
# the runtime's face (``__init__``) and the contracts every room shares
RUNTIME_ROOT_MODULES = {"__init__.py", "records.py", "weights.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, known: set[str]) -> set[str]:
    """Every laminar module ``path`` imports, at module level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, set(mods)) - {m} for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_laminar():
    assert _cycles(_graph()) == []


def test_no_import_circle_between_runtime_rooms():
    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[:2] == ["laminar", "runtime"] and len(parts) > 2 else None

    rooms: dict[str, set[str]] = {}
    for m, targets in _graph().items():
        if room(m):
            rooms.setdefault(room(m), set()).update(
                room(t) for t in targets if room(t) and room(t) != room(m)
            )
    for targets in list(rooms.values()):
        for t in targets:
            rooms.setdefault(t, set())
    assert _cycles(rooms) == []


def test_floors_import_downwards():
    graph = _graph()
    forbidden = {  # floor -> floors it must never import
        "laminar.policy": ("laminar.sim", "laminar.runtime", "laminar.config", "laminar.specs",
                           "laminar.plan", "laminar.calibrate", "laminar.cli", "laminar.plotting"),
        "laminar.sim": ("laminar.runtime", "laminar.plan", "laminar.calibrate", "laminar.cli"),
        "laminar.runtime": ("laminar.sim", "laminar.plan", "laminar.calibrate", "laminar.cli"),
        "laminar.specs": ("laminar.sim", "laminar.runtime", "laminar.cli"),
    }  # fmt: skip
    bad = [
        f"{m} imports {t}"
        for m, targets in graph.items()
        for floor, above in forbidden.items()
        if m == floor or m.startswith(floor + ".")
        for t in targets
        if any(t == a or t.startswith(a + ".") for a in above)
    ]
    assert bad == []


def test_runtime_root_holds_only_its_face_and_contracts():
    rt = ROOT / "runtime"
    loose = {p.name for p in rt.glob("*.py")} - RUNTIME_ROOT_MODULES
    assert loose == set(), f"modules at laminar/runtime/ root belong in a room: {sorted(loose)}"
    for room in (p for p in rt.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = room / "__init__.py"
        assert init.is_file(), f"{room} is not a package"
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init} has no docstring"
