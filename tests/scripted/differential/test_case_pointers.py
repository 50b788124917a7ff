"""Each module of the language core (``supervisor/scripted/syntax/`` and ``shell/``) names,
in a ``Differential cases:`` line of its docstring, the case files that cover it; the names
must exist, and every case file must be named by some module, so the pointers cannot rot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPTED = Path(__file__).resolve().parents[3] / "supervisor" / "scripted"
CORE = sorted(
    p
    for room in ("syntax", "shell")
    for p in (SCRIPTED / room).rglob("*.py")
    if p.name != "__init__.py"
)
_LINE = re.compile(r"^Differential cases: (.+(?:\n.+)*)", re.MULTILINE)  # to the blank line
_NAME = re.compile(r"cases_\w+\.txt")


def pointed_cases(path: Path) -> list[str]:
    """The case files a module's docstring names (empty when it names none)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    found = _LINE.search(doc)
    return _NAME.findall(found.group(1)) if found else []


def test_the_language_core_is_found() -> None:
    assert len(CORE) >= 20, CORE


@pytest.mark.parametrize("module", CORE, ids=[str(p.relative_to(SCRIPTED)) for p in CORE])
def test_module_points_to_existing_cases(module: Path) -> None:
    names = pointed_cases(module)
    assert names, f"{module.name}: no 'Differential cases: cases_*.txt' line in its docstring"
    missing = [n for n in names if not (HERE / n).is_file()]
    assert not missing, f"{module.name} points to case files that do not exist: {missing}"


def test_every_case_file_is_pointed_to() -> None:
    named = {n for p in SCRIPTED.rglob("*.py") for n in pointed_cases(p)}
    files = {p.name for p in HERE.glob("cases_*.txt")}
    assert files - named == set(), "case files no module points to"
