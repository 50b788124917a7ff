"""DESIGN's import directions, read from the source: commands -> hosting -> {scripted shell,
sandboxed workers} -> tool surface -> {sandbox, ledger, worker_runtime}, and no circle.

An import is real wherever it is written (module level or inside a function: a lazy import
still runs) unless it sits under ``if TYPE_CHECKING:``. Every module of the three packages
belongs to one room of `ROOMS`, and a room imports only the rooms it lists; a new room (a
new sub-package of ``supervisor``) fails here until it is given its place. The worker
imports only ``worker_runtime``, ``msgspec`` and the standard library (start-up time in the
sandbox). See docs/architecture.md.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("supervisor", "worker_runtime", "sandbox")

#: the private helpers at the top of ``supervisor``, usable by every room of it
HELPERS = "supervisor._lazy", "supervisor._loop", "supervisor._fdwrite"

#: room -> the rooms it may import (its own is always allowed)
ROOMS: dict[str, frozenset[str]] = {
    "supervisor.commands": frozenset(
        {
            "supervisor.hosting",
            "supervisor.cluster",
            "supervisor.scripted",
            "supervisor.workers",
            "supervisor.tools",
            "supervisor.ledger",
            "sandbox",
            "worker_runtime",
            "supervisor",
            *HELPERS,
        }
    ),
    "supervisor.hosting": frozenset(
        {
            "supervisor.scripted",
            "supervisor.workers",
            "supervisor.tools",
            "supervisor.ledger",
            "sandbox",
            "worker_runtime",
            *HELPERS,
        }
    ),
    "supervisor.cluster": frozenset(
        {
            "supervisor.hosting",
            "supervisor.scripted",
            "supervisor.workers",
            "supervisor.tools",
            "supervisor.ledger",
            "sandbox",
            "worker_runtime",
            "supervisor",
            *HELPERS,
        }
    ),
    # the shell knows tools only through the tool surface: no workers, ledger or sandbox
    "supervisor.scripted": frozenset({"supervisor.tools", *HELPERS}),
    "supervisor.workers": frozenset(
        {"supervisor.tools", "supervisor.ledger", "sandbox", "worker_runtime", *HELPERS}
    ),
    "supervisor.tools": frozenset({"sandbox", "supervisor.ledger", "worker_runtime", *HELPERS}),
    "supervisor.ledger": frozenset(HELPERS),
    # the package's face: lazy names only (``supervisor.__init__`` imports no room)
    "supervisor": frozenset(HELPERS),
    "supervisor.__main__": frozenset({"supervisor.commands"}),
    **{helper: frozenset() for helper in HELPERS},
    "sandbox": frozenset(),
    "worker_runtime": frozenset(),
}

#: compatibility imports at the paths the docs showed before the house moved (one release,
#: until 0.2): each may import only the room it forwards to
COMPAT: dict[str, str] = {
    "supervisor.cli": "supervisor.commands",
    "supervisor.demo": "supervisor.commands",
    "supervisor.tooldefs": "supervisor.commands",
    "supervisor.audit": "supervisor.workers",
}
ROOMS.update({old: frozenset({new, *HELPERS}) for old, new in COMPAT.items()})

#: what the worker may import besides ``worker_runtime`` and the standard library
WORKER_THIRD_PARTY = frozenset({"msgspec"})


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module of the project it imports (or the top-level name outside it)
    line: int

    def where(self) -> str:
        return f"{module_path(self.source).relative_to(ROOT)}:{self.line}"


def module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def project_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = project_modules()


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node`` but those of ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking_only(child):
            for other in child.orelse:
                yield from _statements(other)
        elif isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        else:
            yield from _statements(child)


def _in_project(name: str) -> str | None:
    """The project module ``name`` is, or is inside of (``pkg.mod.Class`` -> ``pkg.mod``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[Import]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in _statements(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            stem = f"{base}.{node.module}" if node.module else base
            names = [f"{stem}.{alias.name}" for alias in node.names]
        else:
            assert node.module is not None
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            target = _in_project(name) or name.partition(".")[0]
            if target != module:
                found.append(Import(module, target, node.lineno))
    return found


IMPORTS = {module: imports_of(module) for module in MODULES}


#: rooms that are one module, not a package of them
SINGLE = frozenset({"supervisor", "supervisor.__main__", *HELPERS, *COMPAT})


def room_of(module: str) -> str | None:
    """The room ``module`` is in: itself, or the deepest package room above it."""
    best = None
    for room in ROOMS:
        inside = module == room or (room not in SINGLE and module.startswith(room + "."))
        if inside and (best is None or len(room) > len(best)):
            best = room
    return best


def test_every_module_has_a_room() -> None:
    homeless = [m for m in MODULES if room_of(m) is None]
    assert not homeless, (
        f"{homeless}: no room in ROOMS; put the module in a room, or add its room to ROOMS "
        "(with the rooms it may import) and to docs/architecture.md"
    )


def test_a_sub_package_of_supervisor_is_a_room_of_its_own() -> None:
    packages = {
        ".".join(p.relative_to(ROOT).parts[:2]) for p in (ROOT / "supervisor").glob("*/__init__.py")
    }
    assert packages - set(ROOMS) == set(), "give the new sub-package its place in ROOMS"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_room_imports_only_what_it_may(room: str) -> None:
    allowed = ROOMS[room] | {room}
    wrong = [
        f"{imp.where()}: {imp.source} imports {imp.target} ({target_room})"
        for module in MODULES
        if room_of(module) == room
        for imp in IMPORTS[module]
        if (target_room := room_of(imp.target)) is not None and target_room not in allowed
    ]
    assert not wrong, (
        f"{room} may import only {sorted(allowed)}; move the code to the room it belongs "
        "in, or hand it in from above (a callback, a parameter):\n" + "\n".join(wrong)
    )


def test_the_worker_imports_only_itself_msgspec_and_the_standard_library() -> None:
    wrong = [
        f"{imp.where()}: {imp.source} imports {imp.target}"
        for module in MODULES
        if module.partition(".")[0] == "worker_runtime"
        for imp in IMPORTS[module]
        if room_of(imp.target) is None
        and imp.target not in sys.stdlib_module_names
        and imp.target not in WORKER_THIRD_PARTY
    ]
    assert not wrong, "the worker starts in the sandbox from these alone:\n" + "\n".join(wrong)


def _circles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted({i.target for i in IMPORTS[m] if i.target in MODULES}) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in MODULES:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_circle_of_real_imports() -> None:
    circles = _circles()
    described = [
        " <-> ".join(circle)
        + "\n"
        + "\n".join(
            f"  {imp.where()}: {imp.source} -> {imp.target}"
            for module in circle
            for imp in IMPORTS[module]
            if imp.target in circle
        )
        for circle in circles
    ]
    assert not circles, (
        "import circles (an import only for types goes under `if TYPE_CHECKING:`; otherwise "
        "one side must not know the other):\n" + "\n".join(described)
    )


def test_the_checks_see_a_circle_and_a_wrong_direction() -> None:
    """The machinery itself: a real circle and a real upward import are found."""
    saved = dict(IMPORTS)
    try:
        IMPORTS["supervisor.tools"] = [
            *saved["supervisor.tools"],
            Import("supervisor.tools", "supervisor.scripted", 1),
        ]
        IMPORTS["supervisor.scripted"] = [
            *saved["supervisor.scripted"],
            Import("supervisor.scripted", "supervisor.tools", 1),
        ]
        assert ["supervisor.scripted", "supervisor.tools"] in _circles()
        with pytest.raises(AssertionError, match=r"supervisor\.tools imports supervisor\.scripted"):
            test_room_imports_only_what_it_may("supervisor.tools")
    finally:
        IMPORTS.clear()
        IMPORTS.update(saved)


def test_type_only_imports_are_not_real() -> None:
    """``supervisor.workers.calls`` names the session for types only: no edge."""
    assert "supervisor.workers.session" not in {
        i.target for i in IMPORTS["supervisor.workers.calls"]
    }
    assert "supervisor.workers.session" in {i.target for i in IMPORTS["supervisor.workers.pool"]}
