"""The ``id`` of a JSON request line that no parser would take whole (no I/O here).

A malformed request still deserves an error answer with its id where the id can be read:
a line nested a hundred thousand levels deep makes a recursive JSON parser give up (or
die), and one wrong value elsewhere fails a typed decode. `top_level_id` reads the id of
the top-level object with a flat scan (no recursion, linear in the line) and decodes only
that value.
"""

from __future__ import annotations

from typing import Any

import msgspec

_SPACE = b" \t\r\n"
_NUMBER = b"-+0123456789.eE"


def _string_end(line: bytes, i: int) -> int:
    """The index after the string whose opening quote is at ``line[i]`` (-1: unclosed)."""
    j = i + 1
    n = len(line)
    while j < n:
        c = line[j]
        if c == 0x5C:  # backslash
            j += 2
            continue
        if c == 0x22:
            return j + 1
        j += 1
    return -1


def top_level_id(line: bytes) -> Any:
    """The value of the top-level object's ``"id"`` key (a string or a number), or None
    when the line is no object or has no readable id."""
    n = len(line)
    i = 0
    while i < n and line[i] in _SPACE:
        i += 1
    if i >= n or line[i] != 0x7B:  # {
        return None
    depth = 0
    expect_key = False
    while i < n:
        c = line[i]
        if c == 0x22:
            end = _string_end(line, i)
            if end < 0:
                return None
            if depth == 1 and expect_key and line[i:end] == b'"id"':
                return _value_after(line, end)
            expect_key = False
            i = end
            continue
        if c in b"{[":
            depth += 1
            expect_key = c == 0x7B and depth == 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return None
        elif c == 0x2C:  # ,
            expect_key = depth == 1
        i += 1
    return None


def _value_after(line: bytes, i: int) -> Any:
    n = len(line)
    while i < n and line[i] in _SPACE:
        i += 1
    if i >= n or line[i] != 0x3A:  # :
        return None
    i += 1
    while i < n and line[i] in _SPACE:
        i += 1
    if i >= n:
        return None
    if line[i] == 0x22:
        end = _string_end(line, i)
    else:
        end = i
        while end < n and line[end] in _NUMBER:
            end += 1
    if end <= i:
        return None
    try:
        return msgspec.json.decode(line[i:end])
    except msgspec.DecodeError:
        return None
