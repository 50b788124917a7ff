"""Case conversion one character at a time, as bash's towupper/towlower: a character
whose other case is more than one character (``ß``, ``ﬁ``, ``İ``) stays as it is, where
Python's ``str.upper`` would write ``SS``. A long value is mapped by ``str.translate``
over its distinct characters (C speed on a 10 MB value).

Differential cases: ``cases_fidelity.txt``.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def _upper1(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


@lru_cache(maxsize=4096)
def _lower1(c: str) -> str:
    lo = c.lower()
    return lo if len(lo) == 1 else c


def upper_char(c: str) -> str:
    return c.upper() if c.isascii() else _upper1(c)


def lower_char(c: str) -> str:
    return c.lower() if c.isascii() else _lower1(c)


def toggle_char(c: str) -> str:
    """``${x~}``: a character with a lower case (upper or title case) becomes lower case,
    any other upper case."""
    lo = lower_char(c)
    return lo if lo != c else upper_char(c)


def upper(value: str) -> str:
    if value.isascii():
        return value.upper()
    return value.translate({ord(c): upper_char(c) for c in set(value)})


def lower(value: str) -> str:
    if value.isascii():
        return value.lower()
    return value.translate({ord(c): lower_char(c) for c in set(value)})


def toggle(value: str) -> str:
    if value.isascii():
        return value.swapcase()
    return value.translate({ord(c): toggle_char(c) for c in set(value)})
