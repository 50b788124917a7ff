"""``uniq`` (GNU coreutils): collapse, count or pick adjacent repeated lines."""

from __future__ import annotations

import re
from collections.abc import Callable

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import clamped_count
from .common import Opt, OptionSpec, UsageError, reject_files, split_lines, usage_result

_SPEC = OptionSpec(
    [
        Opt("c", "c", "count"),
        Opt("d", "d", "repeated"),
        Opt("D", "D"),
        Opt("all", "", "all-repeated", arg=True, optional=True),
        Opt("group", "", "group", arg=True, optional=True),
        Opt("u", "u", "unique"),
        Opt("i", "i", "ignore-case"),
        Opt("f", "f", "skip-fields", arg=True),
        Opt("s", "s", "skip-chars", arg=True),
        Opt("w", "w", "check-chars", arg=True),
        Opt("z", "z", "zero-terminated"),
    ]
)

_FIELD = re.compile(r"[ \t]*[^ \t]*")


def _number(value: str, what: str) -> int:
    digits = value.strip()
    if not (digits.isdigit() and digits.isascii()):
        raise UsageError(f"{value}: invalid number of {what}")
    return clamped_count(digits)


def _key_function(
    skip_fields: int, skip_chars: int, width: int | None, icase: bool
) -> Callable[[str], str] | None:
    if not (skip_fields or skip_chars or width is not None or icase):
        return None

    def key(line: str) -> str:
        spend()
        pos = 0
        end = len(line)
        for _ in range(skip_fields):  # at most one field per character of the line
            if pos >= end:
                break
            m = _FIELD.match(line, pos)
            pos = m.end() if m else end
        part = line[pos + skip_chars :]
        if width is not None:
            part = part[:width]
        return part.casefold() if icase else part

    return key


def uniq(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
        count = repeated = unique = icase = False
        all_repeated: str | None = None
        group: str | None = None
        skip_fields = skip_chars = 0
        width: int | None = None
        sep = "\n"
        for key, value in opts:
            if key == "c":
                count = True
            elif key == "d":
                repeated = True
            elif key == "D":
                all_repeated = "none"
            elif key == "all":
                all_repeated = value or "none"
            elif key == "group":
                group = value or "separate"
            elif key == "u":
                unique = True
            elif key == "i":
                icase = True
            elif key == "f":
                skip_fields = _number(value, "fields to skip")
            elif key == "s":
                skip_chars = _number(value, "bytes to skip")
            elif key == "w":
                width = _number(value, "bytes to compare")
            elif key == "z":
                sep = "\0"
        if count and (all_repeated is not None or group is not None):
            raise UsageError("printing all duplicated lines and repeat counts is meaningless")
    except UsageError as err:
        return usage_result("uniq", err)
    rejected = reject_files("uniq", operands)
    if rejected is not None:
        return rejected
    lines, _ = split_lines(stdin, sep)
    keyfn = _key_function(skip_fields, skip_chars, width, icase)
    groups: list[list[str]] = []
    last_key: str | None = None
    for line in lines:
        spend()
        k = keyfn(line) if keyfn is not None else line
        if groups and k == last_key:
            groups[-1].append(line)
        else:
            groups.append([line])
            last_key = k
    out: list[str] = []
    if group is not None:
        for i, members in enumerate(groups):
            if group in ("prepend", "both") or (group in ("separate", "append") and i):
                out.append("")
            out.extend(members)
        if groups and group in ("append", "both"):
            out.append("")
    elif all_repeated is not None:
        first = True
        for members in groups:
            if len(members) < 2:
                continue
            if (not first and all_repeated == "separate") or (first and all_repeated == "prepend"):
                out.append("")
            first = False
            out.extend(members)
    else:
        for members in groups:
            n = len(members)
            if (repeated and n < 2) or (unique and n > 1):
                continue
            out.append(f"{n:7d} {members[0]}" if count else members[0])
    return CommandResult("".join(line + sep for line in out), "", 0)
