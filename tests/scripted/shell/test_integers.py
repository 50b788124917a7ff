"""Bash's integer readings: wraparound of constants of any length, strtoimax operands."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervisor.scripted.integers import (
    INT_MAX,
    INT_MIN,
    count_value,
    decimal64,
    wrap,
    wrap_digits,
)


def reference(digits: str, base: int) -> int:
    value = 0
    for ch in digits:
        value = (value * base + int(ch, base)) % 2**64
    return value - 2**64 if value > INT_MAX else value


@given(st.integers(min_value=0, max_value=10**80), st.sampled_from([2, 3, 7, 8, 10, 16, 35, 36]))
def test_wrap_digits_is_accumulation_modulo_2_64(n: int, base: int) -> None:
    digits = ""
    while n:
        n, d = divmod(n, base)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    digits = digits or "0"
    assert wrap_digits(digits, base) == reference(digits, base) == wrap(int(digits, base))


@pytest.mark.parametrize("base", [3, 10, 16])
def test_wrap_digits_of_a_megabyte_is_fast_and_exact(base: int) -> None:
    rng = random.Random(base)
    digits = "".join(rng.choice("0123456789abcdef"[:base]) for _ in range(1_000_000))
    start = time.perf_counter()
    value = wrap_digits(digits, base)
    assert time.perf_counter() - start < 2
    assert value == reference(digits[-2000:], base) or base % 2  # even: the tail decides
    if base % 2 == 0:
        assert value == wrap(int(digits[-64:], base) % 2**64)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        (" 42 ", 42),
        ("-7", -7),
        ("+7", 7),
        ("010", 10),
        ("9223372036854775807", INT_MAX),
        ("-9223372036854775808", INT_MIN),
        ("9223372036854775808", None),
        ("-9223372036854775809", None),
        ("0000000000000000000000000000000000001", 1),
        ("9" * 5000, None),
        ("", None),
        ("1x", None),
        ("0x10", None),
        ("٣", None),  # a non-ASCII digit is not a number to bash
    ],
)
def test_decimal64_is_bash_legal_number(text: str, value: int | None) -> None:
    assert decimal64(text) == value


def test_count_value_refuses_past_64_bits_and_signs() -> None:
    assert count_value("12") == 12
    assert count_value("9" * 30) is None
    assert count_value("-1") is None
    assert count_value("+1") is None
