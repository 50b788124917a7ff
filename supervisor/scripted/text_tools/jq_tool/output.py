"""Values printed the way the jq 1.6 binary prints them.

The ``jq`` package hands back Python values (integral numbers as ``int``, others as
``float``, NaN as None, infinities as +-DBL_MAX). ``json.dumps`` already matches jq 1.6
for structure, indentation, string escapes and non-integral numbers; two things are
fixed after it: DEL (U+007F), which jq escapes, and integers of 17 or more digits, which
jq prints from a double with its ``%.17g``-style shortest form (``1e+17``,
``123456789012345680``).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")
_encode = json.encoder.encode_basestring  # the C versions when available
_encode_ascii = json.encoder.encode_basestring_ascii
_BIG_INT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d{17,})')


def format_number(value: float) -> str:
    """jq 1.6's ``jvp_dtoa_fmt``: the shortest round-trip digits, exponent form when the
    decimal point is more than 15 places past them or before the fourth decimal."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign, digits_t, exp = Decimal(repr(float(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_t))
    assert isinstance(exp, int)
    decpt = len(digits) + exp
    text: str
    if decpt <= -4 or decpt > len(digits) + 15:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        e = decpt - 1
        text = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif decpt <= 0:
        text = "0." + "0" * -decpt + digits
    elif decpt >= len(digits):
        text = digits + "0" * (decpt - len(digits))
    else:
        text = digits[:decpt] + "." + digits[decpt:]
    return ("-" if sign else "") + text


def _fix_big(match: re.Match[str]) -> str:
    number = match.group(1)
    return format_number(float(int(number))) if number is not None else match.group(0)


_SCALARS = {None: "null", True: "true", False: "false"}


def dump(value: object, indent: int | str | None, sort_keys: bool, ascii_only: bool) -> str:
    """One value as JSON text, formatted as jq 1.6 (``indent`` None means compact)."""
    kind = type(value)
    if kind is int:
        number: int = value  # type: ignore[assignment]
        return str(number) if -(10**16) < number < 10**16 else format_number(float(number))
    if kind is float:
        return repr(value)  # non-integral: Python's shortest form is jq 1.6's
    if kind is str:
        encode = _encode_ascii if ascii_only else _encode
        text = encode(str(value))
        return text.replace("\x7f", "\\u007f") if "\x7f" in text else text
    if value is None or kind is bool:
        return _SCALARS[value]  # type: ignore[index]
    if not value:
        return "[]" if kind is list else "{}"
    if indent is None:
        text = json.dumps(
            value, ensure_ascii=ascii_only, separators=(",", ":"), sort_keys=sort_keys
        )
    else:
        text = json.dumps(
            value,
            ensure_ascii=ascii_only,
            indent=indent,
            separators=(",", ": "),
            sort_keys=sort_keys,
        )
    if "\x7f" in text:
        text = text.replace("\x7f", "\\u007f")
    if len(text) >= 17 and "0" * 17 in text.translate(_DIGITS_AS_ZERO):
        text = _BIG_INT.sub(_fix_big, text)
    return text
