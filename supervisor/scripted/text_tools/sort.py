"""``sort`` (GNU coreutils) for the C.UTF-8 locale: keys, numeric kinds, unique, check.

Each key is turned into a comparable value once per line, then Python's stable sort runs
once per key from the last key to the first (each with its own direction), after a first
pass by the whole line, GNU's last-resort comparison (dropped by ``-s`` and ``-u``).
Field and character positions follow coreutils' ``begfield``/``limfield``.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from supervisor.scripted.contract import CommandResult

from ..budget import check_time, spend
from ..integers import clamped_count
from .common import Opt, OptionSpec, UsageError, reject_files, split_lines, usage_result

_SPEC = OptionSpec(
    [
        Opt("b", "b", "ignore-leading-blanks"),
        Opt("d", "d", "dictionary-order"),
        Opt("f", "f", "ignore-case"),
        Opt("g", "g", "general-numeric-sort"),
        Opt("i", "i", "ignore-nonprinting"),
        Opt("M", "M", "month-sort"),
        Opt("h", "h", "human-numeric-sort"),
        Opt("n", "n", "numeric-sort"),
        Opt("R", "R", "random-sort"),
        Opt("r", "r", "reverse"),
        Opt("V", "V", "version-sort"),
        Opt("sort", "", "sort", arg=True),
        Opt("c", "c", "check", arg=True, optional=True),
        Opt("C", "C"),
        Opt("k", "k", "key", arg=True),
        Opt("m", "m", "merge"),
        Opt("o", "o", "output", arg=True),
        Opt("s", "s", "stable"),
        Opt("S", "S", "buffer-size", arg=True),
        Opt("t", "t", "field-separator", arg=True),
        Opt("T", "T", "temporary-directory", arg=True),
        Opt("u", "u", "unique"),
        Opt("z", "z", "zero-terminated"),
        Opt("parallel", "", "parallel", arg=True),
        Opt("batch", "", "batch-size", arg=True),
        Opt("random-source", "", "random-source", arg=True),
        Opt("debug", "", "debug"),
    ]
)

_ORDERING = "bdfgiMhnRrV"
_SORT_WORDS = {
    "general-numeric": "g",
    "human-numeric": "h",
    "month": "M",
    "numeric": "n",
    "random": "R",
    "version": "V",
}


@dataclass(slots=True)
class _Key:
    sword: int  # 0-based start field
    schar: int  # 0-based start character
    eword: int | None  # 0-based end field, None for end of line
    echar: int  # end character (1-based), 0 for the end of the field
    opts: str
    skip_start: bool
    skip_end: bool

    @property
    def reverse(self) -> bool:
        return "r" in self.opts


def _parse_key(text: str, global_opts: str) -> _Key:
    m = re.fullmatch(r"(\d+)(?:\.(\d+))?([a-zA-Z]*)(?:,(\d+)(?:\.(\d+))?([a-zA-Z]*))?", text)
    if m is None:
        bad = re.match(r"\d*", text)
        raise UsageError(
            f"invalid number at field start: invalid count at start of ‘{text}’"
            if bad is None or not bad.group(0)
            else f"stray character in field spec: invalid field specification ‘{text}’",
            status=2,
        )
    f1, c1, o1, f2, c2, o2 = m.groups()
    for opts in (o1, o2 or ""):
        for ch in opts:
            if ch not in _ORDERING:
                raise UsageError(
                    f"stray character in field spec: invalid field specification ‘{text}’", status=2
                )
    if clamped_count(f1) == 0:
        raise UsageError(f"field number is zero: invalid field specification ‘{text}’", status=2)
    if c1 is not None and clamped_count(c1) == 0:
        raise UsageError(
            f"character offset is zero: invalid field specification ‘{text}’", status=2
        )
    if f2 is not None and clamped_count(f2) == 0:
        raise UsageError(f"field number is zero: invalid field specification ‘{text}’", status=2)
    opts = (o1 or "") + (o2 or "")
    inherited = not opts
    if inherited:
        opts = global_opts
    return _Key(
        sword=clamped_count(f1) - 1,
        schar=clamped_count(c1) - 1 if c1 else 0,
        eword=clamped_count(f2) - 1 if f2 is not None else None,
        echar=clamped_count(c2) if c2 else 0,
        opts=opts.replace("b", ""),
        skip_start=("b" in o1) or (inherited and "b" in global_opts),
        skip_end=("b" in (o2 or "")) or (inherited and "b" in global_opts),
    )


def _blank(ch: str) -> bool:
    return ch == " " or ch == "\t"


def _begfield(line: str, key: _Key, tab: str | None) -> int:
    ptr = 0
    lim = len(line)
    sword = key.sword
    if tab is not None:
        while ptr < lim and sword:
            sword -= 1
            found = line.find(tab, ptr)
            ptr = lim if found < 0 else found + 1
    else:
        while ptr < lim and sword:
            sword -= 1
            while ptr < lim and _blank(line[ptr]):
                ptr += 1
            while ptr < lim and not _blank(line[ptr]):
                ptr += 1
    if key.skip_start:
        while ptr < lim and _blank(line[ptr]):
            ptr += 1
    return min(lim, ptr + key.schar)


def _limfield(line: str, key: _Key, tab: str | None) -> int:
    assert key.eword is not None
    ptr = 0
    lim = len(line)
    eword = key.eword + (1 if key.echar == 0 else 0)
    echar = key.echar
    if tab is not None:
        while ptr < lim and eword:
            eword -= 1
            found = line.find(tab, ptr)
            ptr = lim if found < 0 else found
            if ptr < lim and (eword or echar):
                ptr += 1
    else:
        while ptr < lim and eword:
            eword -= 1
            while ptr < lim and _blank(line[ptr]):
                ptr += 1
            while ptr < lim and not _blank(line[ptr]):
                ptr += 1
    if echar:
        if key.skip_end:
            while ptr < lim and _blank(line[ptr]):
                ptr += 1
        ptr = min(lim, ptr + echar)
    return ptr


_NUMERIC = re.compile(r"[ \t]*(-?\d*(?:\.\d*)?)")
_GENERAL = re.compile(
    r"\s*([-+]?(?:inf(?:inity)?|nan|0x[0-9a-f]*\.?[0-9a-f]*(?:p[-+]?\d+)?|(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?))",
    re.IGNORECASE,
)
_HUMAN = re.compile(r"[ \t]*(-?)(\d*(?:\.\d*)?)([KMGTPEZYRQk]?)")
_HUMAN_RANK = {
    "": 0,
    "k": 1,
    "K": 1,
    "M": 2,
    "G": 3,
    "T": 4,
    "P": 5,
    "E": 6,
    "Z": 7,
    "Y": 8,
    "R": 9,
    "Q": 10,
}
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_FOLD = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _numeric(text: str) -> float | Decimal:
    if text.isascii() and text.isdigit() and len(text) <= 15:
        return float(text)  # the common key, without the regex
    m = _NUMERIC.match(text)
    num = m.group(1) if m else ""
    if not num.strip("-.") or not any(c.isdigit() for c in num):
        return 0.0
    if num.endswith("."):
        num = num[:-1]
    if num.startswith("-."):
        num = "-0" + num[1:]
    elif num.startswith("."):
        num = "0" + num
    return float(num) if len(num) <= 15 else Decimal(num)


def _general(text: str) -> tuple[int, float]:
    m = _GENERAL.match(text)
    if m is None:
        return (0, 0.0)
    word = m.group(1)
    try:
        value = float.fromhex(word) if "x" in word.lower() else float(word)
    except ValueError:
        return (0, 0.0)
    if math.isnan(value):
        return (1, 0.0)
    return (2, value)


def _human(text: str) -> tuple[int, int, float]:
    m = _HUMAN.match(text)
    if m is None or not any(c.isdigit() for c in m.group(2)):
        return (0, 0, 0.0)
    value = float(m.group(2).rstrip(".") or "0")
    rank = _HUMAN_RANK[m.group(3)]
    if m.group(1):
        return (-1, -rank, -value)
    return (1 if value else 0, rank, value)


def _month(text: str) -> int:
    return _MONTHS.get(text.lstrip(" \t")[:3].upper(), 0)


def _ver_order(ch: str) -> int:
    if ch.isalpha() and ch.isascii():
        return ord(ch)
    if ch == "~":
        return -1
    return ord(ch) + 256


_VER_CHUNK = re.compile(r"(\D*)(\d*)")
_VER_SUFFIX = re.compile(r"(?:\.[A-Za-z~][A-Za-z0-9~]*)*$")


def _big(digits: str) -> tuple[int, str]:
    """A run of digits as a key that orders by value, however long it is (``int`` of a
    script's text stops at 4,300 digits): shorter is smaller, then the digits."""
    digits = digits.lstrip("0")
    return (len(digits), digits)


def _verkey(text: str) -> tuple[Any, ...]:
    parts: list[Any] = []
    for m in _VER_CHUNK.finditer(text):
        if not m.group(0):
            break
        parts.append((*(_ver_order(c) for c in m.group(1)), 0))
        parts.append(_big(m.group(2)))
    parts.append((0,))  # the end of the string orders after "~" and before anything else
    return tuple(parts)


def _version(text: str) -> tuple[Any, ...]:
    m = _VER_SUFFIX.search(text)
    prefix = text[: m.start()] if m and m.start() > 0 else text
    return (_verkey(prefix), _verkey(text), text)


def _transform(opts: str) -> Callable[[str], Any]:
    """The value one key of a line is compared by."""
    if "n" in opts:
        return _numeric
    if "g" in opts:
        return _general
    if "h" in opts:
        return _human
    if "M" in opts:
        return _month
    if "V" in opts:
        return _version
    if "R" in opts:
        salt = secrets.token_bytes(16)
        return lambda s: hashlib.blake2b(s.encode("utf-8", "surrogateescape"), key=salt).digest()
    steps: list[Callable[[str], str]] = []
    if "d" in opts:
        steps.append(lambda s: "".join(c for c in s if c.isalnum() or _blank(c)))
    elif "i" in opts:
        steps.append(lambda s: "".join(c for c in s if c.isprintable()))
    if "f" in opts:
        steps.append(lambda s: s.translate(_FOLD))
    if not steps:
        return lambda s: s

    def apply(s: str) -> str:
        for step in steps:
            s = step(s)
        return s

    return apply


def sort(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
        global_opts = ""
        key_texts: list[str] = []
        tab: str | None = None
        check: str | None = None
        unique = stable = merge = False
        sep = "\n"
        output: str | None = None
        for name, value in opts:
            if len(name) == 1 and name in _ORDERING:
                global_opts += name
            elif name == "sort":
                if value not in _SORT_WORDS:
                    raise UsageError(f"invalid argument ‘{value}’ for ‘--sort’", status=2)
                global_opts += _SORT_WORDS[value]
            elif name == "k":
                key_texts.append(value)
            elif name == "t":
                if value == "":
                    raise UsageError("empty tab", status=2, hint=False)
                if len(value) > 1 and value != "\\0":
                    raise UsageError(f"multi-character tab ‘{value}’", status=2, hint=False)
                tab = "\0" if value == "\\0" else value
            elif name == "c":
                check = "quiet" if value in ("quiet", "silent") else "diagnose"
            elif name == "C":
                check = "quiet"
            elif name == "u":
                unique = True
            elif name == "s":
                stable = True
            elif name == "m":
                merge = True
            elif name == "z":
                sep = "\0"
            elif name == "o":
                output = value
        kinds = [k for k in "ghMnRV" if k in global_opts]
        if len(kinds) > 1:
            raise UsageError(f"options '-{''.join(kinds)}' are incompatible", status=2)
        keys = [_parse_key(k, global_opts) for k in key_texts]
    except UsageError as err:
        return usage_result("sort", err, status=2)
    rejected = reject_files("sort", operands, status=2)
    if rejected is not None:
        return rejected
    if output is not None and output != "-":
        return CommandResult("", f"sort: open failed: {output}: filesystem access disabled\n", 2)
    lines, _ = split_lines(stdin, sep)
    reverse_all = "r" in global_opts
    if not keys:
        keys = [
            _Key(
                0, 0, None, 0, global_opts.replace("b", ""), "b" in global_opts, "b" in global_opts
            )
        ]
    last_resort = not stable and not unique
    extractors = [_extractor(key, tab) for key in keys]
    values = [_column(extract, lines) for extract in extractors]

    if check is not None:
        return _check(lines, keys, values, last_resort, reverse_all, unique, check, sep)
    if merge:
        # One input stream: there is nothing to merge; GNU emits it unchanged.
        return CommandResult("".join(line + sep for line in lines), "", 0)

    order = list(range(len(lines)))
    if last_resort:
        order = _bounded_sort(order, lines.__getitem__, reverse_all)
    for key, column in reversed(list(zip(keys, values, strict=True))):
        order = _bounded_sort(order, column.__getitem__, key.reverse)
    if unique:
        kept: list[int] = []
        previous: list[Any] | None = None
        for i in order:
            current = [column[i] for column in values]
            if current != previous:
                kept.append(i)
                previous = current
        order = kept
    return CommandResult("".join(lines[i] + sep for i in order), "", 0)


#: a sort of more lines runs in slices of this many (each one C call), then merges
_SORT_SLICE = 1 << 16


def _bounded_sort(order: list[int], key: Callable[[int], Any], reverse: bool) -> list[int]:
    """``sorted(order, key=key, reverse=reverse)`` (stable) within the deadline: a long
    input is sorted in slices, the clock checked before each, and merged with fuel (one C
    sort of a million lines would outlast a short deadline)."""
    check_time()
    if len(order) <= _SORT_SLICE:
        order.sort(key=key, reverse=reverse)
        return order
    runs: list[list[int]] = []
    for start in range(0, len(order), _SORT_SLICE):
        check_time()
        runs.append(sorted(order[start : start + _SORT_SLICE], key=key, reverse=reverse))
    merged: list[int] = []
    for i, item in enumerate(heapq.merge(*runs, key=key, reverse=reverse)):
        if not i & 4095:
            spend(4096)
        merged.append(item)
    return merged


def _column(extract: Callable[[str], Any], lines: list[str]) -> list[Any]:
    """The sort key of every line, in slices that spend fuel (the deadline holds)."""
    column: list[Any] = []
    for start in range(0, len(lines), 1024):
        spend(1024)
        column.extend(map(extract, lines[start : start + 1024]))
    return column


def _extractor(key: _Key, tab: str | None) -> Callable[[str], Any]:
    transform = _transform(key.opts)
    whole = key.sword == 0 and key.schar == 0 and key.eword is None and not key.skip_start
    if whole:
        return transform

    def extract(line: str) -> Any:
        beg = _begfield(line, key, tab)
        end = _limfield(line, key, tab) if key.eword is not None else len(line)
        return transform(line[beg:end] if end > beg else "")

    return extract


def _check(
    lines: list[str],
    keys: list[_Key],
    values: list[list[Any]],
    last_resort: bool,
    reverse_all: bool,
    unique: bool,
    mode: str,
    sep: str,
) -> CommandResult:
    for i in range(1, len(lines)):
        cmp = 0
        for key, column in zip(keys, values, strict=True):
            a, b = column[i - 1], column[i]
            if a != b:
                cmp = (1 if a > b else -1) * (-1 if key.reverse else 1)
                break
        if cmp == 0 and last_resort and lines[i - 1] != lines[i]:
            cmp = (1 if lines[i - 1] > lines[i] else -1) * (-1 if reverse_all else 1)
        if cmp > 0 or (cmp == 0 and unique):
            err = "" if mode == "quiet" else f"sort: -:{i + 1}: disorder: {lines[i]}\n"
            return CommandResult("", err, 1)
    del sep
    return CommandResult("", "", 0)
