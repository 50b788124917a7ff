"""The ``test`` and ``[`` builtins: argument checks and error reporting around the
condition evaluation of ``conditions.py``.

Differential cases: ``cases_builtins.txt``, ``cases_control.txt``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import ShellError
from ..conditions import evaluate_test

if TYPE_CHECKING:
    from ..interpreter import Interpreter


def builtin_test(sh: Interpreter, args: list[str]) -> int:
    try:
        return 0 if evaluate_test(sh, args) else 1
    except ShellError as exc:
        sh.error(f"test: {exc.message}")
        return 2


_FAST_INT = {
    "-eq": int.__eq__,
    "-ne": int.__ne__,
    "-lt": int.__lt__,
    "-le": int.__le__,
    "-gt": int.__gt__,
    "-ge": int.__ge__,
}


def builtin_bracket(sh: Interpreter, args: list[str]) -> int:
    if len(args) == 4:  # the common `[ a -op b ]` on plain numbers, without the parser
        cmp = _FAST_INT.get(args[1])
        a, b = args[0], args[2]
        if (
            cmp is not None
            and args[3] == "]"
            and a.isdigit()
            and b.isdigit()
            and a.isascii()
            and b.isascii()
            and len(a) < 19
            and len(b) < 19
        ):
            return 0 if cmp(int(a), int(b)) else 1
    if not args or args[-1] != "]":
        sh.error("[: missing `]'")
        return 2
    try:
        return 0 if evaluate_test(sh, args[:-1]) else 1
    except ShellError as exc:
        sh.error(f"[: {exc.message}")
        return 2
