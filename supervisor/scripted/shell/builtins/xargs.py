"""``xargs``: command lines built from standard input, as GNU findutils' xargs builds them.

The input is read and cut into items first (``read_items``, pure: blanks and newlines
with quotes and backslashes, ``-d``/``-0`` delimiters, ``-L`` lines, ``-I`` whole lines),
then the items are grouped into command lines (``command_lines``, pure: ``-n``, ``-L``,
``-I`` and GNU's 128 KiB command buffer), and each line runs as a command of its own with
an empty standard input. As with bash, xargs runs programs, not the shell's functions or
its own builtins: a table command (a text tool, a host tool) or a builtin that is also a
program (``echo``, ``printf``, ``test``...); anything else is not found (127).

Differential cases: ``cases_builtins.txt``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...syntax.word_parser import decode_ansi_c
from ...text_tools.common import Opt, OptionSpec, UsageError
from ..exec_context import BUILTIN
from ..io import InputStream

if TYPE_CHECKING:
    from ..interpreter import Interpreter

#: GNU xargs' command buffer (``--show-limits``): a command line's arguments with a NUL
#: after each, in bytes
BUFFER = 131072
#: builtins of this shell that are also programs on a GNU system, so xargs can run them
PROGRAMS = frozenset({"echo", "printf", "test", "[", "true", "false", "env", "printenv", "kill"})
_BLANKS = " \t"


class XargsError(Exception):
    """Input or options xargs refuses: the message, then exit status 1."""


@dataclass
class Settings:
    max_args: int | None = None
    max_lines: int | None = None
    replace: str | None = None
    delimiter: str | None = None
    no_run_if_empty: bool = False
    trace: bool = False
    eof: str | None = None
    command: tuple[str, ...] = ("echo",)


_SPEC = OptionSpec(
    [
        Opt("0", "0", "null"),
        Opt("r", "r", "no-run-if-empty"),
        Opt("t", "t", "verbose"),
        Opt("x", "x", "exit"),
        Opt("p", "p", "interactive"),
        Opt("n", "n", "max-args", arg=True),
        Opt("L", "L", "max-lines", arg=True),
        Opt("I", "I", arg=True),
        Opt("i", "i", "replace", arg=True, optional=True),
        Opt("d", "d", "delimiter", arg=True),
        Opt("E", "E", arg=True),
        Opt("E", "e", "eof", arg=True, optional=True),
        Opt("P", "P", "max-procs", arg=True),
        Opt("s", "s", "max-chars", arg=True),
        Opt("a", "a", "arg-file", arg=True),
    ],
    permute=False,
)


def parse_options(args: list[str]) -> Settings:
    """GNU xargs' options (``-n2``, ``-n 2``, ``--max-args=2`` ...) up to the command
    (``-i`` and ``-e`` take a value only in their long forms: ``--replace=R``)."""
    try:
        opts, command = _SPEC.parse(args)
    except UsageError as exc:
        raise XargsError(exc.message) from None
    s = Settings()
    for key, value in opts:
        if key == "0":
            s.delimiter = "\0"
        elif key == "r":
            s.no_run_if_empty = True
        elif key == "t":
            s.trace = True
        elif key == "p":
            raise XargsError("-p (interactive prompt): there is no terminal to ask")
        elif key in "nL":
            n = _positive(key, value)
            s.max_args, s.max_lines = (n, None) if key == "n" else (None, n)
            s.replace = None
        elif key in "Ii":
            s.replace = value or "{}"
            s.max_args = s.max_lines = None
        elif key == "d":
            s.delimiter = _delimiter(value)
        elif key == "E":
            s.eof = value or None
        elif key == "a":
            raise XargsError(f"{value}: filesystem access disabled")
        elif key in "Ps":
            _positive(key, value)  # checked; lines run in turn, within GNU's buffer
    if command:
        s.command = tuple(command)
    return s


def _positive(c: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise XargsError(f'invalid number "{value}" for -{c} option')
    return int(value)


def _delimiter(text: str) -> str:
    if len(text) == 1:
        return text
    decoded = decode_ansi_c(text) if text.startswith("\\") else text
    if len(decoded) != 1:
        raise XargsError(f"invalid input delimiter specification {text}")
    return decoded


def read_items(text: str, s: Settings) -> list[list[str]]:
    """The input's items, by input line where ``-L``/``-I`` count lines (else one group).
    A quote left open is an error, as in GNU xargs."""
    if s.delimiter is not None:
        items = text.split(s.delimiter)
        if items and items[-1] == "":
            items.pop()  # the delimiter ends the last item
        return [_before_eof(items, s.eof)]
    lines: list[list[str]] = []
    cur: list[str] = []
    item: list[str] = []
    started = False
    whole_lines = s.replace is not None  # -I: a line is one item, blanks and all
    by_line = whole_lines or s.max_lines is not None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            close = text.find(c, i + 1)
            newline = text.find("\n", i + 1)
            if close < 0 or 0 <= newline < close:
                kind = "single" if c == "'" else "double"
                raise XargsError(
                    f"unmatched {kind} quote; by default quotes are special to xargs "
                    "unless you use the -0 option"
                )
            item.append(text[i + 1 : close])
            started = True
            i = close + 1
            continue
        if c == "\\" and i + 1 < n:
            item.append(text[i + 1])
            started = True
            i += 2
            continue
        if c == "\n" or (c in _BLANKS and not (whole_lines and started)):
            if started:
                word = "".join(item)
                if s.eof is not None and word == s.eof:
                    return _finish(lines, cur)
                cur.append(word)
                item, started = [], False
            continued = not whole_lines and i > 0 and text[i - 1] in _BLANKS  # -L: a trailing
            if c == "\n" and by_line and cur and not continued:  # blank joins the next line
                lines.append(cur)
                cur = []
            i += 1
            continue
        item.append(c)
        started = True
        i += 1
    if started:
        word = "".join(item)
        if s.eof is None or word != s.eof:
            cur.append(word)
    return _finish(lines, cur)


def _finish(lines: list[list[str]], cur: list[str]) -> list[list[str]]:
    if cur:
        lines.append(cur)
    return lines


def _before_eof(items: list[str], eof: str | None) -> list[str]:
    if eof is not None and eof in items:
        return items[: items.index(eof)]
    return items


def command_lines(groups: list[list[str]], s: Settings) -> list[list[str]]:
    """The argument vectors to run, in order."""
    base = list(s.command)
    if s.replace is not None:
        rep = s.replace
        lines = [" ".join(g) if len(g) > 1 else g[0] for g in groups]
        return [[a.replace(rep, line) for a in base] for line in lines]
    if s.max_lines is not None:
        out: list[list[str]] = []
        for k in range(0, len(groups), s.max_lines):
            chunk = [w for g in groups[k : k + s.max_lines] for w in g]
            out.extend(_by_size(base, chunk, None))
        return out
    items = [w for g in groups for w in g]
    if not items:
        return [] if s.no_run_if_empty else [base]
    return _by_size(base, items, s.max_args)


def _by_size(base: list[str], items: list[str], per_line: int | None) -> list[list[str]]:
    """``items`` after ``base``, at most ``per_line`` to a line and within the buffer."""
    base_size = sum(len(a.encode("utf-8", "surrogateescape")) + 1 for a in base)
    out: list[list[str]] = []
    cur: list[str] = []
    size = base_size
    for w in items:
        cost = len(w.encode("utf-8", "surrogateescape")) + 1
        if cur and (size + cost > BUFFER or (per_line is not None and len(cur) >= per_line)):
            out.append(base + cur)
            cur, size = [], base_size
        if base_size + cost > BUFFER:
            raise XargsError("argument line too long")
        cur.append(w)
        size += cost
    if cur:
        out.append(base + cur)
    return out


def xargs(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    try:
        s = parse_options(args)
        text = sh.stdin.read_all() if sh.stdin is not None else ""
        argvs = command_lines(read_items(text, s), s)
    except XargsError as exc:
        sh.err.write(f"xargs: {exc}\n")
        return 1
    if not argvs:
        return 0
    return _run(sh, argvs, s.trace)


async def _run(sh: Interpreter, argvs: list[list[str]], trace: bool) -> int:
    status = 0
    saved_in, saved_functions = sh.stdin, sh.functions
    try:
        for argv in argvs:
            name = argv[0]
            entry = sh.ctx.resolve(name)
            if entry is None or (entry[0] == BUILTIN and name not in PROGRAMS):
                sh.err.write(f"xargs: {name}: No such file or directory\n")
                return 127
            if trace:
                sh.err.write(" ".join(argv) + "\n")
            sh.stdin = InputStream("")
            sh.functions = {}  # a program, never a function of the same name
            code = await sh.invoke(argv)
            sh.functions = saved_functions
            if code == 255:
                sh.err.write(f"xargs: {name}: exited with status 255; aborting\n")
                return 124
            if code in (126, 127):
                return code
            if code:
                status = 123
    finally:
        sh.stdin, sh.functions = saved_in, saved_functions
    return status
