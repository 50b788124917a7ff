"""Bash integer arithmetic, compiled once per expression text into a Python function.

Semantics follow bash 5.2: signed 64-bit wraparound, C division (truncation toward
zero), ``**`` by modular exponentiation (a huge exponent cannot stall the host), shift
counts masked to 6 bits, ``&&``/``||``/``?:`` short-circuit, and a variable whose value is
not a number is itself evaluated as an expression (bounded recursion).

Differential cases: ``cases_arith.txt``, ``cases_int64.txt``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, Protocol

from ..budget import need, spend
from ..integers import INT_MAX, INT_MIN, is_decimal, wrap, wrap_digits
from .arith_vm import compile_program

_MAX_NESTING = 100
MAX_RECURSION = 64


class Rest:
    """The text from an operator on, for an error message: kept as an offset into the
    expression and cut only when an error is reported (a long expression must not
    keep a copy of its tail per operator)."""

    __slots__ = ("offset", "text")

    def __init__(self, text: str, offset: int) -> None:
        self.text = text
        self.offset = offset

    def __str__(self) -> str:
        return self.text[self.offset :].strip()


class ArithError(Exception):
    """An arithmetic error; rendered as ``<expr>: <message> (error token is "<tok>")``."""

    def __init__(self, message: str, token: str | Rest | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.token = None if token is None else str(token)

    def render(self, expr: str) -> str:
        if self.token is None:
            return f"{expr}: {self.message}"
        return f'{expr}: {self.message} (error token is "{self.token}")'


class ArithEnv(Protocol):
    """What an expression needs from the shell: integer views of variables.

    ``vars`` maps names to objects with ``value``, ``num`` and ``numsrc``: generated
    code reads ``num`` directly while ``numsrc is value`` (the cached integer of that
    exact string), and calls ``arith_get`` otherwise."""

    vars: Any

    def arith_get(self, name: str) -> int: ...

    def arith_set(self, name: str, value: int) -> int: ...

    def arith_get_item(self, name: str, key: str, index: Callable[[ArithEnv], int]) -> int: ...

    def arith_set_item(
        self, name: str, key: str, index: Callable[[ArithEnv], int], value: int
    ) -> int: ...


Fn = Callable[[ArithEnv], int]


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


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def parse_number(text: str) -> int:
    """An integer constant: decimal, ``0x`` hex, ``0`` octal or ``base#digits``; any
    length, accumulated modulo 2**64 as bash does."""
    if "#" in text:
        base_s, _, digits = text.partition("#")
        if not is_decimal(base_s) or not digits:
            raise ArithError("invalid number", text)
        base = int(base_s) if len(base_s) < 4 else 0
        if not 2 <= base <= 64:
            raise ArithError("invalid arithmetic base", text)
        return _based(digits, base, text)
    if text[:2] in ("0x", "0X"):
        return _based(text[2:], 16, text) if len(text) > 2 else 0
    if not is_decimal(text):
        raise ArithError("value too great for base", text)
    if len(text) > 1 and text[0] == "0":
        return _based(text, 8, text)
    return wrap_digits(text, 10)


def _based(digits: str, base: int, text: str) -> int:
    if base <= 36:
        if _valid_digits(base).fullmatch(digits) is None:
            raise ArithError("value too great for base", text)
        return wrap_digits(digits.lower(), base)
    values = [_DIGIT_VALUE.get(ch, 64) for ch in digits]
    if max(values) >= base:
        raise ArithError("value too great for base", text)
    spend(len(values) // 8)
    value = 0
    for d in values:
        value = (value * base + d) & 0xFFFFFFFFFFFFFFFF
    return wrap(value)


@functools.cache
def _valid_digits(base: int) -> re.Pattern[str]:
    allowed = _BASE36[:base]
    return re.compile(f"[{allowed}{allowed.upper()}]+")


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
    return wrap(pow(a, b, 1 << 64))


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


# The parser builds a small tree of tuples; ``_gen`` turns it into the source of one
# Python function (variable reads inlined, 64-bit wrap checks inlined), which is compiled
# once per expression text. Node shapes:
#   ("num", n) ("var", name) ("item", name, key_text, index_node)
#   ("un", op, x) ("bin", op, a, b) ("and", a, b) ("or", a, b) ("if", c, a, b)
#   ("set", op, lvalue, x) ("pre", delta, lvalue) ("post", delta, lvalue) ("seq", [x...])
Node = tuple[Any, ...]
_LVALUES = ("var", "item")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []  # (kind, value, offset)
        pos, n = 0, len(text)
        append = self.tokens.append
        while pos < n:
            spend()
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                bad = text[pos:].strip()
                raise ArithError("syntax error: invalid arithmetic operator", bad)
            kind = m.lastgroup
            if kind is None:
                break
            append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def rest(self) -> str:
        if self.i >= len(self.tokens):
            return ""
        return self.text[self.tokens[self.i][2] :].strip()

    def lazy_rest(self) -> Rest:
        if self.i >= len(self.tokens):
            return Rest("", 0)
        return Rest(self.text, self.tokens[self.i][2])

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise ArithError("expression recursion level exceeded", self.rest() or None)

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
    def comma(self) -> Node:
        first = self.assignment()
        if self.peek() != ",":
            return first
        items = [first]
        while self.peek() == ",":
            self.i += 1
            items.append(self.assignment())
        return ("seq", items)

    def assignment(self) -> Node:
        left = self.ternary()
        op = self.peek()
        if op in _ASSIGN_OPS:
            if left[0] not in _LVALUES:
                raise ArithError("attempted assignment to non-variable", self.rest())
            self.i += 1
            token = self.lazy_rest()
            self.deeper()
            right = self.assignment()
            self.depth -= 1
            return ("set", op, left, right, token)
        return left

    def ternary(self) -> Node:
        cond = self.binary(4)
        if self.peek() != "?":
            return cond
        self.i += 1
        self.deeper()
        yes = self.assignment()
        self.expect(":")
        no = self.assignment()
        self.depth -= 1
        return ("if", cond, yes, no)

    def binary(self, min_prec: int) -> Node:
        left = self.unary()
        while True:
            op = self.peek()
            prec = _PRECEDENCE.get(op) if op is not None else None
            if prec is None or prec < min_prec:
                return left
            spend(4)
            self.i += 1
            token = self.lazy_rest()
            if op == "**":
                self.deeper()
                right = self.binary(prec)
                self.depth -= 1
            else:
                right = self.binary(prec + 1)
            if op == "&&":
                left = ("and", left, right)
            elif op == "||":
                left = ("or", left, right)
            else:
                left = ("bin", op, left, right, token)

    def unary(self) -> Node:
        op = self.peek()
        if op in ("++", "--"):
            self.i += 1
            target = self.unary()
            if target[0] not in _LVALUES:
                raise ArithError("syntax error: operand expected", self.rest() or None)
            return ("pre", 1 if op == "++" else -1, target)
        if op in ("-", "+", "!", "~"):
            self.i += 1
            self.depth += 1
            if self.depth > _MAX_NESTING:
                raise ArithError("expression recursion level exceeded", self.rest() or None)
            inner = self.unary()
            self.depth -= 1
            return inner if op == "+" else ("un", op, inner)
        return self.postfix()

    def postfix(self) -> Node:
        operand = self.primary()
        op = self.peek()
        if op in ("++", "--") and operand[0] in _LVALUES:
            self.i += 1
            return ("post", 1 if op == "++" else -1, operand)
        return operand

    def primary(self) -> Node:
        if self.i >= len(self.tokens):
            raise ArithError("syntax error: operand expected", self.rest() or None)
        kind, value, offset = self.tokens[self.i]
        if kind == "num":
            self.i += 1
            return ("num", parse_number(value))
        if kind == "name":
            self.i += 1
            if self.peek() == "[":
                self.i += 1
                start = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
                self.depth += 1
                index = self.comma()
                self.depth -= 1
                end = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
                self.expect("]")
                return ("item", value, self.text[start:end].strip(), index)
            return ("var", value)
        if value == "(":
            self.i += 1
            self.depth += 1
            if self.depth > _MAX_NESTING:
                raise ArithError("expression recursion level exceeded", self.rest() or None)
            inner = self.comma()
            self.depth -= 1
            self.expect(")")
            return inner
        raise ArithError("syntax error: operand expected", self.text[offset:].strip())


# ------------------------------------------------------------------ code generation

_INLINE_OPS = {"+": "+", "-": "-", "*": "*"}
_CMP_OPS = frozenset({"<", ">", "<=", ">=", "==", "!="})
_BIT_OPS = frozenset({"&", "|", "^"})


class _Gen:
    """Emits one Python expression per node; helpers live in ``_HELPERS``."""

    def __init__(self) -> None:
        self.consts: list[object] = []
        self.uses_vars = False

    def const(self, value: object) -> str:
        self.consts.append(value)
        return f"_k{len(self.consts) - 1}"

    def wrapped(self, expr: str) -> str:
        return f"(_t if {INT_MIN} <= (_t := {expr}) <= {INT_MAX} else _wrap(_t))"

    def expr(self, n: Node) -> str:
        kind = n[0]
        if kind == "num":
            return repr(n[1])
        if kind == "var":
            self.uses_vars = True
            name = repr(n[1])
            return (
                f"(_v.num if (_v := _vars.get({name})) is not None and _v.numsrc is _v.value"
                f" else env.arith_get({name}))"
            )
        if kind == "item":
            index = self.func(n[3])
            return f"env.arith_get_item({n[1]!r}, {n[2]!r}, {index})"
        if kind == "un":
            inner = self.expr(n[2])
            if n[1] == "-":
                return self.wrapped(f"-{inner}")
            if n[1] == "!":
                return f"(0 if {inner} else 1)"
            return f"(~{inner})"
        if kind == "bin":
            op, a, b = n[1], self.expr(n[2]), self.expr(n[3])
            if op in _INLINE_OPS:
                return self.wrapped(f"({a} {op} {b})")
            if op in _CMP_OPS:
                return f"(1 if {a} {op} {b} else 0)"
            if op in _BIT_OPS:
                return f"({a} {op} {b})"
            return f"_binop({op!r}, {a}, {b}, {self.const(n[4])})"
        if kind == "and":
            return f"(1 if {self.expr(n[1])} and {self.expr(n[2])} else 0)"
        if kind == "or":
            return f"(1 if {self.expr(n[1])} or {self.expr(n[2])} else 0)"
        if kind == "if":
            return f"({self.expr(n[2])} if {self.expr(n[1])} else {self.expr(n[3])})"
        if kind == "seq":
            parts = ", ".join(self.expr(x) for x in n[1])
            return f"({parts})[-1]"
        if kind == "set":
            op, target, value = n[1], n[2], self.expr(n[3])
            if op != "=":
                value = f"_binop({op[:-1]!r}, {self.expr(target)}, {value}, {self.const(n[4])})"
            return self.store(target, value)
        if kind in ("pre", "post"):
            target = n[2]
            current = self.expr(target)
            new = self.store(target, self.wrapped(f"({current} + {n[1]})"))
            if kind == "pre":
                return new
            return f"((_o := {current}), {new}, _o)[2]"
        raise ArithError("syntax error", None)  # pragma: no cover - parser never builds it

    def store(self, target: Node, value: str) -> str:
        if target[0] == "var":
            return f"env.arith_set({target[1]!r}, {value})"
        index = self.func(target[3])
        return f"env.arith_set_item({target[1]!r}, {target[2]!r}, {index}, {value})"

    def func(self, n: Node) -> str:
        """A separately compiled function for an index expression (lazy evaluation)."""
        return self.const(_compile_tree(n))


def _binop(op: str, a: int, b: int, token: Rest) -> int:
    try:
        return _BINARY[op](a, b)
    except ArithError as exc:
        exc.token = str(token)
        raise


#: expressions past these sizes run on the stack machine (``arith_vm``): Python's
#: compiler refuses deep nesting and costs memory out of proportion to a long expression
_CODEGEN_NODES = 400
_CODEGEN_DEPTH = 24


def _small(node: Node, budget: list[int], depth: int = 0) -> bool:
    """Whether the tree has at most ``budget[0]`` nodes and ``_CODEGEN_DEPTH`` levels
    (stops as soon as it knows: never recurses past the depth limit)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > _CODEGEN_DEPTH:
        return False
    for child in node[1:]:
        if type(child) is tuple and child and type(child[0]) is str:
            if not _small(child, budget, depth + 1):
                return False
        elif type(child) is list:
            for x in child:
                if not _small(x, budget, depth + 1):
                    return False
    return True


def _compile_tree(node: Node) -> Fn:
    if not _small(node, [_CODEGEN_NODES]):
        return compile_program(node, _compile_tree, _binop)
    gen = _Gen()
    body = gen.expr(node)
    lines = ["def _f(env):"]
    if gen.uses_vars:
        lines.append("    _vars = env.vars")
    lines.append(f"    return {body}")
    namespace: dict[str, object] = {"_wrap": wrap, "_binop": _binop}
    for i, value in enumerate(gen.consts):
        namespace[f"_k{i}"] = value
    exec(compile("\n".join(lines), "<arithmetic>", "exec"), namespace)
    return namespace["_f"]  # type: ignore[return-value]


#: bytes of parse and compile work per character of a long expression (tokens, tree and
#: program), checked against the execution's memory budget before it starts
_WORK_PER_CHAR = 160

_CACHE: dict[str, Fn] = {}
_CACHE_MAX = 4096
#: the cache holds at most this much expression text (its programs are a small multiple)
_CACHE_BYTES = 1 << 20
_CACHE_TEXT_MAX = 4096
_cached_bytes = 0


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
        if len(text) > 4096:
            need(len(text) * _WORK_PER_CHAR)  # tokens, tree and program
        p = _Parser(text)
        node = p.comma()
        if p.i < len(p.tokens):
            raise ArithError("syntax error in expression", p.rest())
        try:
            fn = _compile_tree(node)
        except RecursionError:
            raise ArithError("expression recursion level exceeded", text.strip()) from None
    global _cached_bytes
    if len(text) > _CACHE_TEXT_MAX:
        return fn  # a long expression is compiled each time: its program is as large
    if len(_CACHE) >= _CACHE_MAX or _cached_bytes > _CACHE_BYTES:
        _CACHE.clear()
        _cached_bytes = 0
    _CACHE[text] = fn
    _cached_bytes += len(text) + 64
    return fn


def evaluate(text: str, env: ArithEnv) -> int:
    return compile_arith(text)(env)


def string_to_int(value: str, env: ArithEnv) -> int:
    """The integer value of a variable's text: a number, or an expression evaluated in
    turn (``x="y+1"``); empty is 0. The caller bounds the recursion."""
    if value.isdigit() and value.isascii() and (value[0] != "0" or len(value) == 1):
        return wrap_digits(value, 10)
    s = value.strip()
    if not s:
        return 0
    return compile_arith(s)(env)
