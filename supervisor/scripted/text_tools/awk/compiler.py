"""The awk AST compiled to Python closures, once per program.

Each expression becomes ``fn(frame) -> value`` and each statement ``fn(frame) -> None``;
``frame`` is the list of a user function's parameters and locals (None at top level).
Control flow (``next``, ``exit``, ``break``, ``continue``, ``return``) travels as
exceptions. Every loop iteration is charged to the run's budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...budget import spend
from . import functions
from .analysis import array_params
from .lexer import AwkSyntaxError
from .parser import Function, Node, Program
from .runtime import Array, AwkFatal, ExitProgram, NextFile, NextRecord, Runtime
from .values import (
    UNINIT,
    StrNum,
    Value,
    compare,
    format_number,
    to_int,
    to_number,
    to_str,
    truthy,
)

Frame = list[Any] | None
Expr = Callable[[Frame], Value]
Stmt = Callable[[Frame], None]

_SPECIAL_SETTERS = frozenset({"NF", "OFS"})


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    "==": lambda x, y: x == y,
    "!=": lambda x, y: x != y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Value) -> None:
        super().__init__()
        self.value = value


def _raising(signal: type[Exception]) -> Stmt:
    """A statement that only transfers control (``break``, ``next``...) by raising."""

    def run(f: Frame) -> None:
        raise signal

    return run


def _power(a: float, b: float) -> float:
    try:
        return math.pow(a, b)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.copysign(math.nan, -1.0)


def _arith(op: str) -> Callable[[float, float], float]:
    if op == "+":
        return lambda a, b: a + b
    if op == "-":
        return lambda a, b: a - b
    if op == "*":
        return lambda a, b: a * b
    if op == "/":

        def divide(a: float, b: float) -> float:
            if b == 0:
                raise AwkFatal("division by zero attempted")
            return a / b

        return divide
    if op == "%":

        def modulo(a: float, b: float) -> float:
            if b == 0:
                raise AwkFatal("division by zero attempted in `%'")
            return math.fmod(a, b)

        return modulo
    return _power


class Compiler:
    def __init__(self, program: Program, rt: Runtime) -> None:
        self.program = program
        self.rt = rt
        self.params: list[str] = []
        self.functions: dict[str, Callable[[list[Any]], Value]] = {}
        self.array_params = array_params(program)

    # -- variables and arrays
    def local_index(self, name: str) -> int | None:
        try:
            return self.params.index(name)
        except ValueError:
            return None

    def array(self, name: str) -> Callable[[Frame], Array]:
        """The array ``name`` (created on first use)."""
        rt = self.rt
        index = self.local_index(name)
        if index is not None:

            def local_array(f: Frame) -> Array:
                assert f is not None
                value = f[index]
                if type(value) is not Array:
                    if value is not UNINIT:
                        raise AwkFatal(f"attempt to use scalar parameter `{name}' as an array")
                    value = Array()
                    f[index] = value
                return value

            return local_array
        variables = rt.vars

        def global_array(f: Frame) -> Array:
            value = variables.get(name)
            if type(value) is not Array:
                if value is not None and value is not UNINIT:
                    raise AwkFatal(f"attempt to use scalar `{name}' as an array")
                value = Array()
                variables[name] = value
            return value

        return global_array

    def subscript(self, keys: list[Node]) -> Callable[[Frame], str]:
        rt = self.rt
        parts = [self.expr(k) for k in keys]
        variables = rt.vars
        if len(parts) == 1:
            part = parts[0]

            def one(f: Frame) -> str:
                value = part(f)
                if type(value) is float:
                    return to_str(value, variables["CONVFMT"])
                return str(value)

            return one

        def many(f: Frame) -> str:
            convfmt = variables["CONVFMT"]
            return to_str(variables["SUBSEP"], convfmt).join(to_str(p(f), convfmt) for p in parts)

        return many

    def lvalue(self, node: Node) -> tuple[Expr, Callable[[Frame, Value], None]]:
        rt = self.rt
        tag = node[0]
        if tag == "var":
            name = node[1]
            index = self.local_index(name)
            if index is not None:

                def get_local(f: Frame) -> Value:
                    assert f is not None
                    value = f[index]
                    if type(value) is Array:
                        raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
                    return value  # type: ignore[no-any-return]

                def set_local(f: Frame, value: Value) -> None:
                    assert f is not None
                    if type(f[index]) is Array:
                        raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
                    f[index] = value

                return get_local, set_local
            get = self.variable(name)
            variables = rt.vars
            if name in _SPECIAL_SETTERS:
                return get, lambda f, value: rt.set_special(name, value)

            def set_global(f: Frame, value: Value) -> None:
                if type(variables.get(name)) is Array:
                    raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
                variables[name] = value

            return get, set_global
        if tag == "field":
            if (
                node[1][0] == "num"
                and math.isfinite(node[1][1])
                and int(node[1][1]) == node[1][1]
                and node[1][1] > 0
            ):
                position = int(node[1][1])

                def get_constant_field(f: Frame) -> Value:
                    fields = rt.fields
                    if fields is None:
                        fields = rt.split_record()
                    return StrNum(fields[position - 1]) if position <= len(fields) else UNINIT

                return get_constant_field, lambda f, value: rt.set_field(position, value)
            index_expr = self.expr(node[1])
            return (
                lambda f: rt.get_field(to_number(index_expr(f))),
                lambda f, value: rt.set_field(to_number(index_expr(f)), value),
            )
        if tag == "index":
            array = self.array(node[1])
            key = self.subscript(node[2])

            def get_item(f: Frame) -> Value:
                arr = array(f)
                k = key(f)
                value = arr.get(k)
                if value is None:
                    rt.new_element()
                    arr[k] = value = UNINIT
                return value

            def set_item(f: Frame, value: Value) -> None:
                arr = array(f)
                k = key(f)
                if k not in arr:
                    rt.new_element()
                arr[k] = value

            return get_item, set_item
        raise AwkFatal("assignment to a non-variable")

    def variable(self, name: str) -> Expr:
        rt = self.rt
        index = self.local_index(name)
        if index is not None:
            return self.lvalue(("var", name))[0]
        if name == "NF":
            return lambda f: rt.get_nf()
        variables = rt.vars

        def get(f: Frame) -> Value:
            value = variables.get(name, UNINIT)
            if type(value) is Array:
                raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
            return value  # type: ignore[no-any-return]

        return get

    # -- expressions
    def expr(self, node: Node) -> Expr:
        spend()  # a program of megabytes compiles under the deadline
        method = getattr(self, "e_" + node[0])
        compiled: Expr = method(node)
        return compiled

    def e_num(self, node: Node) -> Expr:
        value = float(node[1])
        return lambda f: value

    def e_str(self, node: Node) -> Expr:
        value = str(node[1])
        return lambda f: value

    def e_ere(self, node: Node) -> Expr:
        """A regex alone is ``$0 ~ /re/``."""
        rt = self.rt
        source = str(node[1])
        return lambda f: 1.0 if rt.regex(source).search(rt.get_record()) else 0.0

    def e_paren(self, node: Node) -> Expr:
        return self.expr(node[1])

    def e_group(self, node: Node) -> Expr:
        # "(a, b)" outside print and "in": gawk rejects it; join as SUBSEP would.
        key = self.subscript(node[1])
        return key

    def e_var(self, node: Node) -> Expr:
        return self.variable(node[1])

    def e_field(self, node: Node) -> Expr:
        return self.lvalue(node)[0]

    def e_index(self, node: Node) -> Expr:
        return self.lvalue(node)[0]

    def e_assign(self, node: Node) -> Expr:
        op, target, value_node = node[1], node[2], node[3]
        get, put = self.lvalue(target)
        value = self.expr(value_node)
        if op == "=":

            def assign(f: Frame) -> Value:
                v = value(f)
                put(f, v)
                return v

            return assign
        arith = _arith(op[:-1] if op != "**=" else "^")
        name = target[1] if target[0] == "var" else None
        if name is not None and self.local_index(name) is None and name not in _SPECIAL_SETTERS:
            variables = self.rt.vars

            def update_global(f: Frame) -> Value:
                current = variables.get(name, UNINIT)
                if type(current) is not float:
                    if type(current) is Array:
                        raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
                    current = to_number(current)
                result = arith(current, to_number(value(f)))
                variables[name] = result
                return result

            return update_global

        def update(f: Frame) -> Value:
            result = arith(to_number(get(f)), to_number(value(f)))
            put(f, result)
            return result

        return update

    def e_cond(self, node: Node) -> Expr:
        cond, a, b = self.expr(node[1]), self.expr(node[2]), self.expr(node[3])
        return lambda f: a(f) if truthy(cond(f)) else b(f)

    def e_or(self, node: Node) -> Expr:
        a, b = self.expr(node[1]), self.expr(node[2])
        return lambda f: 1.0 if truthy(a(f)) or truthy(b(f)) else 0.0

    def e_and(self, node: Node) -> Expr:
        a, b = self.expr(node[1]), self.expr(node[2])
        return lambda f: 1.0 if truthy(a(f)) and truthy(b(f)) else 0.0

    def e_not(self, node: Node) -> Expr:
        a = self.expr(node[1])
        return lambda f: 0.0 if truthy(a(f)) else 1.0

    def e_unary(self, node: Node) -> Expr:
        a = self.expr(node[2])
        if node[1] == "-":
            return lambda f: -to_number(a(f))
        return lambda f: to_number(a(f))

    def e_binop(self, node: Node) -> Expr:
        if node[1] in "/%" and node[3][0] == "num" and node[3][1] == 0:
            # gawk folds constants while parsing and reports this as a syntax error.
            raise AwkSyntaxError("division by zero attempted", 0, 0)
        arith = _arith(node[1])
        a, b = self.expr(node[2]), self.expr(node[3])
        return lambda f: arith(to_number(a(f)), to_number(b(f)))

    def e_cmp(self, node: Node) -> Expr:
        op = node[1]
        a, b = self.expr(node[2]), self.expr(node[3])
        variables = self.rt.vars
        test: Callable[[int], bool] = {
            "<": lambda c: c < 0,
            "<=": lambda c: c <= 0,
            "==": lambda c: c == 0,
            "!=": lambda c: c != 0,
            ">": lambda c: c > 0,
            ">=": lambda c: c >= 0,
        }[op]
        numeric = _COMPARE[op]

        def comparison(f: Frame) -> Value:
            x = a(f)
            y = b(f)
            if type(x) is float and type(y) is float:
                return 1.0 if numeric(x, y) else 0.0
            return 1.0 if test(compare(x, y, variables["CONVFMT"])) else 0.0

        return comparison

    def e_concat(self, node: Node) -> Expr:
        parts = [self.expr(p) for p in node[1]]
        variables = self.rt.vars

        def concat(f: Frame) -> Value:
            convfmt = variables["CONVFMT"]
            text = "".join(to_str(p(f), convfmt) for p in parts)
            if len(text) > 65_536:
                if len(text) > 10_000_000:
                    raise AwkFatal("string too long")
                spend(len(text) >> 12)  # a big string: the memory check comes sooner
            return text

        return concat

    def regex_of(self, node: Node) -> Callable[[Frame], Any]:
        """The regex on the right of ``~`` (or a regex argument): a literal compiles
        once; anything else is a dynamic regex, compiled (cached) from its string."""
        rt = self.rt
        if node[0] == "ere":
            source = str(node[1])
            return lambda f: rt.regex(source)
        value = self.expr(node)
        variables = rt.vars
        return lambda f: rt.regex(to_str(value(f), variables["CONVFMT"]))

    def e_match(self, node: Node) -> Expr:
        negate = node[1]
        subject = self.expr(node[2])
        regex = self.regex_of(node[3])
        variables = self.rt.vars

        def match(f: Frame) -> Value:
            found = regex(f).search(to_str(subject(f), variables["CONVFMT"])) is not None
            return 1.0 if found != negate else 0.0

        return match

    def e_in(self, node: Node) -> Expr:
        key = self.subscript(node[1])
        array = self.array(node[2])
        return lambda f: 1.0 if key(f) in array(f) else 0.0

    def _step(self, node: Node, delta: float, post: bool) -> Expr:
        target = node[1]
        name = target[1] if target[0] == "var" else None
        if name is not None and self.local_index(name) is None and name not in _SPECIAL_SETTERS:
            variables = self.rt.vars

            def step_global(f: Frame) -> Value:
                current = variables.get(name, UNINIT)
                if type(current) is not float:
                    if type(current) is Array:
                        raise AwkFatal(f"attempt to use array `{name}' in a scalar context")
                    current = to_number(current)
                variables[name] = current + delta
                return current if post else current + delta

            return step_global
        get, put = self.lvalue(target)

        def step(f: Frame) -> Value:
            old = to_number(get(f))
            put(f, old + delta)
            return old if post else old + delta

        return step

    def e_preinc(self, node: Node) -> Expr:
        return self._step(node, 1.0, False)

    def e_predec(self, node: Node) -> Expr:
        return self._step(node, -1.0, False)

    def e_postinc(self, node: Node) -> Expr:
        return self._step(node, 1.0, True)

    def e_postdec(self, node: Node) -> Expr:
        return self._step(node, -1.0, True)

    def e_getline(self, node: Node) -> Expr:
        rt = self.rt
        target, source = node[1], node[2]
        put = self.lvalue(target)[1] if target is not None else None
        if source is not None and source[0] == "pipe":

            def pipe(f: Frame) -> Value:
                raise AwkFatal("redirection not allowed in sandbox mode")

            return pipe
        name = self.expr(source[1]) if source is not None else None
        variables = rt.vars

        def getline(f: Frame) -> Value:
            if name is not None:
                path = to_str(name(f), variables["CONVFMT"])
                if path not in ("-", "/dev/stdin"):
                    return -1.0  # no file can be opened: getline's own error value
            text = rt.read_record()
            if text is None:
                return 0.0
            if put is None:
                rt.set_record(text)
            else:
                put(f, StrNum(text))
            return 1.0

        return getline

    def e_call(self, node: Node) -> Expr:
        name = node[1]
        if name not in self.program.functions:
            raise AwkFatal(f"function `{name}' not defined")
        fn = self.program.functions[name]
        if len(node[2]) > len(fn.params):
            raise AwkFatal(f"function `{name}' called with more arguments than declared")
        arrays = self.array_params.get(name, set())
        args: list[Callable[[Frame], Any]] = []
        for i, arg in enumerate(node[2]):
            if i in arrays and arg[0] == "var":
                args.append(self.array(arg[1]))
            elif arg[0] == "var":
                args.append(self.argument_value(arg[1]))
            else:
                args.append(self.expr(arg))
        width = len(fn.params)
        functions_table = self.functions
        rt = self.rt

        def call(f: Frame) -> Value:
            frame: list[Any] = [a(f) for a in args]
            frame.extend([UNINIT] * (width - len(frame)))
            spend()
            if rt.depth >= 64:
                raise AwkFatal("function call nesting too deep")
            rt.depth += 1
            try:
                return functions_table[name](frame)
            finally:
                rt.depth -= 1

        return call

    def argument_value(self, name: str) -> Callable[[Frame], Any]:
        """A bare variable argument: an array goes by reference, a scalar by value."""
        index = self.local_index(name)
        variables = self.rt.vars
        if index is not None:
            return lambda f: f[index] if f is not None else UNINIT
        if name == "NF":
            rt = self.rt
            return lambda f: rt.get_nf()
        return lambda f: variables.get(name, UNINIT)

    def e_builtin(self, node: Node) -> Expr:
        return functions.compile_builtin(self, node[1], node[2])

    # -- statements
    def stmt(self, node: Node) -> Stmt:
        spend()
        method = getattr(self, "s_" + node[0])
        compiled: Stmt = method(node)
        return compiled

    def block(self, nodes: list[Node]) -> Stmt:
        stmts = [self.stmt(n) for n in nodes]
        if len(stmts) == 1:
            return stmts[0]

        def run(f: Frame) -> None:
            for s in stmts:
                s(f)

        return run

    def s_block(self, node: Node) -> Stmt:
        return self.block(node[1])

    def s_expr(self, node: Node) -> Stmt:
        # An expression closure serves as the statement: its value is ignored.
        return self.expr(node[1])  # type: ignore[return-value]

    def s_if(self, node: Node) -> Stmt:
        cond = self.expr(node[1])
        then = self.stmt(node[2])
        other = self.stmt(node[3]) if node[3] is not None else None

        def run(f: Frame) -> None:
            if truthy(cond(f)):
                then(f)
            elif other is not None:
                other(f)

        return run

    def s_while(self, node: Node) -> Stmt:
        cond = self.expr(node[1])
        body = self.stmt(node[2])
        rt = self.rt

        def run(f: Frame) -> None:
            while truthy(cond(f)):
                budget = rt.loop_budget = rt.loop_budget - 1
                if budget < 0 or not budget & 1023:
                    spend(1024)
                    rt.loop_tick()
                try:
                    body(f)
                except _Break:
                    break
                except _Continue:
                    continue

        return run

    def s_do(self, node: Node) -> Stmt:
        body = self.stmt(node[1])
        cond = self.expr(node[2])
        tick = self.rt.loop_tick

        def run(f: Frame) -> None:
            while True:
                tick()
                try:
                    body(f)
                except _Break:
                    break
                except _Continue:
                    pass
                if not truthy(cond(f)):
                    break

        return run

    def s_for(self, node: Node) -> Stmt:
        init = self.stmt(node[1]) if node[1] is not None else None
        cond = self.expr(node[2]) if node[2] is not None else None
        step = self.stmt(node[3]) if node[3] is not None else None
        body = self.stmt(node[4])
        rt = self.rt

        def run(f: Frame) -> None:
            if init is not None:
                init(f)
            while cond is None or truthy(cond(f)):
                budget = rt.loop_budget = rt.loop_budget - 1
                if budget < 0 or not budget & 1023:
                    spend(1024)
                    rt.loop_tick()
                try:
                    body(f)
                except _Break:
                    break
                except _Continue:
                    pass
                if step is not None:
                    step(f)

        return run

    def s_forin(self, node: Node) -> Stmt:
        put = self.lvalue(("var", node[1]))[1]
        array = self.array(node[2])
        body = self.stmt(node[3])
        tick = self.rt.loop_tick

        def run(f: Frame) -> None:
            for key in list(array(f)):
                tick()
                put(f, StrNum(key))
                try:
                    body(f)
                except _Break:
                    break
                except _Continue:
                    continue

        return run

    def s_break(self, node: Node) -> Stmt:
        return _raising(_Break)

    def s_continue(self, node: Node) -> Stmt:
        return _raising(_Continue)

    def s_next(self, node: Node) -> Stmt:
        return _raising(NextRecord)

    def s_nextfile(self, node: Node) -> Stmt:
        return _raising(NextFile)

    def s_exit(self, node: Node) -> Stmt:
        value = self.expr(node[1]) if node[1] is not None else None

        def run(f: Frame) -> None:
            raise ExitProgram(to_int(to_number(value(f))) if value is not None else None)

        return run

    def s_return(self, node: Node) -> Stmt:
        value = self.expr(node[1]) if node[1] is not None else None

        def run(f: Frame) -> None:
            raise _Return(value(f) if value is not None else UNINIT)

        return run

    def s_delete(self, node: Node) -> Stmt:
        array = self.array(node[1])
        if node[2] is None:
            return lambda f: array(f).clear()
        key = self.subscript(node[2])
        return lambda f: array(f).pop(key(f), None) and None

    def output(self, redirect: tuple[str, Node] | None) -> Callable[[Frame, str], None]:
        rt = self.rt
        if redirect is None:
            return lambda f, text: rt.write(text)
        target = self.expr(redirect[1])
        variables = rt.vars

        def write(f: Frame, text: str) -> None:
            path = to_str(target(f), variables["CONVFMT"])
            if path in ("/dev/stdout", "-") and redirect[0] != "|":
                rt.write(text)
            elif path == "/dev/stderr" and redirect[0] != "|":
                rt.err.append(text)
            else:
                raise AwkFatal("redirection not allowed in sandbox mode")

        return write

    def s_print(self, node: Node) -> Stmt:
        rt = self.rt
        args = [self.expr(a) for a in node[1]]
        emit = self.output(node[2])
        variables = rt.vars

        single = args[0] if len(args) == 1 else None

        def run(f: Frame) -> None:
            line: str
            if single is not None:
                value = single(f)
                line = format_number(value, variables["OFMT"]) if type(value) is float else value  # type: ignore[assignment]
            elif not args:
                line = rt.get_record()
            else:
                ofmt = variables["OFMT"]
                line = to_str(variables["OFS"], variables["CONVFMT"]).join(
                    [to_str(a(f), ofmt) for a in args]
                )
            ors = variables["ORS"]
            emit(f, line + to_str(ors))

        return run

    def s_printf(self, node: Node) -> Stmt:
        args = [self.expr(a) for a in node[1]]
        emit = self.output(node[2])
        rt = self.rt

        def run(f: Frame) -> None:
            values = [a(f) for a in args]
            emit(f, functions.sprintf(rt, values))

        return run

    # -- the program
    def function(self, fn: Function) -> Callable[[list[Any]], Value]:
        saved = self.params
        self.params = fn.params
        try:
            body = self.stmt(fn.body)
        finally:
            self.params = saved

        def call(frame: list[Any]) -> Value:
            try:
                body(frame)
            except _Return as ret:
                return ret.value
            return UNINIT

        return call

    def compile_functions(self) -> None:
        # Calls look functions up by name at run time, so recursion and forward
        # references need no ordering.
        for name, fn in self.program.functions.items():
            self.functions[name] = self.function(fn)
