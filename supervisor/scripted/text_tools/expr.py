"""``expr`` (GNU coreutils): integer arithmetic, comparisons and string matching.

A recursive-descent evaluator over the argument list, with GNU's precedence
(``|`` < ``&`` < comparisons < ``+ -`` < ``* / %`` < ``:``) and exit statuses: 0 for a
result that is neither null nor 0, 1 when it is, 2 for a bad expression.
"""

from __future__ import annotations

import re

from supervisor.scripted.contract import CommandResult

from ..integers import MAX_BIG_DIGITS, big_integer
from .posix_regex import RegexError, compile_posix

_INTEGER = re.compile(r"-?\d+")
_KEYWORDS = ("match", "substr", "index", "length")


class _ExprError(Exception):
    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


Value = int | str


def _is_int(v: Value) -> bool:
    return isinstance(v, int) or _INTEGER.fullmatch(v) is not None


def _to_int(v: Value) -> int:
    if isinstance(v, int):
        return v
    if _INTEGER.fullmatch(v) is None:
        raise _ExprError("non-integer argument")
    value = big_integer(v)
    if value is None:
        raise _ExprError(f"integer too large (more than {MAX_BIG_DIGITS} digits)")
    return value


#: a result past this many bits has more than MAX_BIG_DIGITS decimal digits
_MAX_BITS = int(MAX_BIG_DIGITS * 3.3219)


def _bounded(value: int) -> int:
    if value.bit_length() > _MAX_BITS:
        raise _ExprError(f"integer too large (more than {MAX_BIG_DIGITS} digits)")
    return value


def _null(v: Value) -> bool:
    if isinstance(v, int):
        return v == 0
    return v == "" or (_INTEGER.fullmatch(v) is not None and not v.lstrip("-").strip("0"))


class _Parser:
    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.pos = 0

    def peek(self) -> str | None:
        return self.args[self.pos] if self.pos < len(self.args) else None

    def take(self, *ops: str) -> str | None:
        tok = self.peek()
        if tok is not None and tok in ops:
            self.pos += 1
            return tok
        return None

    def operand(self) -> str:
        if self.pos >= len(self.args):
            prev = self.args[self.pos - 1] if self.pos else ""
            raise _ExprError(f"syntax error: missing argument after ‘{prev}’")
        tok = self.args[self.pos]
        self.pos += 1
        return tok

    def parse(self) -> Value:
        value = self.or_()
        if self.pos < len(self.args):
            raise _ExprError(f"syntax error: unexpected argument ‘{self.args[self.pos]}’")
        return value

    def or_(self) -> Value:
        left = self.and_()
        while self.take("|"):
            right = self.and_()
            if _null(left):
                left = 0 if _null(right) else right
        return left

    def and_(self) -> Value:
        left = self.compare()
        while self.take("&"):
            right = self.compare()
            if _null(left) or _null(right):
                left = 0
        return left

    def compare(self) -> Value:
        left = self.additive()
        while (op := self.take("<", "<=", "=", "==", "!=", ">=", ">")) is not None:
            right = self.additive()
            if _is_int(left) and _is_int(right):
                a: int | str = _to_int(left)
                b: int | str = _to_int(right)
            else:
                a, b = str(left), str(right)
            result = {
                "<": a < b,  # type: ignore[operator]
                "<=": a <= b,  # type: ignore[operator]
                "=": a == b,
                "==": a == b,
                "!=": a != b,
                ">=": a >= b,  # type: ignore[operator]
                ">": a > b,  # type: ignore[operator]
            }[op]
            left = 1 if result else 0
        return left

    def additive(self) -> Value:
        left = self.multiplicative()
        while (op := self.take("+", "-")) is not None:
            right = self.multiplicative()
            a, b = _to_int(left), _to_int(right)
            left = _bounded(a + b if op == "+" else a - b)
        return left

    def multiplicative(self) -> Value:
        left = self.match()
        while (op := self.take("*", "/", "%")) is not None:
            right = self.match()
            a, b = _to_int(left), _to_int(right)
            if op == "*":
                left = _bounded(a * b)
                continue
            if b == 0:
                raise _ExprError("division by zero")
            quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            left = quotient if op == "/" else a - b * quotient
        return left

    def match(self) -> Value:
        left = self.primary()
        while self.take(":"):
            right = self.primary()
            left = _regex_match(str(left), str(right))
        return left

    def primary(self) -> Value:
        tok = self.peek()
        if tok is None:
            prev = self.args[self.pos - 1] if self.pos else ""
            raise _ExprError(f"syntax error: missing argument after ‘{prev}’")
        if tok == "(":
            self.pos += 1
            value = self.or_()
            if self.take(")") is None:
                last = self.args[self.pos - 1]
                if self.pos < len(self.args):
                    raise _ExprError(
                        f"syntax error: expecting ‘)’ instead of ‘{self.args[self.pos]}’"
                    )
                raise _ExprError(f"syntax error: expecting ‘)’ after ‘{last}’")
            return value
        if tok == ")":
            raise _ExprError("syntax error: unexpected ‘)’")
        if tok == "+":
            self.pos += 1
            return self.operand()
        if tok in _KEYWORDS:
            self.pos += 1
            if tok == "length":
                return len(str(self.primary()))
            if tok == "match":
                s = str(self.primary())
                return _regex_match(s, str(self.primary()))
            if tok == "index":
                s = str(self.primary())
                chars = str(self.primary())
                return next((i + 1 for i, c in enumerate(s) if c in chars), 0)
            s = str(self.primary())
            pos_v, len_v = self.primary(), self.primary()
            if not (_is_int(pos_v) and _is_int(len_v)):
                return ""
            start, length = _to_int(pos_v), _to_int(len_v)
            if start < 1 or length < 1:
                return ""
            return s[start - 1 : start - 1 + length]
        self.pos += 1
        return tok


def _regex_match(text: str, pattern: str) -> Value:
    try:
        regex = compile_posix(pattern, ere=False, dialect="expr")
    except RegexError as exc:
        raise _ExprError(str(exc)) from None
    m = regex.match(text)
    if regex.groups:
        if m is None or m.group(1) is None:
            return ""
        return m.group(1)
    return m.end() if m else 0


def expr(args: list[str], stdin: str | None) -> CommandResult:
    argv = list(args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        return CommandResult(
            "", "expr: missing operand\nTry 'expr --help' for more information.\n", 2
        )
    try:
        value = _Parser(argv).parse()
    except _ExprError as err:
        return CommandResult("", f"expr: {err.message}\n", err.status)
    return CommandResult(f"{value}\n", "", 1 if _null(value) else 0)
