"""Reading integers the way bash does: 64-bit signed, whatever the length of the text.

Python's ``int(text)`` refuses more than 4,300 digits (and is quadratic below that), so no
number a script writes reaches it unchecked. Two readings exist in bash, and both are here:

* an arithmetic constant (``$(( ))``, ``[[ -eq ]]``, indices, ``declare -i``) accumulates
  its digits in a 64-bit register: it wraps around, however long it is (``wrap_digits``);
* a builtin's operand (``[ -eq ]``, ``exit``, ``shift``, ``printf %d``...) goes through
  ``strtoimax``: blanks around, a sign, decimal digits, and out of range is an error
  (``decimal64`` answers None).

The text tools that read counts (``head -n``, ``cut -f``...) use ``count_value``: a count
past 64 bits is refused with GNU's "Value too large" wording by the tool.
"""

from __future__ import annotations

import re

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
_MOD = 2**64

_DECIMAL = re.compile(r"[ \t\n\r\f\v]*([-+]?)([0-9]+)[ \t\n\r\f\v]*")


def wrap(v: int) -> int:
    """Two's-complement 64-bit wraparound."""
    if INT_MIN <= v <= INT_MAX:
        return v
    return ((v - INT_MIN) % _MOD) + INT_MIN


def wrap_digits(digits: str, base: int) -> int:
    """The value of ``digits`` (already checked to be digits of ``base``, with Python's
    digit values: 0-9, then a-z) accumulated as bash does, modulo 2**64, as a signed
    64-bit integer. Linear in the length: for an even base only the last 64 digits can
    change the result (base**64 is a multiple of 2**64); an odd base goes in chunks."""
    if len(digits) <= 18:
        return wrap(int(digits, base))
    if base % 2 == 0:
        return wrap(int(digits[-64:], base) % _MOD)
    value = 0
    step = 16
    scale = pow(base, step, _MOD)
    head = len(digits) % step
    if head:
        value = int(digits[:head], base)
    for i in range(head, len(digits), step):
        value = (value * scale + int(digits[i : i + step], base)) % _MOD
    return wrap(value)


def decimal64(text: str) -> int | None:
    """bash's ``legal_number``: optional blanks, a sign and decimal digits, optional
    blanks; None when the text is not such a number or is outside 64 bits."""
    m = _DECIMAL.fullmatch(text)
    if m is None:
        return None
    return _in_range(m.group(1), m.group(2))


def _in_range(sign: str, digits: str) -> int | None:
    digits = digits.lstrip("0") or "0"
    if len(digits) > 19:
        return None
    value = -int(digits) if sign == "-" else int(digits)
    return value if INT_MIN <= value <= INT_MAX else None


def is_decimal(text: str) -> bool:
    """Plain ASCII decimal digits (no sign, no blanks), any length."""
    return text.isdigit() and text.isascii()


def count_value(text: str) -> int | None:
    """A non-negative count (a tool's ``-n 5``): None when it is not one, past 64 bits
    included, so the tool says so in its own words."""
    if not is_decimal(text):
        return None
    return _in_range("", text)


def clamped_count(digits: str, cap: int = INT_MAX) -> int:
    """Plain decimal digits (checked by the caller) as an int no larger than ``cap``:
    GNU tools read a huge count as "as many as there are", never as an error."""
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(cap)):
        return cap
    return min(int(digits), cap)


#: The most digits a text tool that computes with big integers (``seq``, ``expr``)
#: accepts in one number: far past 64 bits, well short of Python's conversion limit.
MAX_BIG_DIGITS = 4000


def big_integer(text: str) -> int | None:
    """An optionally signed decimal of at most ``MAX_BIG_DIGITS`` digits, or None when it
    has more (the tool says so: ``integer too large``)."""
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > MAX_BIG_DIGITS:
        return None
    return int(text)
