"""awk's built-in functions (POSIX and the common gawk ones) and ``sprintf``.

``system`` and output/input pipes are refused with gawk's sandbox-mode message.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...budget import spend
from ...case_map import lower, upper
from .. import cformat
from ..posix_regex import MatchLike, Regex, finditer
from .runtime import Array, AwkFatal, Runtime
from .values import UNINIT, StrNum, Value, is_numeric, to_int, to_number, to_str

if TYPE_CHECKING:
    from .compiler import Compiler, Expr, Frame
    from .parser import Node


def sprintf(rt: Runtime, values: list[Value]) -> str:
    """C ``printf`` with awk's conversions of strings and numbers."""
    if not values:
        return ""
    convfmt = rt.vars["CONVFMT"]
    fmt = to_str(values[0], convfmt)
    args = values[1:]
    position = 0

    def take() -> Value:
        nonlocal position
        if position >= len(args):
            raise AwkFatal("not enough arguments to satisfy format string")
        value = args[position]
        position += 1
        return value

    out: list[str] = []
    for part in cformat.parse(fmt):
        if isinstance(part, str):
            out.append(part)
            continue
        width = to_int(to_number(take())) if part.width == "*" else None
        precision = to_int(to_number(take())) if part.precision == "*" else None
        spec = part.with_star(width, precision) if width is not None or precision is not None \
            else part  # fmt: skip
        value = take()
        conv = spec.conv
        if conv == "s":
            out.append(cformat.format_string(spec, to_str(value, convfmt)))
        elif conv == "c":
            if type(value) is float or (is_numeric(value) and value is not UNINIT):
                out.append(cformat.format_char_code(spec, to_int(to_number(value))))
            else:
                out.append(cformat.format_string(spec, str(value)))
        else:
            out.append(cformat.format_number(spec, to_number(value)))
    text = "".join(out)
    if len(text) > 10_000_000:
        raise AwkFatal("string too long")
    return text


def _substr(text: str, start: float, length: float | None) -> str:
    """gawk 5's substr: the start truncated and moved up to 1 (the length is not
    shortened for it), the length truncated."""
    if start != start:
        return ""
    first = max(math.trunc(start) if math.isfinite(start) else start, 1)
    if first > len(text):
        return ""
    if length is None or length == math.inf:
        return text[int(first) - 1 :]
    if length != length or length < 1:
        return ""
    return text[int(first) - 1 : int(first) - 1 + math.trunc(length)]


def _sub_replacement(repl: str, matched: str) -> str:
    if "\\" not in repl and "&" not in repl:
        return repl
    out: list[str] = []
    i = 0
    while i < len(repl):
        c = repl[i]
        if c == "\\" and i + 1 < len(repl) and repl[i + 1] in "\\&":
            out.append(repl[i + 1])
            i += 2
            continue
        out.append(matched if c == "&" else c)
        i += 1
    return "".join(out)


def _gensub_replacement(repl: str, m: MatchLike, groups: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(repl):
        c = repl[i]
        if c == "\\" and i + 1 < len(repl):
            nxt = repl[i + 1]
            if nxt.isdigit():
                n = int(nxt)
                out.append((m.group(n) or "") if n <= groups else "")
                i += 2
                continue
            if nxt == "&":
                out.append("&")
                i += 2
                continue
            out.append(nxt)
            i += 2
            continue
        out.append(m.group(0) if c == "&" else c)
        i += 1
    return "".join(out)


def substitute(
    regex: Regex, text: str, count: int, expand: Callable[[MatchLike], str]
) -> tuple[str, int]:
    """Replace matches (``count`` 0: all; n: only the n-th) the way gawk walks them:
    an empty match right after a previous match does not count."""
    out: list[str] = []
    pos = 0
    seen = 0
    done = 0
    prev_end = -1
    n = len(text)
    while pos <= n:
        m = regex.search(text, pos)
        if m is None:
            break
        spend()
        start, end = m.span()
        if start == end and start == prev_end:
            if start >= n:
                break
            out.append(text[pos : start + 1])
            pos = start + 1
            continue
        seen += 1
        out.append(text[pos:start])
        if count == 0 or seen == count:
            out.append(expand(m))
            done += 1
        else:
            out.append(m.group(0))
        prev_end = end
        if start == end:
            if start < n:
                out.append(text[start])
            pos = start + 1
        else:
            pos = end
        if count and seen >= count:
            break
    if not done:
        return text, 0
    out.append(text[pos:])
    result = "".join(out)
    if len(result) > 10_000_000:
        raise AwkFatal("string too long")
    return result, done


def _sort_key(value: Any) -> tuple[int, Any]:
    if type(value) is float or (isinstance(value, StrNum) and is_numeric(value)):
        return (0, to_number(value))
    return (1, str(value))


def compile_builtin(c: Compiler, name: str, args: list[Node]) -> Expr:
    rt = c.rt
    variables = rt.vars
    n = len(args)

    def arg(i: int) -> Expr:
        return c.expr(args[i])

    def text(i: int) -> Callable[[Frame], str]:
        e = arg(i)
        return lambda f: to_str(e(f), variables["CONVFMT"])

    def number(i: int) -> Callable[[Frame], float]:
        e = arg(i)
        return lambda f: to_number(e(f))

    if name == "length":
        if n == 0:
            return lambda f: float(len(rt.get_record()))
        if args[0][0] == "var":
            var = args[0][1]
            index = c.local_index(var)

            def length_of(f: Frame) -> Value:
                value = (f[index] if f is not None else UNINIT) if index is not None \
                    else variables.get(var, UNINIT)  # fmt: skip
                if type(value) is Array:
                    return float(len(value))
                if var == "NF" and index is None:
                    value = rt.get_nf()
                return float(len(to_str(value, variables["CONVFMT"])))

            return length_of
        s = text(0)
        return lambda f: float(len(s(f)))
    if name == "substr":
        if n not in (2, 3):
            raise AwkFatal("substr: requires 2 or 3 arguments")
        s, start = text(0), number(1)
        if n == 2:
            return lambda f: _substr(s(f), start(f), None)
        length = number(2)
        return lambda f: _substr(s(f), start(f), length(f))
    if name == "index":
        s, t = text(0), text(1)
        return lambda f: float(s(f).find(t(f)) + 1)
    if name in ("split", "patsplit"):
        return _split(c, name, args)
    if name in ("sub", "gsub"):
        return _sub(c, name == "gsub", args)
    if name == "gensub":
        return _gensub(c, args)
    if name == "match":
        return _match(c, args)
    if name == "sprintf":
        values = [arg(i) for i in range(n)]
        return lambda f: sprintf(rt, [v(f) for v in values])
    if name in ("tolower", "toupper"):
        s = text(0)
        if name == "tolower":
            return lambda f: lower(s(f))
        return lambda f: upper(s(f))
    if name == "int":
        x = number(0)
        return lambda f: float(math.trunc(x(f))) if math.isfinite(x(f)) else x(f)
    if name in ("sin", "cos", "exp", "log", "sqrt"):
        x = number(0)
        fn = getattr(math, name)

        def math_fn(f: Frame) -> Value:
            value = x(f)
            try:
                return float(fn(value))
            except OverflowError:
                return math.inf
            except ValueError:
                if name == "log" and value == 0:
                    return -math.inf
                return math.copysign(math.nan, -1.0)

        return math_fn
    if name == "atan2":
        y, x = number(0), number(1)
        return lambda f: math.atan2(y(f), x(f))
    if name == "rand":
        return lambda f: _rng(rt).random()
    if name == "srand":
        seed = number(0) if n else None

        def srand(f: Frame) -> Value:
            previous = rt.rand_seed
            rt.rand_seed = seed(f) if seed is not None else float(int(time.time()))
            rt.rand_state = random.Random(rt.rand_seed)
            return previous

        return srand
    if name == "system":

        def system(f: Frame) -> Value:
            raise AwkFatal("'system' function not allowed in sandbox mode")

        return system
    if name == "close":
        return lambda f: -1.0
    if name == "fflush":
        return lambda f: 0.0
    if name == "systime":
        return lambda f: float(int(time.time()))
    if name == "strftime":
        fmt = text(0) if n > 0 else (lambda f: "%a %b %e %H:%M:%S %Z %Y")
        stamp = number(1) if n > 1 else (lambda f: time.time())
        utc = arg(2) if n > 2 else None

        def strftime(f: Frame) -> Value:
            when = stamp(f)
            try:
                moment = (
                    time.gmtime(when)
                    if utc is not None and to_number(utc(f))
                    else (time.localtime(when))
                )
            except (OverflowError, OSError, ValueError):  # no calendar holds it
                return ""
            return time.strftime(fmt(f), moment)

        return strftime
    if name == "mktime":
        spec = text(0)

        def mktime(f: Frame) -> Value:
            parts = spec(f).split()
            try:
                fields = [int(p) for p in parts[:6]]
                dst = int(parts[6]) if len(parts) > 6 else -1
                return float(time.mktime((*fields, 0, 0, dst)))  # type: ignore[arg-type]
            except (ValueError, OverflowError, TypeError):
                return -1.0

        return mktime
    if name in ("asort", "asorti"):
        return _asort(c, name, args)
    if name in ("and", "or", "xor", "lshift", "rshift"):
        a, b = number(0), number(1)
        op: Callable[[int, int], int] = {
            "and": lambda x, y: x & y,
            "or": lambda x, y: x | y,
            "xor": lambda x, y: x ^ y,
            "lshift": lambda x, y: x << min(y, 64),
            "rshift": lambda x, y: x >> y,
        }[name]
        return lambda f: float(op(to_int(a(f)), to_int(b(f))))
    if name == "compl":
        a = number(0)
        return lambda f: float(~to_int(a(f)) & ((1 << 53) - 1))
    if name == "strtonum":
        s = text(0)

        def strtonum(f: Frame) -> Value:
            value = s(f).strip()
            try:
                if value.lower().startswith(("0x", "-0x")):
                    return float(int(value, 16))
                if len(value) > 1 and value.startswith("0") and value.isdigit():
                    return float(int(value, 8))
            except ValueError:
                pass
            except OverflowError:  # past a double: gawk's inf
                return -math.inf if value.startswith("-") else math.inf
            return to_number(value)

        return strtonum
    if name in ("typeof", "isarray"):
        return _typeof(c, name, args)
    raise AwkFatal(f"function `{name}' not defined")


def _rng(rt: Runtime) -> random.Random:
    if rt.rand_state is None:
        rt.rand_state = random.Random(0)
    state: random.Random = rt.rand_state
    return state


def _regex_arg(c: Compiler, node: Node) -> Callable[[Frame], Regex]:
    return c.regex_of(node)


def _split(c: Compiler, name: str, args: list[Node]) -> Expr:
    rt = c.rt
    variables = rt.vars
    if len(args) < 2 or args[1][0] != "var":
        raise AwkFatal(f"{name}: second argument is not an array")
    source = c.expr(args[0])
    array = c.array(args[1][1])
    separators = c.array(args[3][1]) if len(args) > 3 and args[3][0] == "var" else None
    if name == "patsplit":
        regex = _regex_arg(c, args[2]) if len(args) > 2 else None
    elif len(args) > 2:
        sep_node = args[2]
        regex = _regex_arg(c, sep_node) if sep_node[0] == "ere" else None
        sep_value = c.expr(sep_node) if sep_node[0] != "ere" else None
    else:
        regex = None
        sep_value = None

    def split(f: Frame) -> Value:
        text = to_str(source(f), variables["CONVFMT"])
        arr = array(f)
        arr.clear()
        seps: list[str] = []
        if name == "patsplit":
            pattern = regex(f) if regex is not None else rt.regex(to_str(variables["FPAT"]))
            pieces = [m.group(0) for m in finditer(pattern, text) if m.group(0)]
        elif regex is not None:
            pattern = regex(f)
            pieces, seps = _regex_split(pattern, text)
        else:
            fs = (
                to_str(sep_value(f), variables["CONVFMT"])
                if sep_value is not None
                else (to_str(variables["FS"], variables["CONVFMT"]))
            )
            if len(fs) <= 1:
                pieces = rt.split(text, fs)
            else:
                pieces, seps = _regex_split(rt.regex(fs), text) if text else ([], [])
        for i, piece in enumerate(pieces):
            rt.new_element()
            arr[str(i + 1)] = StrNum(piece)
        if separators is not None:
            sep_arr = separators(f)
            sep_arr.clear()
            for i, sep in enumerate(seps):
                sep_arr[str(i + 1)] = StrNum(sep)
        return float(len(pieces))

    return split


def _regex_split(pattern: Regex, text: str) -> tuple[list[str], list[str]]:
    if text == "":
        return [], []
    pieces: list[str] = []
    seps: list[str] = []
    pos = 0
    for m in finditer(pattern, text):
        if m.end() == m.start():
            continue
        pieces.append(text[pos : m.start()])
        seps.append(m.group(0))
        pos = m.end()
    pieces.append(text[pos:])
    return pieces, seps


def _sub(c: Compiler, global_: bool, args: list[Node]) -> Expr:
    rt = c.rt
    variables = rt.vars
    if len(args) not in (2, 3):
        raise AwkFatal("sub/gsub: requires 2 or 3 arguments")
    regex = _regex_arg(c, args[0])
    repl = c.expr(args[1])
    target = args[2] if len(args) == 3 else ("field", ("num", 0.0))
    if target[0] not in ("var", "field", "index"):
        raise AwkFatal("sub third parameter is not a changeable object")
    get, put = c.lvalue(target)

    def sub(f: Frame) -> Value:
        pattern = regex(f)
        replacement = to_str(repl(f), variables["CONVFMT"])
        original = to_str(get(f), variables["CONVFMT"])
        result, count = substitute(
            pattern,
            original,
            0 if global_ else 1,
            lambda m: _sub_replacement(replacement, m.group(0)),
        )
        if count:
            put(f, result)
        return float(count)

    return sub


def _gensub(c: Compiler, args: list[Node]) -> Expr:
    rt = c.rt
    variables = rt.vars
    if len(args) not in (3, 4):
        raise AwkFatal("gensub: requires 3 or 4 arguments")
    regex = _regex_arg(c, args[0])
    repl = c.expr(args[1])
    how = c.expr(args[2])
    target = c.expr(args[3]) if len(args) == 4 else (lambda f: rt.get_record())

    def gensub(f: Frame) -> Value:
        pattern = regex(f)
        replacement = to_str(repl(f), variables["CONVFMT"])
        mode = how(f)
        mode_text = to_str(mode, variables["CONVFMT"])
        count = 0 if mode_text[:1] in ("g", "G") else max(to_int(to_number(mode)), 1)
        text = to_str(target(f), variables["CONVFMT"])
        return substitute(
            pattern, text, count, lambda m: _gensub_replacement(replacement, m, pattern.groups)
        )[0]

    return gensub


def _match(c: Compiler, args: list[Node]) -> Expr:
    rt = c.rt
    variables = rt.vars
    source = c.expr(args[0])
    regex = _regex_arg(c, args[1])
    array = c.array(args[2][1]) if len(args) > 2 and args[2][0] == "var" else None

    def match(f: Frame) -> Value:
        text = to_str(source(f), variables["CONVFMT"])
        pattern = regex(f)
        m = pattern.search(text)
        if array is not None:
            arr = array(f)
            arr.clear()
        if m is None:
            variables["RSTART"] = 0.0
            variables["RLENGTH"] = -1.0
            return 0.0
        variables["RSTART"] = float(m.start() + 1)
        variables["RLENGTH"] = float(m.end() - m.start())
        if array is not None:
            subsep = to_str(variables["SUBSEP"], variables["CONVFMT"])
            for i in range(pattern.groups + 1):
                if m.group(i) is None:
                    continue
                arr[str(i)] = StrNum(m.group(i))
                arr[f"{i}{subsep}start"] = float(m.start(i) + 1)
                arr[f"{i}{subsep}length"] = float(m.end(i) - m.start(i))
        return float(m.start() + 1)

    return match


def _asort(c: Compiler, name: str, args: list[Node]) -> Expr:
    if not args or args[0][0] != "var":
        raise AwkFatal(f"{name}: first argument is not an array")
    source = c.array(args[0][1])
    dest = c.array(args[1][1]) if len(args) > 1 and args[1][0] == "var" else None

    def asort(f: Frame) -> Value:
        arr = source(f)
        if name == "asort":
            items = sorted(arr.values(), key=_sort_key)
        else:
            items = sorted((StrNum(k) for k in arr), key=str)
        target = dest(f) if dest is not None else arr
        target.clear()
        for i, value in enumerate(items):
            target[str(i + 1)] = value
        return float(len(items))

    return asort


_UNTYPED = object()


def _typeof(c: Compiler, name: str, args: list[Node]) -> Expr:
    rt = c.rt
    node = args[0] if args else ("str", "")
    if node[0] == "var":
        var = node[1]
        index = c.local_index(var)

        def value_of(f: Frame) -> Any:
            if index is not None:
                return f[index] if f is not None else UNINIT
            return rt.vars.get(var, _UNTYPED)

    else:
        e = c.expr(node)

        def value_of(f: Frame) -> Any:
            return e(f)

    def typeof(f: Frame) -> Value:
        value = value_of(f)
        if name == "isarray":
            return 1.0 if type(value) is Array else 0.0
        if value is _UNTYPED:
            return "untyped"
        if type(value) is Array:
            return "array"
        if value is _UNTYPED:
            return "untyped"
        if value is UNINIT:
            return "unassigned"
        if type(value) is float:
            return "number"
        if isinstance(value, StrNum):
            return "strnum" if is_numeric(value) else "string"
        return "string"

    return typeof
