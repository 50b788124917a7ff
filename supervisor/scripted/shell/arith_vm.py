"""A stack machine for large arithmetic expressions.

``arithmetic`` compiles an expression into one Python function, which is the fastest way to
run the short expressions scripts are made of; but Python's compiler refuses deep nesting
("too many nested parentheses" past a few dozen operators in a row) and takes memory out of
all proportion to a long expression. An expression with many operators, or nested deep,
is flattened here instead into a list of instructions run by one loop: no recursion at run
time, memory proportional to the text, and fuel spent as it runs (the deadline holds).
Semantics are those of the generated code, node for node.

Differential cases: ``cases_int64.txt``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..budget import spend
from ..integers import INT_MAX, INT_MIN, wrap

Node = tuple[Any, ...]
Fn = Callable[[Any], int]
#: ``binop(op, a, b, token)``: the other binary operators, as the generated code runs them
BinOp = Callable[[str, int, int, Any], int]

(
    PUSH, VAR, ITEM, NEG, NOT, INV, BIN, JZ, JNZ, JF, JMP, BOOL, POP, SET, SET_ITEM, ADD,
) = range(16)  # fmt: skip

_FUEL_EVERY = 256


class Program:
    """A compiled expression: call it with the shell (an ``ArithEnv``)."""

    __slots__ = ("binop", "code", "cost")

    def __init__(self, code: list[tuple[Any, ...]], binop: BinOp) -> None:
        self.code = code
        self.cost = len(code)
        self.binop = binop

    def __call__(self, env: Any) -> int:
        _binop = self.binop
        code = self.code
        stack: list[int] = []
        push, pop = stack.append, stack.pop
        pc, end = 0, len(code)
        steps = 0
        while pc < end:
            ins = code[pc]
            op = ins[0]
            pc += 1
            steps += 1
            if steps >= _FUEL_EVERY:
                spend(steps)
                steps = 0
            if op == PUSH:
                push(ins[1])
            elif op == VAR:
                name = ins[1]
                v = env.vars.get(name)
                push(v.num if v is not None and v.numsrc is v.value else env.arith_get(name))
            elif op == BIN:
                b = pop()
                a = pop()
                kind = ins[1]
                if kind == "+":
                    r = a + b
                    push(r if INT_MIN <= r <= INT_MAX else wrap(r))
                elif kind == "-":
                    r = a - b
                    push(r if INT_MIN <= r <= INT_MAX else wrap(r))
                else:
                    push(_binop(kind, a, b, ins[2]))
            elif op == ADD:
                r = pop() + ins[1]
                push(r if INT_MIN <= r <= INT_MAX else wrap(r))
            elif op == ITEM:
                push(env.arith_get_item(ins[1], ins[2], ins[3]))
            elif op == NEG:
                push(wrap(-pop()))
            elif op == NOT:
                push(0 if pop() else 1)
            elif op == INV:
                push(~pop())
            elif op == JZ:  # &&: a false left side is the result
                if stack[-1] == 0:
                    pc = ins[1]
                else:
                    pop()
            elif op == JNZ:  # ||: a true left side gives 1
                if stack[-1] != 0:
                    stack[-1] = 1
                    pc = ins[1]
                else:
                    pop()
            elif op == JF:
                if not pop():
                    pc = ins[1]
            elif op == JMP:
                pc = ins[1]
            elif op == BOOL:
                stack[-1] = 1 if stack[-1] else 0
            elif op == POP:
                pop()
            elif op == SET:
                push(env.arith_set(ins[1], pop()))
            else:  # SET_ITEM
                push(env.arith_set_item(ins[1], ins[2], ins[3], pop()))
        spend(steps)
        return stack[-1]


class _Emitter:
    def __init__(self, compile_index: Callable[[Node], Fn]) -> None:
        self.code: list[Any] = []
        self.compile_index = compile_index

    def emit(self, n: Node) -> None:
        code = self.code
        kind = n[0]
        if kind in ("bin", "and", "or"):
            # a long run of left-associative operators is a left-deep spine: walk it
            # without recursion (only right operands recurse, and they nest shallowly)
            spine: list[Node] = []
            while n[0] in ("bin", "and", "or"):
                spine.append(n)
                n = n[2] if n[0] == "bin" else n[1]
            spend(len(spine))
            self.emit(n)
            for s in reversed(spine):
                if s[0] == "bin":
                    self.emit(s[3])
                    code.append((BIN, s[1], s[4]))
                else:
                    jump = len(code)
                    code.append(None)
                    self.emit(s[2])
                    code.append((BOOL,))
                    code[jump] = (JZ if s[0] == "and" else JNZ, len(code))
            return
        if kind == "num":
            code.append((PUSH, n[1]))
        elif kind == "var":
            code.append((VAR, n[1]))
        elif kind == "item":
            code.append((ITEM, n[1], n[2], self.compile_index(n[3])))
        elif kind == "un":
            self.emit(n[2])
            code.append(({"-": NEG, "!": NOT}.get(n[1], INV),))
        elif kind == "if":
            self.emit(n[1])
            jf = len(code)
            code.append(None)
            self.emit(n[2])
            jmp = len(code)
            code.append(None)
            code[jf] = (JF, len(code))
            self.emit(n[3])
            code[jmp] = (JMP, len(code))
        elif kind == "seq":
            items = n[1]
            for i, x in enumerate(items):
                self.emit(x)
                if i < len(items) - 1:
                    code.append((POP,))
        elif kind == "set":
            op, target = n[1], n[2]
            if op != "=":
                self.load(target)
            self.emit(n[3])
            if op != "=":
                code.append((BIN, op[:-1], n[4]))
            self.store(target)
        elif kind in ("pre", "post"):
            target = n[2]
            self.load(target)
            if kind == "post":  # the old value stays below (read twice, as generated)
                self.load(target)
            code.append((ADD, n[1]))
            self.store(target)
            if kind == "post":
                code.append((POP,))
        else:  # pragma: no cover - the parser builds nothing else
            raise ValueError(kind)

    def load(self, target: Node) -> None:
        self.emit(target)

    def store(self, target: Node) -> None:
        if target[0] == "var":
            self.code.append((SET, target[1]))
        else:
            self.code.append((SET_ITEM, target[1], target[2], self.compile_index(target[3])))


def compile_program(node: Node, compile_index: Callable[[Node], Fn], binop: BinOp) -> Program:
    """The stack program of a parsed expression; ``compile_index`` compiles the index
    expressions of array elements (evaluated lazily, as in the generated code), ``binop``
    runs the binary operators but ``+`` and ``-`` (``arithmetic`` hands in its own, so the
    two agree and this module does not import it back)."""
    emitter = _Emitter(compile_index)
    emitter.emit(node)
    return Program(emitter.code, binop)
