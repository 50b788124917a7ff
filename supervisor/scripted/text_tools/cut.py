"""``cut`` (GNU coreutils): selected fields, characters or bytes of each line.

As in GNU coreutils, ``-c`` counts bytes, like ``-b``: a multi-byte character cut in
half comes out as U+FFFD.
"""

from __future__ import annotations

import re

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import count_value
from .common import (
    Opt,
    OptionSpec,
    UsageError,
    from_bytes,
    reject_files,
    split_lines,
    to_bytes,
    usage_result,
)

_SPEC = OptionSpec(
    [
        Opt("b", "b", "bytes", arg=True),
        Opt("c", "c", "characters", arg=True),
        Opt("f", "f", "fields", arg=True),
        Opt("d", "d", "delimiter", arg=True),
        Opt("s", "s", "only-delimited"),
        Opt("n", "n"),
        Opt("complement", "", "complement"),
        Opt("od", "", "output-delimiter", arg=True),
        Opt("z", "z", "zero-terminated"),
    ]
)

_RANGE = re.compile(r"(\d*)(-?)(\d*)")

Ranges = list[tuple[int, int]]  # 1-based, inclusive; the end may be a large sentinel
_OPEN = 1 << 62


def _parse_list(text: str, kind: str) -> Ranges:
    ranges: Ranges = []
    for part in re.split(r"[,\s]", text):
        m = _RANGE.fullmatch(part)
        if m is None or part in ("", "-"):
            what = "field value" if kind == "f" else "byte/character position"
            if part == "-" or part == "":
                raise UsageError("invalid range with no endpoint: -")
            raise UsageError(f"invalid {what} ‘{part}’")
        low_s, dash, high_s = m.groups()
        for given in (low_s, high_s):
            if given and count_value(given) is None:
                raise UsageError(
                    f"field number ‘{given}’ is too large"
                    if kind == "f"
                    else f"byte/character offset ‘{given}’ is too large"
                )
        low = int(low_s) if low_s else 1
        high = (int(high_s) if high_s else _OPEN) if dash else low
        if low == 0 or (high_s and int(high_s) == 0):
            raise UsageError(
                "fields are numbered from 1"
                if kind == "f"
                else "byte/character positions are numbered from 1"
            )
        if high < low:
            raise UsageError("invalid decreasing range")
        ranges.append((low, high))
    ranges.sort()
    merged: Ranges = []
    for low, high in ranges:
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    start = 1
    for low, high in ranges:
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start < _OPEN:
        out.append((start, _OPEN))
    return out


def cut(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
        kind = ""
        spec = ""
        delim: str | None = None
        out_delim: str | None = None
        only_delimited = complement = False
        sep = "\n"
        for key, value in opts:
            if key in "bcf":
                if kind:
                    raise UsageError("only one list may be specified")
                kind, spec = key, value
            elif key == "d":
                if len(value) > 1:
                    raise UsageError("the delimiter must be a single character")
                delim = value or "\0"
            elif key == "s":
                only_delimited = True
            elif key == "complement":
                complement = True
            elif key == "od":
                out_delim = value
            elif key == "z":
                sep = "\0"
        if not kind:
            raise UsageError("you must specify a list of bytes, characters, or fields")
        if kind != "f" and delim is not None:
            raise UsageError("an input delimiter may be specified only when operating on fields")
        if kind != "f" and only_delimited:
            raise UsageError(
                "suppressing non-delimited lines makes sense\n\tonly when operating on fields"
            )
        ranges = _parse_list(spec, kind)
    except UsageError as err:
        return usage_result("cut", err)
    rejected = reject_files("cut", operands)
    if rejected is not None:
        return rejected
    if complement:
        ranges = _complement(ranges)
    lines, _ = split_lines(stdin, sep)
    if kind == "f":
        d = delim if delim is not None else "\t"
        od = out_delim if out_delim is not None else d
        out = _fields(lines, ranges, d, od, only_delimited)
    else:
        out = _bytes(lines, ranges, out_delim)
    return CommandResult("".join(line + sep for line in out), "", 0)


def _fields(lines: list[str], ranges: Ranges, d: str, od: str, only: bool) -> list[str]:
    out: list[str] = []
    single = len(ranges) == 1 and ranges[0][1] == ranges[0][0]
    for line in lines:
        spend()
        if d not in line:
            if not only:
                out.append(line)
            continue
        parts = line.split(d)
        if single:
            i = ranges[0][0] - 1
            out.append(parts[i] if i < len(parts) else "")
            continue
        chosen: list[str] = []
        for low, high in ranges:
            chosen.extend(parts[low - 1 : high])
        out.append(od.join(chosen))
    return out


def _bytes(lines: list[str], ranges: Ranges, od: str | None) -> list[str]:
    out: list[str] = []
    for line in lines:
        spend()
        data = to_bytes(line)
        pieces = [data[low - 1 : high] for low, high in ranges]
        if od is None:
            out.append(from_bytes(b"".join(pieces)))
        else:
            out.append(od.join(from_bytes(p) for p in pieces if p))
    return out
