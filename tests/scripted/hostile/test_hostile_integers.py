"""Hostile integers: numbers of every size wherever a number is read end with bash's
answer or a one-line message, never a Python exception, in bounded time and memory."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_support import Case, check, ids, run_cases

BIG = "9" * 5000
HUGE_EXPR = "+".join(["1"] * 50_000)

CASES = [
    Case("brace range of 5000 digits", "echo {" + BIG + "..1}", BIG[:40], 0),
    Case("brace step of 5000 digits", "echo {1..3.." + BIG + "}", "{1..3..", 0),
    Case("arithmetic constant of 5000 digits", f"echo $(({BIG}))", "-1", 0),
    Case("based constant of 5000 digits", f"echo $((7#{'6' * 5000}))", "\n", 0),
    Case("hex constant of 100000 digits", f"echo $((0x{'f' * 100_000}))", "-1", 0),
    Case("test operand of 5000 digits", f"[ {BIG} -eq 1 ]; echo $?", "integer expression", 0),
    Case("[[ ]] operand of 5000 digits", f"[[ {BIG} -eq -1 ]]; echo $?", "0\n", 0),
    Case("array index of 5000 digits", f"a[{BIG}]=1; echo $?", "bad array subscript"),
    Case("exit of 5000 digits", f"exit {BIG}", "numeric argument required", 2),
    Case("shift of 5000 digits", f"shift {BIG}; echo $?", "numeric argument required", 0),
    Case("printf %d of 5000 digits", f"printf '%d\\n' {BIG}", "9223372036854775807", 0),
    Case("printf %x of 5000 digits", f"printf '%x\\n' {BIG}", "ffffffffffffffff", 0),
    Case("printf %f of 5000 digits", f"printf '%.2f\\n' {BIG}", "inf", 0),
    Case("printf %g of a huge exponent", "printf '%g\\n' 1e99999999999", "inf", 0),
    Case("printf %(%Y)T of a huge time", "printf '%(%Y)T\\n' 99999999999999999", "19", 0),
    Case("printf width of 5000 digits", f"printf '%{BIG}d|\\n' 1 | wc -c", "\n", 0),
    Case("read -n of 5000 digits", f"read -n {BIG} x <<< abc; echo $?", "invalid number", 0),
    Case("substring offset of 5000 digits", f'x=abc; echo "[${{x:{BIG}}}]"', "[", 0),
    Case("positional of 5000 digits", f'echo "[${{{BIG}}}]"', "[]", 0),
    Case("declare -i of 5000 digits", f"declare -i n={BIG}; echo $n", "-1", 0),
    Case("50000 terms in one expression", f"echo $(({HUGE_EXPR}))", "50000", 0, timeout=10),
    Case("5000 minus signs", "echo $((" + "-" * 5000 + "1))", "operand expected", 1),
    Case(
        "deep parentheses",
        "echo $((" + "(" * 3000 + "1" + ")" * 3000 + "))",
        "recursion level exceeded",
        1,
    ),
    Case("assignment chain", "echo $((" + "a=" * 3000 + "1))", "recursion level exceeded", 1),
    Case("power chain", "echo $((" + "2**" * 3000 + "1))", "recursion level exceeded", 1),
    Case(
        "ternary chain",
        "echo $((" + "1?" * 3000 + "1" + ":0" * 3000 + "))",
        "recursion level exceeded",
        1,
    ),
    Case("expression of 2.6 megabytes", "x=$(seq -s + 400000); echo $((x))", "memory limit", 1),
    Case("head -n of 5000 digits", f"seq 3 | head -n {BIG}", "Value too large", 1),
    Case("tail -c of 5000 digits", f"seq 3 | tail -c {BIG}", "Value too large", 1),
    Case("cut -f of 5000 digits", f"echo a | cut -f {BIG}", "too large", 1),
    Case("uniq -f of 5000 digits", f"printf 'a b\\na b\\n' | uniq -f {BIG}", "a b\n", 0),
    Case("uniq -s of 5000 digits", f"printf 'a\\na\\n' | uniq -s {BIG} -c", "2 a", 0),
    Case("nl -w of 5000 digits", f"echo a | nl -w {BIG}", "Value too large", 1),
    Case("nl -w huge", "seq 1000 | nl -w 100000000", "output limit", 1),
    Case("fold -w of 5000 digits", f"echo abc | fold -w {BIG}", "abc", 0),
    Case("tr repeat of 5000 digits", f"echo abc | tr a '[x*{BIG}]'", "invalid repeat count", 1),
    Case("tr repeat of a billion", "echo abc | tr abc '[x*1000000000]'", "xxx", 0),
    Case("seq of 5000 digits", f"seq 1 {BIG}", "too large", 1),
    Case("seq of a huge exponent", "seq 1e999999999 1e999999999", "too large", 1),
    Case("seq with a long separator", "seq -s \"$(printf '%010000d' 0)\" 1 100000", "limit", 1),
    Case("sort -k of 5000 digits", f"printf 'b\\na\\n' | sort -k {BIG}", "a\nb", 0),
    Case("sort -V of long digit runs", f"printf 'v{BIG}\\nv1\\n' | sort -V", "v1\nv9", 0),
    Case("grep -m of 5000 digits", f"seq 3 | grep -m {BIG} 2", "2", 0),
    Case("grep -A of 5000 digits", f"seq 3 | grep -A {BIG} 2", "3", 0),
    Case("sed address of 5000 digits", f"seq 3 | sed -n '{BIG}p;2p'", "2", 0),
    Case("expr of 5000 digits", f"expr {BIG} + 1", "too large", 2),
    Case("awk of 5000 digits", f"awk 'BEGIN{{print {BIG}}}'", "inf", 0),
    Case("awk strftime of a huge time", 'awk \'BEGIN{print strftime("%Y", 1e30) "|"}\'', "|"),
    Case(
        "awk strtonum of a huge hex", "awk 'BEGIN{print strtonum(\"0x" + "f" * 5000 + "\")}'", "inf"
    ),
    Case("awk bit ops of inf", "awk 'BEGIN{print and(-log(0), 1), compl(-log(0))}'", "", 0),
    Case("awk exit of inf", "awk 'BEGIN{exit -log(0)}'; echo $?", "255"),
    Case("tool flag of 5000 digits", f"echo_tool --id {BIG}", "id", 0),
]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict[str, Any]]:
    return run_cases(CASES)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_integer(case: Case, outcomes: dict[str, dict[str, Any]]) -> None:
    check(case, outcomes[case.name])
