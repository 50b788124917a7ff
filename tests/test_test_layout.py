"""The test tree's own rule: without ``__init__.py`` files pytest imports every test module
and helper by its basename (the default ``prepend`` import mode), so two files with one name
in different test folders break collection of the whole suite with an "import file mismatch".
This says which two, before a collection error does."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_module_basenames_are_unique_across_the_test_tree() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name != "conftest.py" and "__pycache__" not in path.parts:
            seen[path.name].append(str(path.relative_to(TESTS)))
    twice = {name: sorted(paths) for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"rename one of each: {twice}"


def test_the_test_tree_has_no_packages() -> None:
    """An ``__init__.py`` would change how every test module is named on import."""
    assert not sorted(TESTS.rglob("__init__.py"))
