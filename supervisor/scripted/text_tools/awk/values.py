"""awk values: numbers, strings, and the "strnum" strings that come from input.

A value is a ``float`` (number), a ``str`` (string constant or computed string), a
``StrNum`` (text from a field, ``getline``, ``split`` or ``-v``: compared as a number
when it looks like one) or ``UNINIT`` (an unset variable: "" and 0 at once). The
comparison rule is POSIX's: numeric when both sides are numeric (a number, ``UNINIT``,
or a numeric-looking ``StrNum``), otherwise as strings.
"""

from __future__ import annotations

import math
import re

from .. import cformat


class StrNum(str):
    """Input text: a string that compares as a number when it looks like one."""

    __slots__ = ()


class _Uninit(StrNum):
    __slots__ = ()


UNINIT: StrNum = _Uninit("")

Value = float | str

_LEADING_NUMBER = re.compile(
    r"[ \t\n\r\f\v]*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))"
)
_WHOLE_NUMBER = re.compile(
    r"[ \t\n\r\f\v]*[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[ \t\n\r\f\v]*"
)
_SPECIAL = re.compile(r"[ \t\n\r\f\v]*([-+])(inf|nan)", re.IGNORECASE)


def to_number(value: Value) -> float:
    """awk's string-to-number: the longest numeric prefix, 0 if none (gawk also reads a
    signed ``+inf``/``-nan``)."""
    if type(value) is float:
        return value
    if not value:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return _slow_number(str(value))
    # float() also takes "inf", "nan" and "1_000", which awk reads differently.
    if number - number == 0.0 and "_" not in str(value):
        return number
    return _slow_number(str(value))


def _slow_number(text: str) -> float:
    m = _LEADING_NUMBER.match(text)
    if m is None:
        special = _SPECIAL.match(text)
        if special is None:
            return 0.0
        sign = -1.0 if special.group(1) == "-" else 1.0
        return math.copysign(math.inf if special.group(2).lower() == "inf" else math.nan, sign)
    try:
        return float(m.group(1))
    except OverflowError:  # pragma: no cover - float() returns inf instead
        return math.inf


def looks_numeric(value: StrNum) -> bool:
    if value is UNINIT:
        return True
    return _WHOLE_NUMBER.fullmatch(value) is not None or (
        _SPECIAL.match(value) is not None and value.strip().lower()[1:] in ("inf", "nan")
    )


def is_numeric(value: Value) -> bool:
    t = type(value)
    if t is float:
        return True
    if t is str:
        return False
    return looks_numeric(value)  # type: ignore[arg-type]


def to_int(value: float) -> int:
    """A number as a C integer conversion gives it: truncated; NaN is 0 and the
    infinities are the 64-bit extremes (``int`` of them would raise)."""
    if value != value:
        return 0
    if value in (math.inf, -math.inf):
        return 2**63 - 1 if value > 0 else -(2**63)
    return int(value)


def format_number(value: float, fmt: str) -> str:
    """A number as a string: integers as integers, others through ``fmt`` (CONVFMT or
    OFMT); infinities and NaN as gawk prints them (``+inf``, ``-nan``)."""
    if value == value and value not in (math.inf, -math.inf):
        if value == int(value):
            return str(int(value))
        if fmt == "%.6g":
            return f"{value:.6g}"
        return _apply(fmt, value)
    if value != value:
        return "-nan" if math.copysign(1.0, value) < 0 else "+nan"
    return "+inf" if value > 0 else "-inf"


def _apply(fmt: str, value: float) -> str:
    parts = cformat.parse(fmt)
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif part.conv in "sc":
            out.append(cformat.format_string(part, format_number(value, "%.6g")))
        else:
            out.append(cformat.format_number(part, value))
    return "".join(out)


def to_str(value: Value, convfmt: str = "%.6g") -> str:
    if type(value) is float:
        return format_number(value, convfmt)
    return value  # type: ignore[return-value]


def truthy(value: Value) -> bool:
    t = type(value)
    if t is float:
        return value != 0.0
    if t is str:
        return value != ""
    if value is UNINIT:
        return False
    if looks_numeric(value):  # type: ignore[arg-type]
        return to_number(value) != 0.0
    return value != ""


def compare(a: Value, b: Value, convfmt: str) -> int:
    """-1, 0 or 1 by POSIX awk's rule (numbers if both numeric, else strings)."""
    if type(a) is float and type(b) is float:
        return (a > b) - (a < b)
    if is_numeric(a) and is_numeric(b):
        x, y = to_number(a), to_number(b)
        return (x > y) - (x < y)
    s, t = to_str(a, convfmt), to_str(b, convfmt)
    return (s > t) - (s < t)
