"""awk source to a small AST of tuples (gawk's grammar and precedence).

Nodes are tuples whose first element names them, e.g. ``("binop", "+", a, b)``; the
compiler (``compiler.py``) turns them into Python closures once per program.

Precedence, lowest first: assignment, ``?:``, ``||``, ``&&``, ``in``, ``~ !~``,
comparisons, concatenation, ``+ -``, ``* / %``, unary ``+ - !``, ``^``, ``++ --``,
``$``, grouping. In ``print``, an unparenthesized ``>`` is output redirection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...budget import spend
from .lexer import AwkSyntaxError, Token, tokenize

Node = tuple[Any, ...]

_ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "^=", "**="})
_COMPARE_OPS = frozenset({"<", "<=", "==", "!=", ">", ">="})
_CONCAT_START = frozenset(
    {"NUMBER", "STRING", "ERE", "NAME", "FUNC_NAME", "BUILTIN", "$", "(", "!", "++", "--",
     "-", "+"}
)  # fmt: skip
_TERMINATORS = frozenset({";", "NEWLINE", "}", "EOF"})


@dataclass(slots=True)
class Function:
    name: str
    params: list[str]
    body: Node


@dataclass(slots=True)
class Program:
    begin: list[Node] = field(default_factory=list)
    end: list[Node] = field(default_factory=list)
    #: (pattern or None, end pattern of a range or None, action or None for "print")
    rules: list[tuple[Node | None, Node | None, Node | None]] = field(default_factory=list)
    functions: dict[str, Function] = field(default_factory=dict)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.in_function = False
        self.loop_depth = 0

    # -- token helpers
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def kind(self, offset: int = 0) -> str:
        return self.tokens[min(self.pos + offset, len(self.tokens) - 1)].kind

    def advance(self) -> Token:
        spend()  # a program of megabytes parses under the deadline
        tok = self.tokens[self.pos]
        if tok.kind != "EOF":
            self.pos += 1
        return tok

    def accept(self, kind: str) -> bool:
        if self.tok.kind == kind:
            self.advance()
            return True
        return False

    def expect(self, kind: str) -> Token:
        if self.tok.kind != kind:
            raise self.error()
        return self.advance()

    def error(self, message: str = "syntax error") -> AwkSyntaxError:
        tok = self.tok
        return AwkSyntaxError(message, tok.line, tok.column)

    def newlines(self) -> None:
        while self.tok.kind == "NEWLINE":
            self.advance()

    def separators(self) -> None:
        while self.tok.kind in ("NEWLINE", ";"):
            self.advance()

    # -- program
    def program(self) -> Program:
        prog = Program()
        self.separators()
        while self.tok.kind != "EOF":
            kind = self.tok.kind
            if kind in ("BEGIN", "END", "BEGINFILE", "ENDFILE"):
                self.advance()
                self.newlines()
                if self.tok.kind != "{":
                    raise self.error(f"{kind} blocks must have an action part")
                action = self.action()
                if kind in ("BEGIN", "BEGINFILE"):
                    prog.begin.append(action)
                else:
                    prog.end.append(action)
            elif kind in ("function", "func"):
                fn = self.function()
                if fn.name in prog.functions:
                    raise self.error(f"function `{fn.name}' previously defined")
                prog.functions[fn.name] = fn
            elif kind == "{":
                prog.rules.append((None, None, self.action()))
            else:
                pattern = self.expr()
                end: Node | None = None
                if self.accept(","):
                    self.newlines()
                    end = self.expr()
                rule_action = self.action() if self.tok.kind == "{" else None
                prog.rules.append((pattern, end, rule_action))
            self.separators()
        return prog

    def function(self) -> Function:
        self.advance()
        name_tok = self.advance()
        if name_tok.kind not in ("NAME", "FUNC_NAME"):
            raise self.error()
        self.expect("(")
        params: list[str] = []
        self.newlines()
        while self.tok.kind != ")":
            params.append(str(self.expect("NAME").value))
            self.newlines()
            if not self.accept(","):
                break
            self.newlines()
        self.expect(")")
        self.newlines()
        self.in_function = True
        try:
            body = self.action()
        finally:
            self.in_function = False
        return Function(str(name_tok.value), params, body)

    def action(self) -> Node:
        self.expect("{")
        stmts = self.statements()
        self.expect("}")
        return ("block", stmts)

    def statements(self) -> list[Node]:
        stmts: list[Node] = []
        self.separators()
        while self.tok.kind not in ("}", "EOF"):
            stmts.append(self.statement())
            self.separators()
        return stmts

    # -- statements
    def end_simple(self) -> None:
        if self.tok.kind in (";", "NEWLINE"):
            self.advance()
            return
        if self.tok.kind in ("}", "EOF"):
            return
        raise self.error()

    def body(self) -> Node:
        self.newlines()
        if self.tok.kind == ";":
            self.advance()
            return ("block", [])
        return self.statement()

    def statement(self) -> Node:
        kind = self.tok.kind
        if kind == "{":
            block = self.action()
            return block
        if kind == "if":
            self.advance()
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            then = self.body()
            saved = self.pos
            self.separators()
            if self.accept("else"):
                return ("if", cond, then, self.body())
            self.pos = saved
            return ("if", cond, then, None)
        if kind == "while":
            self.advance()
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            if self.tok.kind == ";":
                self.advance()
                return ("while", cond, ("block", []))
            return ("while", cond, self.loop_body())
        if kind == "do":
            self.advance()
            body = self.loop_body()
            self.separators()
            self.expect("while")
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            self.end_simple()
            return ("do", body, cond)
        if kind == "for":
            return self.for_statement()
        if kind in ("break", "continue"):
            self.advance()
            if not self.loop_depth:
                raise self.error(f"`{kind}' is not allowed outside a loop")
            self.end_simple()
            return (kind,)
        if kind in ("next", "nextfile"):
            self.advance()
            self.end_simple()
            return (kind,)
        if kind in ("exit", "return"):
            self.advance()
            if kind == "return" and not self.in_function:
                raise self.error("`return' used outside function context")
            value = None if self.tok.kind in _TERMINATORS else self.expr()
            self.end_simple()
            return (kind, value)
        if kind == "delete":
            self.advance()
            paren = self.accept("(")
            name = str(self.expect("NAME").value)
            keys = None
            if self.accept("["):
                keys = self.expr_list()
                self.expect("]")
            if paren:
                self.expect(")")
            self.end_simple()
            return ("delete", name, keys)
        if kind in ("print", "printf"):
            return self.print_statement()
        if kind == ";":
            self.advance()
            return ("block", [])
        node = self.expr()
        self.end_simple()
        return ("expr", node)

    def loop_body(self) -> Node:
        self.loop_depth += 1
        try:
            return self.body()
        finally:
            self.loop_depth -= 1

    def for_statement(self) -> Node:
        self.advance()
        self.expect("(")
        # for (name in array) / for ((name) in array)
        if (
            self.kind() == "NAME"
            and self.kind(1) == "in"
            and self.kind(2) == "NAME"
            and (self.kind(3) == ")")
        ):
            var = str(self.advance().value)
            self.advance()
            array = str(self.advance().value)
            self.expect(")")
            return ("forin", var, array, self.loop_body())
        init = None if self.tok.kind == ";" else self.simple_statement()
        self.expect(";")
        self.newlines()
        cond = None if self.tok.kind == ";" else self.expr()
        self.expect(";")
        self.newlines()
        step = None if self.tok.kind == ")" else self.simple_statement()
        self.expect(")")
        if self.tok.kind == ";":
            self.advance()
            return ("for", init, cond, step, ("block", []))
        return ("for", init, cond, step, self.loop_body())

    def simple_statement(self) -> Node:
        return ("expr", self.expr())

    def print_statement(self) -> Node:
        name = str(self.advance().kind)
        args: list[Node] = []
        if self.tok.kind not in _TERMINATORS and self.tok.kind not in (">", ">>", "|"):
            args = self.expr_list(no_gt=True)
            if len(args) == 1 and args[0][0] == "group":
                args = list(args[0][1])
        redirect: tuple[str, Node] | None = None
        if self.tok.kind in (">", ">>", "|"):
            op = str(self.advance().kind)
            redirect = (op, self.concatenation(no_gt=True))
        if name == "printf" and not args:
            raise self.error()
        self.end_simple()
        return (name, args, redirect)

    # -- expressions
    def expr_list(self, no_gt: bool = False) -> list[Node]:
        items = [self.expr(no_gt=no_gt)]
        while self.accept(","):
            self.newlines()
            items.append(self.expr(no_gt=no_gt))
        return items

    def expr(self, no_gt: bool = False, no_in: bool = False) -> Node:
        left = self.ternary(no_gt, no_in)
        if self.tok.kind in _ASSIGN_OPS and left[0] in ("var", "field", "index"):
            op = str(self.advance().kind)
            self.newlines()
            right = self.expr(no_gt, no_in)
            return ("assign", op, left, right)
        return left

    def ternary(self, no_gt: bool, no_in: bool) -> Node:
        cond = self.or_(no_gt, no_in)
        if self.accept("?"):
            self.newlines()
            a = self.expr(no_gt, no_in)
            self.newlines()
            self.expect(":")
            self.newlines()
            b = self.expr(no_gt, no_in)
            return ("cond", cond, a, b)
        return cond

    def or_(self, no_gt: bool, no_in: bool) -> Node:
        left = self.and_(no_gt, no_in)
        while self.accept("||"):
            self.newlines()
            left = ("or", left, self.and_(no_gt, no_in))
        return left

    def and_(self, no_gt: bool, no_in: bool) -> Node:
        left = self.in_(no_gt, no_in)
        while self.accept("&&"):
            self.newlines()
            left = ("and", left, self.in_(no_gt, no_in))
        return left

    def in_(self, no_gt: bool, no_in: bool) -> Node:
        left = self.match(no_gt)
        while not no_in and self.tok.kind == "in":
            self.advance()
            array = str(self.expect("NAME").value)
            keys = list(left[1]) if left[0] == "group" else [left]
            left = ("in", keys, array)
        return left

    def match(self, no_gt: bool) -> Node:
        left = self.comparison(no_gt)
        while self.tok.kind in ("~", "!~"):
            negate = self.advance().kind == "!~"
            left = ("match", negate, left, self.comparison(no_gt))
        return left

    def comparison(self, no_gt: bool) -> Node:
        left = self.concatenation(no_gt)
        kind = self.tok.kind
        if kind in _COMPARE_OPS and not (no_gt and kind == ">"):
            self.advance()
            return ("cmp", kind, left, self.concatenation(no_gt))
        if kind == "|" and self.kind(1) == "getline":
            self.advance()
            self.advance()
            target = self.optional_lvalue()
            return ("getline", target, ("pipe", left))
        return left

    def concatenation(self, no_gt: bool) -> Node:
        parts = [self.additive()]
        while self.tok.kind in _CONCAT_START and self.tok.kind not in ("-", "+"):
            if self.tok.kind == "in":  # pragma: no cover - "in" is not a concat start
                break
            parts.append(self.additive())
        return parts[0] if len(parts) == 1 else ("concat", parts)

    def additive(self) -> Node:
        left = self.multiplicative()
        while self.tok.kind in ("+", "-"):
            op = str(self.advance().kind)
            left = ("binop", op, left, self.multiplicative())
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        while self.tok.kind in ("*", "/", "%"):
            op = str(self.advance().kind)
            left = ("binop", op, left, self.unary())
        return left

    def unary(self) -> Node:
        kind = self.tok.kind
        if kind == "!":
            self.advance()
            return ("not", self.unary())
        if kind in ("-", "+"):
            self.advance()
            return ("unary", kind, self.unary())
        return self.power()

    def power(self) -> Node:
        base = self.postfix()
        if self.tok.kind in ("^", "**"):
            self.advance()
            # Right-associative, and the exponent may carry a sign: 2^-1.
            return ("binop", "^", base, self.unary_exponent())
        return base

    def unary_exponent(self) -> Node:
        if self.tok.kind in ("-", "+"):
            op = str(self.advance().kind)
            return ("unary", op, self.unary_exponent())
        if self.tok.kind == "!":
            self.advance()
            return ("not", self.unary_exponent())
        return self.power()

    def postfix(self) -> Node:
        node = self.primary()
        if self.tok.kind in ("++", "--") and node[0] in ("var", "field", "index"):
            op = self.advance().kind
            return ("postinc" if op == "++" else "postdec", node)
        return node

    def optional_lvalue(self) -> Node | None:
        kind = self.tok.kind
        if kind == "NAME":
            return self.variable()
        if kind == "$":
            self.advance()
            return ("field", self.field_operand())
        return None

    def variable(self) -> Node:
        name = str(self.advance().value)
        if self.accept("["):
            keys = self.expr_list()
            self.expect("]")
            return ("index", name, keys)
        return ("var", name)

    def field_operand(self) -> Node:
        kind = self.tok.kind
        if kind in ("++", "--"):
            self.advance()
            target = self.primary()
            return ("preinc" if kind == "++" else "predec", target)
        if kind in ("-", "+", "!"):
            self.advance()
            inner = self.field_operand()
            return ("not", inner) if kind == "!" else ("unary", kind, inner)
        return self.primary()

    def primary(self) -> Node:
        tok = self.tok
        kind = tok.kind
        if kind == "NUMBER":
            self.advance()
            return ("num", tok.value)
        if kind == "STRING":
            self.advance()
            return ("str", tok.value)
        if kind == "ERE":
            self.advance()
            return ("ere", tok.value)
        if kind == "$":
            self.advance()
            return ("field", self.field_operand())
        if kind in ("++", "--"):
            self.advance()
            target = self.primary()
            if target[0] not in ("var", "field", "index"):
                raise self.error()
            return ("preinc" if kind == "++" else "predec", target)
        if kind == "-" or kind == "+" or kind == "!":
            return self.unary()
        if kind == "(":
            self.advance()
            self.newlines()
            first = self.expr()
            self.newlines()
            if self.accept(","):
                self.newlines()
                items = [first, *self.expr_list()]
                self.newlines()
                self.expect(")")
                return ("group", items)
            self.expect(")")
            return ("paren", first)
        if kind == "NAME":
            return self.variable()
        if kind == "FUNC_NAME":
            name = str(self.advance().value)
            self.expect("(")
            args = self.call_args()
            return ("call", name, args)
        if kind == "BUILTIN":
            name = str(self.advance().value)
            if self.accept("("):
                args = self.call_args()
            elif name == "length":
                args = []
            else:
                raise self.error()
            return ("builtin", name, args)
        if kind == "getline":
            self.advance()
            into = self.optional_lvalue()
            source: Node | None = None
            if self.tok.kind == "<":
                self.advance()
                source = ("file", self.primary_no_concat())
            return ("getline", into, source)
        raise self.error()

    def primary_no_concat(self) -> Node:
        node = self.primary()
        if self.tok.kind in ("++", "--") and node[0] in ("var", "field", "index"):
            op = self.advance().kind
            return ("postinc" if op == "++" else "postdec", node)
        return node

    def call_args(self) -> list[Node]:
        args: list[Node] = []
        self.newlines()
        if self.accept(")"):
            return args
        args = self.expr_list()
        self.newlines()
        self.expect(")")
        return args


def parse(source: str) -> Program:
    tokens = tokenize(source)
    try:
        return _Parser(tokens).program()
    except RecursionError:
        raise AwkSyntaxError("program nested too deeply", 1, 0) from None
