"""The shell builtins of the logic-only shell, gathered in one table."""

from __future__ import annotations

from typing import Any


def register_all(table: dict[str, Any]) -> None:
    """Fill ``table`` (``interpreter.BUILTINS``) with every shell builtin."""
    from ..conditions import builtin_bracket, builtin_test
    from .core import CORE_BUILTINS
    from .printf import printf
    from .variables import VARS_BUILTINS

    table.update(CORE_BUILTINS)
    table.update(VARS_BUILTINS)
    table["printf"] = printf
    table["test"] = builtin_test
    table["["] = builtin_bracket
