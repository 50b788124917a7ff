"""Bash integer arithmetic, compiled once per expression text into Python closures.

Semantics follow bash 5.2: signed 64-bit wraparound, C division (truncation toward
zero), ``**`` by modular exponentiation (a huge exponent cannot stall the host), shift
counts masked to 6 bits, ``&&``/``||``/``?:`` short-circuit, and a variable whose value is
not a number is itself evaluated as an expression (bounded recursion).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
_MOD = 2**64
_MAX_NESTING = 100
MAX_RECURSION = 64


class ArithError(Exception):
    """An arithmetic error; rendered as ``<expr>: <message> (error token is "<tok>")``."""

    def __init__(self, message: str, token: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.token = token

    def render(self, expr: str) -> str:
        if self.token is None:
            return f"{expr}: {self.message}"
        return f'{expr}: {self.message} (error token is "{self.token}")'


class ArithEnv(Protocol):
    """What an expression needs from the shell: integer views of variables."""

    def arith_get(self, name: str) -> int: ...

    def arith_set(self, name: str, value: int) -> None: ...

    def arith_get_item(self, name: str, key: str, index: Callable[[ArithEnv], int]) -> int: ...

    def arith_set_item(
        self, name: str, key: str, index: Callable[[ArithEnv], int], value: int
    ) -> None: ...


Fn = Callable[[ArithEnv], int]


def wrap(v: int) -> int:
    """Two's-complement 64-bit wraparound."""
    if INT_MIN <= v <= INT_MAX:
        return v
    return ((v - INT_MIN) % _MOD) + INT_MIN


_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<num>[0-9][0-9A-Za-z_@#]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><<=|>>=|\*\*|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&^|]=|[-+*/%<>=!~&^|?:,()\[\]])"
    r")"
)
_DIGIT_VALUE = {
    **{c: i for i, c in enumerate("0123456789")},
    **{c: 10 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")},
    **{c: 36 + i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")},
    "@": 62,
    "_": 63,
}


def parse_number(text: str) -> int:
    """An integer constant: decimal, ``0x`` hex, ``0`` octal or ``base#digits``."""
    if "#" in text:
        base_s, _, digits = text.partition("#")
        if not base_s.isdigit() or not digits:
            raise ArithError("invalid number", text)
        base = int(base_s)
        if not 2 <= base <= 64:
            raise ArithError("invalid arithmetic base", text)
        value = 0
        for ch in digits:
            d = _DIGIT_VALUE.get(ch)
            if d is not None and base <= 36 and "A" <= ch <= "Z":
                d -= 26
            if d is None or d >= base:
                raise ArithError("value too great for base", text)
            value = value * base + d
        return wrap(value)
    if text[:2] in ("0x", "0X"):
        try:
            return wrap(int(text[2:], 16))
        except ValueError:
            raise ArithError("value too great for base", text) from None
    if len(text) > 1 and text[0] == "0":
        if not text.isdigit():
            raise ArithError("value too great for base", text)
        try:
            return wrap(int(text, 8))
        except ValueError:
            raise ArithError("value too great for base", text) from None
    if not text.isdigit():
        raise ArithError("value too great for base", text)
    return wrap(int(text))


def _div(a: int, b: int) -> int:
    if b == 0:
        raise ArithError("division by 0", None)
    q = abs(a) // abs(b)
    return wrap(-q if (a < 0) != (b < 0) else q)


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ArithError("division by 0", None)
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _pow(a: int, b: int) -> int:
    if b < 0:
        raise ArithError("exponent less than 0", None)
    return wrap(pow(a, b, _MOD))


_BINARY: dict[str, Callable[[int, int], int]] = {
    "*": lambda a, b: wrap(a * b),
    "/": _div,
    "%": _mod,
    "+": lambda a, b: wrap(a + b),
    "-": lambda a, b: wrap(a - b),
    "<<": lambda a, b: wrap(a << (b & 63)),
    ">>": lambda a, b: a >> (b & 63),
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b,
    "^": lambda a, b: a ^ b,
    "|": lambda a, b: a | b,
    "**": _pow,
}
# binding powers (higher binds tighter); ** is right associative
_PRECEDENCE = {
    "||": 4,
    "&&": 5,
    "|": 6,
    "^": 7,
    "&": 8,
    "==": 9,
    "!=": 9,
    "<": 10,
    ">": 10,
    "<=": 10,
    ">=": 10,
    "<<": 11,
    ">>": 11,
    "+": 12,
    "-": 12,
    "*": 13,
    "/": 13,
    "%": 13,
    "**": 14,
}
_ASSIGN_OPS = frozenset({"=", "*=", "/=", "%=", "+=", "-=", "<<=", ">>=", "&=", "^=", "|="})


class _LValue:
    """A variable or array element that can be read and assigned."""

    __slots__ = ("index", "key", "name")

    def __init__(self, name: str, key: str | None = None, index: Fn | None = None) -> None:
        self.name = name
        self.key = key
        self.index = index

    def getter(self) -> Fn:
        name, key, index = self.name, self.key, self.index
        if index is None:
            return lambda env: env.arith_get(name)
        assert key is not None
        return lambda env: env.arith_get_item(name, key, index)

    def setter(self) -> Callable[[ArithEnv, int], None]:
        name, key, index = self.name, self.key, self.index
        if index is None:
            return lambda env, v: env.arith_set(name, v)
        assert key is not None
        return lambda env, v: env.arith_set_item(name, key, index, v)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, value, offset)
        pos, n = 0, len(text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                bad = text[pos:].strip()
                raise ArithError("syntax error: invalid arithmetic operator", bad)
            kind = m.lastgroup
            if kind is None:
                break
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def rest(self) -> str:
        if self.i >= len(self.tokens):
            return ""
        return self.text[self.tokens[self.i][2] :].strip()

    def peek(self) -> str | None:
        if self.i < len(self.tokens):
            kind, value, _ = self.tokens[self.i]
            return value if kind == "op" else None
        return None

    def expect(self, op: str) -> None:
        if self.peek() != op:
            raise ArithError(f"syntax error: `{op}' expected", self.rest() or None)
        self.i += 1

    # comma < assignment < ternary < binary < unary < postfix < primary
    def comma(self) -> Fn | _LValue:
        first = self.assignment()
        if self.peek() != ",":
            return first
        fns = [_value(first)]
        while self.peek() == ",":
            self.i += 1
            fns.append(_value(self.assignment()))

        def run(env: ArithEnv) -> int:
            v = 0
            for f in fns:
                v = f(env)
            return v

        return run

    def assignment(self) -> Fn | _LValue:
        left = self.ternary()
        op = self.peek()
        if op in _ASSIGN_OPS:
            if not isinstance(left, _LValue):
                tok = self.rest()
                raise ArithError("attempted assignment to non-variable", tok)
            self.i += 1
            right = _value(self.assignment())
            setter = left.setter()
            if op == "=":

                def assign(env: ArithEnv) -> int:
                    v = right(env)
                    setter(env, v)
                    return v

                return assign
            fn = _BINARY[op[:-1]]
            getter = left.getter()

            def update(env: ArithEnv) -> int:
                v = fn(getter(env), right(env))
                setter(env, v)
                return v

            return update
        return left

    def ternary(self) -> Fn | _LValue:
        cond = self.binary(4)
        if self.peek() != "?":
            return cond
        self.i += 1
        yes = _value(self.assignment())
        self.expect(":")
        no = _value(self.assignment())
        c = _value(cond)
        return lambda env: yes(env) if c(env) else no(env)

    def binary(self, min_prec: int) -> Fn | _LValue:
        left = self.unary()
        while True:
            op = self.peek()
            prec = _PRECEDENCE.get(op) if op is not None else None
            if prec is None or prec < min_prec:
                return left
            self.i += 1
            token = self.rest()
            right = _value(self.binary(prec if op == "**" else prec + 1))
            lf = _value(left)
            if op == "&&":
                left = _and(lf, right)
            elif op == "||":
                left = _or(lf, right)
            elif op in ("/", "%", "**"):
                left = _checked(_BINARY[op], lf, right, token)
            else:
                left = _binop(_BINARY[op], lf, right)  # type: ignore[index]

    def unary(self) -> Fn | _LValue:
        op = self.peek()
        if op in ("++", "--"):
            self.i += 1
            target = self.unary()
            if not isinstance(target, _LValue):
                raise ArithError("syntax error: operand expected", self.rest() or None)
            getter, setter = target.getter(), target.setter()
            delta = 1 if op == "++" else -1

            def pre(env: ArithEnv) -> int:
                v = wrap(getter(env) + delta)
                setter(env, v)
                return v

            return pre
        if op in ("-", "+", "!", "~"):
            self.i += 1
            inner = _value(self.unary())
            if op == "-":
                return lambda env: wrap(-inner(env))
            if op == "+":
                return inner
            if op == "!":
                return lambda env: int(not inner(env))
            return lambda env: ~inner(env)
        return self.postfix()

    def postfix(self) -> Fn | _LValue:
        operand = self.primary()
        op = self.peek()
        if op in ("++", "--") and isinstance(operand, _LValue):
            self.i += 1
            getter, setter = operand.getter(), operand.setter()
            delta = 1 if op == "++" else -1

            def post(env: ArithEnv) -> int:
                v = getter(env)
                setter(env, wrap(v + delta))
                return v

            return post
        return operand

    def primary(self) -> Fn | _LValue:
        if self.i >= len(self.tokens):
            raise ArithError("syntax error: operand expected", self.rest() or None)
        kind, value, offset = self.tokens[self.i]
        if kind == "num":
            self.i += 1
            n = parse_number(value)
            return lambda env: n
        if kind == "name":
            self.i += 1
            if self.peek() == "[":
                self.i += 1
                start = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
                self.depth += 1
                index = _value(self.comma())
                self.depth -= 1
                end = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
                self.expect("]")
                return _LValue(value, self.text[start:end].strip(), index)
            return _LValue(value)
        if value == "(":
            self.i += 1
            self.depth += 1
            if self.depth > _MAX_NESTING:
                raise ArithError("expression recursion level exceeded", self.rest() or None)
            inner = self.comma()
            self.depth -= 1
            self.expect(")")
            return _value(inner)
        raise ArithError("syntax error: operand expected", self.text[offset:].strip())


def _value(node: Fn | _LValue) -> Fn:
    return node.getter() if isinstance(node, _LValue) else node


def _and(a: Fn, b: Fn) -> Fn:
    return lambda env: 1 if a(env) and b(env) else 0


def _or(a: Fn, b: Fn) -> Fn:
    return lambda env: 1 if a(env) or b(env) else 0


def _binop(fn: Callable[[int, int], int], a: Fn, b: Fn) -> Fn:
    return lambda env: fn(a(env), b(env))


def _checked(fn: Callable[[int, int], int], a: Fn, b: Fn, token: str) -> Fn:
    """A binary operator that can fail: the error names the offending operand text."""

    def run(env: ArithEnv) -> int:
        x, y = a(env), b(env)
        try:
            return fn(x, y)
        except ArithError as exc:
            exc.token = token
            raise

    return run


_CACHE: dict[str, Fn] = {}
_CACHE_MAX = 4096


def _zero(env: ArithEnv) -> int:
    return 0


def compile_arith(text: str) -> Fn:
    """Compile (and cache) an expression; raises ArithError on a syntax error."""
    fn = _CACHE.get(text)
    if fn is not None:
        return fn
    if not text.strip():
        fn = _zero
    else:
        p = _Parser(text)
        node = p.comma()
        if p.i < len(p.tokens):
            raise ArithError("syntax error in expression", p.rest())
        fn = _value(node)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[text] = fn
    return fn


def evaluate(text: str, env: ArithEnv) -> int:
    return compile_arith(text)(env)


def string_to_int(value: str, env: ArithEnv) -> int:
    """The integer value of a variable's text: a number, or an expression evaluated in
    turn (``x="y+1"``); empty is 0. The caller bounds the recursion."""
    if value.isdigit() and value.isascii() and (value[0] != "0" or len(value) == 1):
        return wrap(int(value))
    s = value.strip()
    if not s:
        return 0
    return compile_arith(s)(env)
