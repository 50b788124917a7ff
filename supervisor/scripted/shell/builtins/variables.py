"""Builtins that create, describe and fill variables: declare/typeset/local/export/
readonly, unset, read, mapfile/readarray.

Differential cases: ``cases_variables.txt``, ``cases_arrays.txt``,
``cases_builtins.txt``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...errors import FatalShellError, ShellError
from ...integers import decimal64
from ...syntax import ast as A
from ...syntax.parser import parse
from ...syntax.printer import format_function
from ..io import InputStream
from ..param_ops import format_declare
from ..state import ARRAY, ASSOC, EXPORT, INTEGER, LOWER, NAMEREF, READONLY, UPPER

if TYPE_CHECKING:
    from ..interpreter import Interpreter

_FLAG_BITS = {
    "a": ARRAY,
    "A": ASSOC,
    "i": INTEGER,
    "l": LOWER,
    "u": UPPER,
    "n": NAMEREF,
    "r": READONLY,
    "x": EXPORT,
}
_ASSIGN_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[.*\])?(\+?=)(.*)\Z", re.DOTALL)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Options:
    __slots__ = ("add", "functions", "global_", "names_only", "print", "remove")

    def __init__(self) -> None:
        self.add = 0
        self.remove = 0
        self.print = False
        self.functions = False
        self.names_only = False
        self.global_ = False


def _parse_options(sh: Interpreter, builtin: str, fields: list[str], opts: _Options) -> int:
    """Consume leading option words; returns the index of the first operand."""
    i = 0
    while i < len(fields):
        f = fields[i]
        if f == "--":
            return i + 1
        if len(f) < 2 or f[0] not in "-+" or _ASSIGN_RE.match(f):
            return i
        on = f[0] == "-"
        for c in f[1:]:
            bit = _FLAG_BITS.get(c)
            if bit is not None:
                if on:
                    opts.add |= bit
                else:
                    opts.remove |= bit
            elif c == "p":
                opts.print = True
            elif c == "f":
                opts.functions = True
            elif c == "F":
                opts.functions = opts.names_only = True
            elif c == "g":
                opts.global_ = True
            elif c == "t":
                pass
            else:
                raise ShellError(f"{builtin}: {f[0]}{c}: invalid option", 2)
        i += 1
    return i


async def run_declaration(sh: Interpreter, cmd: A.DeclCommand) -> int:
    """declare/typeset/local/export/readonly with structured (unsplit) assignments."""
    items: list[str | A.Assign] = []
    for arg in cmd.args:
        if type(arg) is A.Assign:
            items.append(arg)
        else:
            items.extend(await sh.expand_args((arg,)))  # type: ignore[arg-type]
    try:
        return await declare(sh, cmd.builtin, items)
    except FatalShellError:
        raise
    except ShellError as exc:
        sh.error(exc.message)
        return exc.status


async def declare(sh: Interpreter, builtin: str, items: list[str | A.Assign]) -> int:
    opts = _Options()
    strings = [x for x in items if isinstance(x, str)]
    lead = 0
    for x in items:
        if isinstance(x, str) and len(x) > 1 and x[0] in "-+" and not _ASSIGN_RE.match(x):
            lead += 1
        else:
            break
    _parse_options(sh, builtin, strings[:lead], opts)
    operands = items[lead:]
    if operands and operands[0] == "--":
        operands = operands[1:]
    if builtin == "export":
        opts.add |= EXPORT
        if opts.add & NAMEREF:  # export -n: un-export
            opts.add &= ~(NAMEREF | EXPORT)
            opts.remove |= EXPORT
    elif builtin == "readonly":
        opts.add |= READONLY
    local = builtin == "local" or (
        builtin in ("declare", "typeset") and sh.func_depth > 0 and not opts.global_
    )
    if builtin == "local" and sh.func_depth == 0:
        sh.error("local: can only be used in a function")
        return 1
    if opts.functions:
        return _print_functions(sh, operands, opts.names_only)
    if opts.print or not operands:
        if builtin in ("export", "readonly") and not operands:
            bit = EXPORT if builtin == "export" else READONLY
            return _print_vars(sh, [n for n, v in sh.vars.items() if v.attrs & bit])
        if not operands and not opts.print and (opts.add or builtin == "local"):
            names = [n for n, v in sh.vars.items() if v.attrs & opts.add == opts.add]
            if builtin == "local":
                names = list(sh.frames[-1]) if sh.frames else []
            return _print_vars(sh, names)
        names = [x if isinstance(x, str) else x.name for x in operands]
        return _print_vars(sh, names or sorted(sh.vars), strict=bool(names))
    status = 0
    for item in operands:
        try:
            if isinstance(item, str):
                await _declare_string(sh, item, opts, local)
            else:
                await _declare_assign(sh, item, opts, local)
        except FatalShellError:
            raise
        except ShellError as exc:
            sh.error(f"{builtin}: {exc.message}" if builtin != "local" else exc.message)
            status = 1
    return status


async def _declare_assign(sh: Interpreter, a: A.Assign, opts: _Options, local: bool) -> None:
    name = a.name
    if not _NAME_RE.match(name):
        raise ShellError(f"`{a.text}': not a valid identifier")
    existing = sh.vars.get(name)
    if existing is not None and existing.attrs & READONLY and not local:
        raise ShellError(f"{name}: readonly variable")
    add = opts.add & ~READONLY
    if a.array is not None and not add & ASSOC and not (existing and existing.attrs & ASSOC):
        add |= ARRAY
    if add & NAMEREF:
        target = await sh.expand_string(a.value) if a.value is not None else ""
        sh.declare_var(name, add, opts.remove, local).value = target
    else:
        store = await sh.prepare_assign(a)  # the value is read before a local exists
        sh.declare_var(name, add, opts.remove, local)
        store()
    if opts.add & READONLY:
        sh.declare_var(name, READONLY, 0, False)


async def _declare_string(sh: Interpreter, item: str, opts: _Options, local: bool) -> None:
    m = _ASSIGN_RE.match(item)
    if m is None:
        if not _NAME_RE.match(item):
            raise ShellError(f"`{item}': not a valid identifier")
        sh.declare_var(item, opts.add, opts.remove, local)
        return
    name, sub, op, value = m.group(1), m.group(2), m.group(3), m.group(4)
    existing = sh.vars.get(name)
    if existing is not None and existing.attrs & READONLY and not local:
        raise ShellError(f"{name}: readonly variable")
    v = sh.declare_var(name, opts.add & ~READONLY, opts.remove, local)
    if opts.add & NAMEREF:
        v.value = value
    elif sub is not None:
        key: int | str = sub[1:-1]
        if not sh.is_assoc(name):
            key = sh.arith_expr(str(key))
        sh.assign_item(name, key, value, op == "+=")
    elif value.startswith("(") and value.endswith(")") and opts.add & (ARRAY | ASSOC):
        prog = parse(f"__decl_tmp={value}")
        first = prog.body.body[0]
        assign = first.assigns[0]  # type: ignore[union-attr]
        assign.name = name
        await sh.do_assign(assign)
    else:
        sh.assign(name, value, op == "+=")
    if opts.add & READONLY:
        sh.declare_var(name, READONLY, 0, False)


def _print_vars(sh: Interpreter, names: list[str], strict: bool = False) -> int:
    status = 0
    for name in names:
        v = sh.vars.get(name) or sh.lookup(name)  # or the call stack (FUNCNAME ...)
        if v is None:
            if strict:
                sh.error(f"declare: {name}: not found")
                status = 1
            continue
        sh.out.write(format_declare(name, v) + "\n")
    return status


def _print_functions(sh: Interpreter, names: list[str | A.Assign], names_only: bool) -> int:
    operands = [x for x in names if isinstance(x, str)]
    wanted = operands or sorted(sh.functions)
    status = 0
    for name in wanted:
        fn = sh.functions.get(name)
        if fn is None:
            status = 1
            continue
        if names_only:  # `declare -F` lists `declare -f f`; `declare -F f` prints `f`
            sh.out.write(f"{name}\n" if operands else f"declare -f {name}\n")
        else:
            sh.out.write(format_function(fn) + "\n")
    return status


async def declare_builtin(sh: Interpreter, args: list[str], builtin: str) -> int:
    try:
        return await declare(sh, builtin, list(args))
    except FatalShellError:
        raise
    except ShellError as exc:
        sh.error(exc.message)
        return exc.status


def make_declare_builtin(builtin: str):  # type: ignore[no-untyped-def]
    def run(sh: Interpreter, args: list[str]):  # type: ignore[no-untyped-def]
        return declare_builtin(sh, args, builtin)

    return run


def unset(sh: Interpreter, args: list[str]) -> int:
    mode = ""
    names: list[str] = []
    for a in args:
        if a.startswith("-") and len(a) > 1 and not names:
            mode = a[1:]
            continue
        names.append(a)
    status = 0
    for name in names:
        if "f" in mode:
            sh.functions.pop(name, None)
            continue
        sub = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]\Z", name, re.DOTALL)
        try:
            if sub is not None:
                base, key_text = sub.group(1), sub.group(2)
                if key_text in ("@", "*"):
                    sh.unset(base)
                    continue
                key: int | str = key_text if sh.is_assoc(base) else sh.arith_expr(key_text)
                sh.unset_item(base, key)
            elif not _NAME_RE.match(name):
                sh.functions.pop(name, None)  # not a variable name: maybe a function
            elif name in sh.vars or "v" in mode:
                if "n" not in mode:
                    v = sh.vars.get(name)
                    if v is not None and v.attrs & NAMEREF and isinstance(v.value, str):
                        name = v.value
                sh.unset(name)
            else:
                sh.functions.pop(name, None)
        except ShellError as exc:
            sh.error(f"unset: {exc.message}")
            status = 1
    return status


# ------------------------------------------------------------------------ read


def _split_read(text: str, escaped: set[int], ifs: str, count: int) -> list[str]:
    """Split a line for ``read`` into at most ``count`` fields (the last takes the rest)."""
    ws = "".join(c for c in ifs if c in " \t\n")
    nws = "".join(c for c in ifs if c not in " \t\n")
    n = len(text)

    def is_ws(i: int) -> bool:
        return text[i] in ws and i not in escaped

    def is_delim(i: int) -> bool:
        return text[i] in ifs and i not in escaped

    i = 0
    while i < n and is_ws(i):
        i += 1
    fields: list[str] = []
    while i < n and len(fields) < count - 1:
        j = i
        while j < n and not is_delim(j):
            j += 1
        fields.append(text[i:j])
        i = j
        while i < n and is_ws(i):
            i += 1
        if i < n and text[i] in nws and i not in escaped:
            i += 1
            while i < n and is_ws(i):
                i += 1
    if i < n:
        end = n
        while end > i and is_ws(end - 1):
            end -= 1
        # one word followed only by delimiters: the delimiters go
        cut = end
        if cut > i and text[cut - 1] in nws and (cut - 1) not in escaped:
            cut -= 1
            while cut > i and is_ws(cut - 1):
                cut -= 1
        if cut < end and not any(is_delim(k) for k in range(i, cut)):
            end = cut
        fields.append(text[i:end])
    return fields


def read(sh: Interpreter, args: list[str]) -> int:
    raw = False
    array: str | None = None
    delim = "\n"
    nchars: int | None = None
    exact = False
    names: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not names:
            j = 1
            while j < len(a):
                c = a[j]
                if c in "adnNptu":
                    val = (
                        a[j + 1 :]
                        if j + 1 < len(a)
                        else (args[i + 1] if i + 1 < len(args) else None)
                    )
                    if val is None:
                        sh.error(f"read: -{c}: option requires an argument")
                        return 2
                    if j + 1 >= len(a):
                        i += 1
                    if c == "a":
                        array = val
                    elif c == "d":
                        delim = val[:1]
                    elif c in "nN":
                        number = decimal64(val)
                        if number is None or number < 0:
                            sh.error(f"read: {val}: invalid number")
                            return 1
                        nchars = number
                        exact = c == "N"
                    break
                if c == "r":
                    raw = True
                elif c in "se":
                    pass
                else:
                    sh.error(f"read: -{c}: invalid option")
                    return 2
                j += 1
            i += 1
            continue
        names.append(a)
        i += 1
    stream = sh.stdin
    if stream is None or stream.at_eof():
        _assign_read(sh, names, array, "")
        return 1
    escaped: set[int] = set()
    if nchars is not None:
        text = stream.read_chars(nchars) if exact else _read_n(stream, nchars, delim)
        found = True
    else:
        text, found = stream.read_until(delim)
        while not raw and found is not False and text.endswith("\\") and delim == "\n":
            more, found = stream.read_until(delim)
            text = text[:-1] + more
        if not raw and text.endswith("\\") and delim == "\n" and not found:
            text = text[:-1]
    if not raw and "\\" in text:
        out: list[str] = []
        k = 0
        while k < len(text):
            if text[k] == "\\" and k + 1 < len(text):
                escaped.add(len(out))
                out.append(text[k + 1])
                k += 2
            else:
                if text[k] != "\\":
                    out.append(text[k])
                k += 1
        text = "".join(out)
    _assign_read(sh, names, array, text, escaped, exact)
    return 0 if found else 1


def _read_n(stream: InputStream, n: int, delim: str) -> str:
    text = stream.read_chars(n)
    cut = text.find(delim or "\0")
    if cut >= 0:
        stream.pos -= len(text) - cut - 1
        text = text[:cut]
    return text


def _assign_read(
    sh: Interpreter,
    names: list[str],
    array: str | None,
    text: str,
    escaped: set[int] | None = None,
    exact: bool = False,
) -> None:
    ifs = sh.get("IFS")
    if ifs is None:
        ifs = " \t\n"
    esc = escaped or set()
    if array is not None:
        parts = _split_read(text, esc, ifs, 1 << 30) if text else []
        array = sh.target(array)  # through a nameref (`local -n out=$1; read -a out`)
        sh.unset(array)
        sh.assign_array(array, [(None, p, False) for p in parts])
        return
    if not names:
        sh.assign("REPLY", text)
        return
    if exact:
        sh.assign(names[0], text)
        for name in names[1:]:
            sh.assign(name, "")
        return
    parts = _split_read(text, esc, ifs, len(names)) if text else []
    for k, name in enumerate(names):
        if not _NAME_RE.match(name):
            raise ShellError(f"read: `{name}': not a valid identifier")
        sh.assign(name, parts[k] if k < len(parts) else "")


def mapfile(sh: Interpreter, args: list[str]) -> int:
    strip = False
    delim = "\n"
    count = 0
    origin = 0
    skip = 0
    name = "MAPFILE"
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-t",):
            strip = True
        elif a in ("-d", "-n", "-O", "-s", "-u", "-C", "-c") and i + 1 < len(args):
            val = args[i + 1]
            i += 1
            if a == "-d":
                delim = val[:1] or "\0"
            elif a in ("-n", "-O", "-s"):
                number = decimal64(val)
                if number is None or number < 0:
                    what = "array origin" if a == "-O" else "line count"
                    sh.error(f"mapfile: {val}: invalid {what}")
                    return 1
                if a == "-n":
                    count = number
                elif a == "-O":
                    origin = number
                else:
                    skip = number
        elif a.startswith("-") and len(a) > 1:
            if "t" in a:
                strip = True
        else:
            name = a
        i += 1
    stream = sh.stdin
    data = stream.read_all() if stream is not None else ""
    lines: list[str] = []
    pos = 0
    while pos < len(data):
        j = data.find(delim, pos)
        if j < 0:
            lines.append(data[pos:])
            break
        lines.append(data[pos:j] if strip else data[pos : j + 1])
        pos = j + 1
    lines = lines[skip:]
    if count:
        lines = lines[:count]
    name = sh.target(name)
    if origin == 0:
        sh.unset(name)
    items = [(str(origin + k), line, False) for k, line in enumerate(lines)]
    sh.assign_array(name, items, append=origin > 0)  # type: ignore[arg-type]
    return 0


VARS_BUILTINS = {
    "declare": make_declare_builtin("declare"),
    "typeset": make_declare_builtin("typeset"),
    "local": make_declare_builtin("local"),
    "export": make_declare_builtin("export"),
    "readonly": make_declare_builtin("readonly"),
    "unset": unset,
    "read": read,
    "mapfile": mapfile,
    "readarray": mapfile,
}
