"""Condition evaluation: the expressions of ``test`` / ``[`` and the unary and binary
operators they share with ``[[ ]]`` (the builtins are in ``builtins/test.py``, ``[[ ]]``
in ``control.py``).

There is no filesystem, so every file test (``-f``, ``-d``, ``-e``...) is false, as in
the peer's logic-only shell.

Differential cases: ``cases_builtins.txt``, ``cases_control.txt``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import ShellError
from ..integers import decimal64
from .options import option_state
from .state import NAMEREF

if TYPE_CHECKING:
    from .expansion import Expander

FILE_TESTS = frozenset("abcdefghkprsuwxGLNOSt")
UNARY = frozenset({"-" + c for c in FILE_TESTS} | {"-z", "-n", "-v", "-o", "-R"})
BINARY = frozenset(
    {"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"}
)
_SUBSCRIPT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]\Z", re.DOTALL)


class TestSyntaxError(ShellError):
    def __init__(self, message: str) -> None:
        super().__init__(message, 2)


def unary_test(sh: Expander, op: str, arg: str) -> bool:
    if op == "-n":
        return arg != ""
    if op == "-z":
        return arg == ""
    if op == "-v":
        m = _SUBSCRIPT_RE.match(arg)
        if m is not None:
            name, sub = m.group(1), m.group(2)
            if sub in ("@", "*"):
                return bool(sh.values(name))
            key: int | str = sub if sh.is_assoc(name) else sh.arith_expr(sub)
            return sh.get_item(name, key) is not None
        if arg.isdigit() and arg.isascii():
            return len(arg.lstrip("0")) < 10 and int(arg) <= len(sh.positional)
        return sh.get(arg) is not None
    if op == "-o":
        return option_state(sh, arg)
    if op == "-R":
        v = sh.vars.get(arg)
        return v is not None and bool(v.attrs & NAMEREF)
    return False  # file tests: no filesystem in a logic-only shell


def _int(text: str, cond: bool, sh: Expander) -> int:
    """An operand of ``-eq``...: in ``[[ ]]`` an arithmetic expression (``010`` is
    octal, a huge constant wraps); in ``test``/``[`` a decimal within 64 bits."""
    if cond:
        if text.isdigit() and text.isascii() and text[0] != "0" and len(text) < 19:
            return int(text)
        return sh.arith_expr(text)
    value = decimal64(text)
    if value is None:
        raise TestSyntaxError(f"{text}: integer expression expected")
    return value


def binary_test(sh: Expander, op: str, a: str, b: str, cond: bool = False) -> bool:
    if op in ("=", "=="):
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op in ("-nt", "-ot", "-ef"):
        return False
    x, y = _int(a, cond, sh), _int(b, cond, sh)
    if op == "-eq":
        return x == y
    if op == "-ne":
        return x != y
    if op == "-lt":
        return x < y
    if op == "-le":
        return x <= y
    if op == "-gt":
        return x > y
    if op == "-ge":
        return x >= y
    raise TestSyntaxError(f"{op}: binary operator expected")


class _TestParser:
    def __init__(self, sh: Expander, args: list[str]) -> None:
        self.sh = sh
        self.args = args
        self.i = 0

    def evaluate(self) -> bool:
        args = self.args
        n = len(args)
        if n == 0:
            return False
        if n == 1:
            return args[0] != ""
        if n == 2:
            if args[0] == "!":
                return args[1] == ""
            if args[0] in UNARY:
                return unary_test(self.sh, args[0], args[1])
            raise TestSyntaxError(f"{args[0]}: unary operator expected")
        if n == 3:
            if args[1] in BINARY:
                return binary_test(self.sh, args[1], args[0], args[2])
            if args[1] == "-a":
                return args[0] != "" and args[2] != ""
            if args[1] == "-o":
                return args[0] != "" or args[2] != ""
            if args[0] == "!":
                return not _TestParser(self.sh, args[1:]).evaluate()
            if args[0] == "(" and args[2] == ")":
                return args[1] != ""
            raise TestSyntaxError(f"{args[1]}: binary operator expected")
        if n == 4:
            if args[0] == "!":
                return not _TestParser(self.sh, args[1:]).evaluate()
            if args[0] == "(" and args[3] == ")":
                return _TestParser(self.sh, args[1:3]).evaluate()
        result = self.or_expr()
        if self.i < n:
            raise TestSyntaxError(f"{args[self.i]}: too many arguments")
        return result

    def peek(self) -> str | None:
        return self.args[self.i] if self.i < len(self.args) else None

    def or_expr(self) -> bool:
        result = self.and_expr()
        while self.peek() == "-o":
            self.i += 1
            right = self.and_expr()
            result = result or right
        return result

    def and_expr(self) -> bool:
        result = self.not_expr()
        while self.peek() == "-a":
            self.i += 1
            right = self.not_expr()
            result = result and right
        return result

    def not_expr(self) -> bool:
        if self.peek() == "!":
            self.i += 1
            return not self.not_expr()
        return self.primary()

    def primary(self) -> bool:
        args, i = self.args, self.i
        if i >= len(args):
            raise TestSyntaxError("argument expected")
        tok = args[i]
        if tok == "(":
            self.i += 1
            result = self.or_expr()
            if self.peek() != ")":
                raise TestSyntaxError("`)' expected")
            self.i += 1
            return result
        if i + 2 < len(args) and args[i + 1] in BINARY:
            self.i += 3
            return binary_test(self.sh, args[i + 1], tok, args[i + 2])
        if tok in UNARY and i + 1 < len(args):
            self.i += 2
            return unary_test(self.sh, tok, args[i + 1])
        self.i += 1
        return tok != ""


def evaluate_test(sh: Expander, args: list[str]) -> bool:
    """The truth of ``test ARGS`` (POSIX's rules by argument count, then ``-a``/``-o``/``!``/
    parentheses); raises TestSyntaxError for a malformed expression."""
    return _TestParser(sh, args).evaluate()
