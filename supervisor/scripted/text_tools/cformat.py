"""C ``printf`` conversions, shared by ``seq -f`` and awk's ``printf``/``sprintf``.

Python's ``%`` operator is close to C's; the differences that matter are handled here:
``%i``/``%u`` (not in Python), ``%c`` of a number, and ``%d`` of a non-finite value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .common import check_size

#: ``%[flags][width][.precision]conversion`` (``*`` for width/precision from arguments).
SPEC = re.compile(r"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?([hlLqjzt]*)([a-zA-Z%])?")


@dataclass(frozen=True, slots=True)
class Spec:
    flags: str
    width: str | None  # digits, "*", or None
    precision: str | None  # digits ("" means 0), "*", or None
    conv: str

    def with_star(self, width: int | None, precision: int | None) -> Spec:
        flags = self.flags
        w = self.width
        if self.width == "*":
            assert width is not None
            if width < 0:
                flags += "-"
                width = -width
            w = str(width)
        p = self.precision
        if self.precision == "*":
            assert precision is not None
            p = None if precision < 0 else str(precision)
        return Spec(flags, w, p, self.conv)

    def prefix(self) -> str:
        # A width or precision past the output cap could only build a huge string.
        check_size(int(self.width) if self.width and self.width != "*" else 0)
        check_size(int(self.precision) if self.precision and self.precision != "*" else 0)
        flags = self.flags.replace("'", "")
        out = "%" + flags
        if self.width:
            out += self.width
        if self.precision is not None:
            out += "." + (self.precision or "0")
        return out


def parse(fmt: str) -> list[str | Spec]:
    """Literal text and conversion specs, in order. ``%%`` becomes a literal ``%``."""
    parts: list[str | Spec] = []
    pos = 0
    literal: list[str] = []
    while True:
        at = fmt.find("%", pos)
        if at < 0:
            literal.append(fmt[pos:])
            break
        literal.append(fmt[pos:at])
        m = SPEC.match(fmt, at)
        assert m is not None
        conv = m.group(5)
        if conv == "%" and m.end() == at + 2:
            literal.append("%")
            pos = m.end()
            continue
        if conv is None or conv not in "diouxXeEfFgGcsaA%":
            # Not a conversion C knows: printed as is.
            literal.append(fmt[at : m.end()])
            pos = m.end()
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(Spec(m.group(1), m.group(2), m.group(3), conv))
        pos = m.end()
    text = "".join(literal)
    if text:
        parts.append(text)
    return parts


def format_number(spec: Spec, value: float | int) -> str:
    """A numeric conversion (``d i o u x X e E f F g G``) of ``value``."""
    conv = spec.conv
    if conv in "diouxX":
        if isinstance(value, float):
            if not math.isfinite(value):
                return _nonfinite(spec, value)
            value = int(value)
        if conv in "iu":
            conv = "d"
        if value < 0 and conv in "oxX":
            value &= (1 << 64) - 1
        return (spec.prefix() + conv) % value
    if conv in "aA":
        text = float(value).hex()
        return _pad(spec, text.upper() if conv == "A" else text)
    return (spec.prefix() + conv) % float(value)


def _nonfinite(spec: Spec, value: float) -> str:
    text = "nan" if math.isnan(value) else ("-inf" if value < 0 else "inf")
    if "+" in spec.flags and not text.startswith("-"):
        text = "+" + text
    return _pad(spec, text)


def _pad(spec: Spec, text: str) -> str:
    width = int(spec.width) if spec.width and spec.width != "*" else 0
    check_size(width)
    if len(text) >= width:
        return text
    return text.ljust(width) if "-" in spec.flags else text.rjust(width)


def format_string(spec: Spec, text: str) -> str:
    """``%s`` (precision truncates) and ``%c`` of a string (its first character)."""
    if spec.conv == "c":
        text = text[:1]
    elif spec.precision is not None and spec.precision != "*":
        text = text[: int(spec.precision or "0")]
    return _pad(spec, text)


def format_char_code(spec: Spec, code: int) -> str:
    """``%c`` of a number: the character with that code."""
    try:
        ch = chr(code) if 0 <= code < 0x110000 else chr(code & 0xFF)
    except ValueError:  # pragma: no cover - guarded above
        ch = ""
    return _pad(spec, ch)
