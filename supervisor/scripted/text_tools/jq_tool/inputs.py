"""Input text for jq: number literals as jq 1.6 sees them, and error positions.

libjq 1.7+ keeps a number literal's text (``1.0`` stays ``1.0`` in ``tostring`` and
string interpolation, ``100000000000000000001`` keeps its digits); jq 1.6 read every
number as a double. ``canonical_numbers`` rewrites the literals whose text differs from
1.6's rendering of their value, so ``"\\(.price)"`` of ``10.0`` is ``10`` as in 1.6.

``error_position`` reproduces jq 1.6's ``(at <stdin>:N)``: N counts the lines read when
the value was complete, and jq reads its input with ``fgets`` in 4095-byte chunks.
"""

from __future__ import annotations

import json
import re

from .output import format_number

#: Signs of a literal that may print differently in jq 1.6: a fraction ending in 0, an
#: exponent, 16+ digits. Cheap over-approximations (text in strings matches too), each
#: a scan Python's ``re`` runs fast because it starts with a literal.
_FRACTION_ZERO = re.compile(r"\.\d*0(?!\d)")
_EXPONENT_LOWER = re.compile(r"e[-+]?\d")
_EXPONENT_UPPER = re.compile(r"E[-+]?\d")
DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")


def _suspect(text: str) -> bool:
    return (
        _FRACTION_ZERO.search(text) is not None
        or _EXPONENT_LOWER.search(text) is not None
        or _EXPONENT_UPPER.search(text) is not None
        or "0" * 16 in text.translate(DIGITS_AS_ZERO)
    )


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')


class _Rewriter:
    """Replaces each literal by 1.6's rendering; notes when one needs an exponent (or
    overflows), which libjq would still print its own way (``1E+17``)."""

    def __init__(self) -> None:
        self.exponent = False

    def __call__(self, match: re.Match[str]) -> str:
        literal = match.group(1)
        if literal is None:
            return match.group(0)
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            self.exponent = True
            return literal
        text = format_number(value)
        if "e" in text:
            self.exponent = True
        return text


def canonical_numbers(text: str) -> tuple[str, bool]:
    """``text`` with each number literal replaced by jq 1.6's rendering of its value,
    and whether some literal still needs turning into a plain double inside jq."""
    if not _suspect(text):
        return text, False
    rewriter = _Rewriter()
    return _TOKEN.sub(rewriter, text), rewriter.exponent


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_CHUNK = 4095


def value_ends(text: str, count: int) -> list[int]:
    """Character offsets just past each of the first ``count`` JSON values of ``text``
    (fewer when the text stops parsing); only used to place an error message."""
    decoder = json.JSONDecoder()
    ends: list[int] = []
    pos = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    while pos < len(text) and len(ends) < count:
        try:
            _, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        ends.append(end)
        pos = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    return ends


def lines_read(data: bytes, completed_at: int) -> int:
    """Lines jq 1.6 has counted once the byte at ``completed_at`` was read: every
    ``fgets`` chunk (up to a newline, at most 4095 bytes) that holds a newline counts."""
    lines = 0
    pos = 0
    n = len(data)
    while pos < n:
        newline = data.find(b"\n", pos, pos + _CHUNK)
        end = pos + _CHUNK if newline < 0 else newline + 1
        if newline >= 0:
            lines += 1
        if completed_at < end:
            break
        pos = end
    return lines


def error_position(text: str, index: int) -> int:
    """The line number jq 1.6 prints for an error while processing value ``index``."""
    ends = value_ends(text, index + 1)
    if len(ends) <= index:
        return text.count("\n")
    end = ends[index]
    # A number or literal is complete only when the next byte is seen; a string,
    # array or object at its last byte.
    last = text[end - 1]
    completed = end if last not in '"]}' and end < len(text) else end - 1
    data_before = len(text[:completed].encode("utf-8", "surrogateescape"))
    return lines_read(text.encode("utf-8", "surrogateescape"), data_before)
