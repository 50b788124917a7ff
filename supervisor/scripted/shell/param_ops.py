"""Pure string operations behind ``${x...}`` forms and ``declare -p``/``printf %q``:
quoting styles, case conversion, substrings. No shell state here.

Differential cases: ``cases_expansion.txt``, ``cases_arrays.txt``.
"""

from __future__ import annotations

import re

from ..case_map import lower, lower_char, toggle, toggle_char, upper, upper_char
from ..syntax.word_parser import decode_ansi_c
from .patterns import fnmatch
from .state import (
    ARRAY,
    ASSOC,
    EXPORT,
    INTEGER,
    LOWER,
    NAMEREF,
    READONLY,
    UPPER,
    Var,
    assoc_items,
)

#: control characters: a value holding one is quoted ``$'...'``
_CONTROL = re.compile("[\x00-\x1f\x7f]")
#: what ``$'...'`` writes for each character that needs it (C speed on a long value)
_ANSI_TABLE = {o: f"\\{o:03o}" for o in (*range(32), 127)} | {
    ord(c): e
    for c, e in (("\n", "\\n"), ("\t", "\\t"), ("\r", "\\r"), ("\x1b", "\\E"),
                 ("\a", "\\a"), ("\b", "\\b"), ("\f", "\\f"), ("\v", "\\v"),
                 ("'", "\\'"), ("\\", "\\\\"))
}  # fmt: skip
#: the characters ``printf %q`` escapes (``~`` only at the start)
_PRINTF_UNSAFE = re.compile(r"[^a-zA-Z0-9_\-./:=+@%,^~\x80-\U0010ffff]")


def quote_single(value: str) -> str:
    """``${x@Q}`` style: ``'...'``, or ``$'...'`` when control characters appear."""
    if _CONTROL.search(value):
        return "$'" + value.translate(_ANSI_TABLE) + "'"
    return "'" + value.replace("'", "'\\''") + "'"


def quote_double(value: str) -> str:
    """``declare -p`` style: ``"..."`` with ``\\ " $ ` `` escaped."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return '"' + out.replace("`", "\\`") + '"'


def quote_printf(value: str) -> str:
    """``printf %q``: backslash-escape shell metacharacters; ``''`` for empty."""
    if value == "":
        return "''"
    if _CONTROL.search(value):
        return "$'" + value.translate(_ANSI_TABLE) + "'"
    out = _PRINTF_UNSAFE.sub(r"\\\g<0>", value)
    return "\\" + out if out.startswith("~") else out


def convert_case(value: str, op: str, pattern: str | None, flags: int = 0) -> str:
    """``^ ^^ , ,, ~ ~~`` (first char / all chars; upper, lower, toggled case),
    restricted to chars matching pattern."""
    if not value:
        return value
    one, every_char = _CASE_OPS[op[0]]
    every = len(op) == 2

    def conv(c: str) -> str:
        if pattern is not None and pattern != "" and not fnmatch(c, pattern, flags):
            return c
        return one(c)

    if every:
        if pattern is None or pattern == "" or pattern == "?":
            return every_char(value)
        # each distinct character once, then a C-speed translate (a value may be 10 MB)
        return value.translate({ord(c): conv(c) for c in set(value)})
    return conv(value[0]) + value[1:]


#: a case operator's first character: (one character, a whole value)
_CASE_OPS = {
    "^": (upper_char, upper),
    ",": (lower_char, lower),
    "~": (toggle_char, toggle),
}


def substring(value: str, offset: int, length: int | None) -> str:
    n = len(value)
    if offset < 0:
        offset = n + offset
        if offset < 0:
            return ""
    if offset > n:
        return ""
    if length is None:
        return value[offset:]
    if length < 0:
        end = n + length
        if end < offset:
            raise ValueError(f"{length}: substring expression < 0")
        return value[offset:end]
    return value[offset : offset + length]


def slice_items(items: list[tuple[int, str]], offset: int, length: int | None) -> list[str]:
    """``${a[@]:off:len}`` over (index, value) pairs: elements with index >= offset."""
    if offset < 0:
        top = items[-1][0] + 1 if items else 0
        offset = top + offset
        if offset < 0:
            return []
    chosen = [v for i, v in items if i >= offset]
    if length is None:
        return chosen
    if length < 0:
        raise ValueError(f"{length}: substring expression < 0")
    return chosen[:length]


def transform(op: str, value: str) -> str:
    """``${x@U}`` and friends on one value (``@Q``/``@A``/``@a``/``@K`` handled by caller)."""
    if op == "@U":
        return upper(value)
    if op == "@u":
        return upper(value[:1]) + value[1:]
    if op == "@L":
        return lower(value)
    if op == "@E":
        return decode_ansi_c(value)
    if op == "@Q":
        return quote_single(value)
    return value  # @P (prompt) and anything else: the value itself


def attr_flags(v: Var) -> str:
    """The option letters of ``declare -p`` (``-a``, ``-Ai``, ``--``...)."""
    flags = ""
    if v.attrs & ASSOC:
        flags += "A"
    elif v.attrs & ARRAY or type(v.value) is dict:
        flags += "a"
    for bit, letter in (
        (INTEGER, "i"),
        (LOWER, "l"),
        (NAMEREF, "n"),
        (READONLY, "r"),
        (UPPER, "u"),
        (EXPORT, "x"),
    ):
        if v.attrs & bit:
            flags += letter
    return "-" + flags if flags else "--"


def format_declare(name: str, v: Var) -> str:
    """One ``declare -p`` line (without the newline)."""
    flags = attr_flags(v)
    val = v.value
    if val is None:
        return f"declare {flags} {name}"
    if type(val) is dict:
        if v.attrs & ASSOC:
            body = "".join(
                f"[{_assoc_key(str(k))}]={quote_double(x)} " for k, x in assoc_items(val)
            )
        else:
            body = " ".join(f"[{k}]={quote_double(x)}" for k, x in sorted(val.items()))
        return f"declare {flags} {name}=({body})"
    return f"declare {flags} {name}={quote_double(val)}"  # type: ignore[arg-type]


def _assoc_key(key: str) -> str:
    if key and all(c.isalnum() or c in "_-./:" for c in key):
        return key
    return quote_double(key)
