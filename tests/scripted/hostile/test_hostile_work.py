"""Hostile work: regex shapes that make a backtracking engine run for ever, expansions of
an 8 MB value, tools looping on long input, a script of megabytes, and memory grown on
purpose. Each ends with its answer or a one-line limit, within its timeout plus the
slack, and the host's memory grows by at most the bound (see ``hostile_support``)."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_support import Case, check, ids, run_cases

#: an 8 MB value, built in 23 doublings
BIG = "x=a; for i in $(seq 23); do x=$x$x; done; "
#: a line of 3000 a's and a c
LINE = "l=$(printf 'a%.0s' $(seq 3000))c; "
#: a sed script of 10,000 commands and an awk program of 20,000 statements (each record
#: runs all of them; the fuel of a cycle or a record is by the program's length)
SED_PROGRAM = "p=$(printf 's/a/b/;%.0s' $(seq 10000)); "
AWK_PROGRAM = "p=\"{$(printf 'x=1;%.0s' $(seq 20000))}\"; "
TIMEOUT = "execution timeout"
MEMORY = "memory limit"
#: any clean stop at a limit: a fast host reaches the memory or value-size limit of
#: these workloads before their deadline, a slow one the deadline first
LIMIT = "resource limit exceeded"

REGEX = [
    Case("grep -E (a|aa)*b", LINE + "echo $l | grep -cE '(a|aa)*b'", "0\n", 1),
    Case("grep nested +", LINE + "echo $l | grep -c '\\(a\\+\\)\\+b'", "0\n", 1),
    Case("sed -E nested", LINE + "echo $l | sed -E 's/(a+)+b/X/' | wc -c", "3002", 0),
    Case(
        "awk nested",
        LINE + 'echo $l | awk \'/^(a*)*b$/ {print "m"} END {print "done"}\'',
        "done",
        0,
    ),
    Case("expr nested", LINE + "expr $l : '\\(a*\\)*b'; echo $?", "\n1\n", 0),
    Case("=~ nested", LINE + "[[ $l =~ ^(a|aa)+$ ]] && echo m || echo no", "no", 0),
    Case(
        "extglob nested",
        LINE + "shopt -s extglob; [[ $l == +(a|aa) ]] && echo m || echo no",
        "no",
        0,
    ),
    Case("glob stars", LINE + "case $l in *a*a*a*a*a*b) echo m;; *) echo no;; esac", "no", 0),
    Case(
        "backreference stops at the deadline",
        "echo \"$(printf 'abcdefgh%.0s' $(seq 400))q\" | grep -cE '(.*)(.*)(.*)\\3\\2\\1$'",
        TIMEOUT,
        1,
    ),
    Case(
        "backreference under timeout_ms",
        "echo \"$(printf 'abcdefgh%.0s' $(seq 400))q\" | sed -E 's/(.*)(.*)\\2\\1$/x/'",
        "timed out",
        124,
        timeout_ms=1000,
    ),
    Case("huge interval", "echo a | grep -E 'a{99999999999999999999}'", "too big", 2),
    Case("leftmost-longest", "echo 15.50 | grep -oE '[0-9]+|[0-9]+\\.[0-9]+'", "15.50", 0),
]

EXPANSIONS = [
    Case("${x@Q} of 8 MB", BIG + "y=${x@Q}; echo ${#y}", "8388610", 0),
    Case("$x{1..300} of 8 MB", BIG + "echo $x{1..300} | wc -c", MEMORY, 1),
    Case("[[ a == $x* ]] of 8 MB", BIG + "[[ a == $x* ]]; echo $?", "1\n", 0),
    Case("[[ $x == *b* ]] of 8 MB", BIG + "[[ $x == *b*a ]]; echo $?", "1\n", 0),
    Case("${x//a/bb} of 8 MB", BIG + "y=${x//a/bb}", "value size", 1),
    # 0.5 s: the deadline long before the 16 MB result reaches the memory limit (at 6.8 s
    # on a loaded 2-core host given the time; a fast host may be several times faster)
    Case("${x//?/ab} of 8 MB", BIG + "y=${x//?/ab}", TIMEOUT, 1, timeout=0.5),
    Case("${x%a*b} of 8 MB", BIG + "y=${x%a*b}; echo ${#y}", "8388608", 0),
    Case("splitting 16 MB", BIG + "set -- $x$x", "value size", 1),
    Case("splitting 8 MB of words", BIG + "y=${x//a/a }; set -- $y; echo $#", "", 1),
    Case("printf %q of 8 MB", BIG + 'printf %q "$x" | wc -c', "8388608", 0),
    Case("${x^^} of 8 MB", BIG + "y=${x^^}; echo ${#y}", "8388608", 0),
]

LOOPS = [
    Case(
        "sort of 800,000 lines",
        "seq 100000 | sed p | sed p | sed p | sort -n | tail -1",
        LIMIT,  # a fast host reaches sort's memory (64 MiB) before the second is out
        1,
        timeout=1.0,
    ),
    # 200,000 a's: the loop is quadratic (100,000 finished in 4.6 s on a loaded host, in
    # less than the deadline on a fast one); 200,000 take 27 s there
    Case(
        "sed t loop on a long line",
        BIG + "echo ${x:0:200000} | sed ':a;s/a/b/;ta' | wc -c",
        TIMEOUT,
        1,
        timeout=1.0,
    ),
    Case(
        "awk while(sub())",
        'echo | awk \'{ s = sprintf("%9999s", ""); while (sub(/ /, "", s)) n++; print n }\'',
        "9999",
        0,
    ),
    Case(
        "sed script of 10,000 commands",
        SED_PROGRAM + 'seq 100000 | sed "$p" | tail -1',
        TIMEOUT,
        1,
    ),
    Case(
        "awk program of 20,000 statements",
        AWK_PROGRAM + 'seq 100000 | awk "$p" | tail -1',
        TIMEOUT,
        1,
    ),
    # The deadline stops the compile of a big program: 0.5 s and a memory budget of
    # 128 MiB, far from each other (at 64 MiB and 1 s a fast host ran out of memory first:
    # the compile reached 64 MiB in 2.7 s (sed) and 4.2 s (awk) on a loaded 2-core host)
    Case(
        "sed script of 2 MB",
        SED_PROGRAM + 'for i in 1 2 3 4 5; do p=$p$p; done; echo | sed "$p"',
        TIMEOUT,
        1,
        timeout=0.5,
        limits={"max_memory_bytes": 128 << 20},
    ),
    Case(
        "awk program of 1.3 MB",
        AWK_PROGRAM + 'for i in 1 2 3 4; do p=$p$p; done; echo | awk "$p"',
        TIMEOUT,
        1,
        timeout=0.5,
        limits={"max_memory_bytes": 128 << 20},
    ),
    # an iteration does some work: awk's own 3,000,000-iteration limit stopped `n++` alone
    # in 1.5 s on a loaded host (a fast idle one nears the deadline); with the sprintf the
    # limit is more than 30 s away
    Case(
        "awk endless loop",
        "echo | awk '{ while (1) { n++; s = sprintf(\"%d %d %d\", n, n, n) } }'",
        TIMEOUT,
        1,
        timeout=0.5,
    ),
    Case(
        "sort of 900 KB",
        BIG + "echo ${x:0:900000} | fold -w 3 | sort | uniq -c | wc -l",
        "1",
        0,
        timeout=5.0,
    ),
    Case("uniq -f huge", "yes 'a b c' | head -n 100000 | uniq -f 999999999 | wc -l", "1", 0),
    Case("jq endless", "jq -n 'def f: f; f'; echo status=$?", "status=5", 0),
    Case("awk gsub on 8 MB", BIG + "echo $x | awk '{ n = gsub(/a/, \"b\"); print n }'", LIMIT, 1),
    Case(
        "awk split into millions",
        'echo | awk \'{ s = sprintf("%3000000s", ""); gsub(/ /, "a,", s); '
        'print split(s, parts, ",") }\'',
        LIMIT,
        1,
    ),
    Case("tr -s of an 8 MB run", BIG + "echo $x | tr -s a | wc -c", "2\n", 0),
    Case("fold -w 1 of 8 MB", BIG + "echo $x | fold -w 1 | wc -l", LIMIT, 1),
    Case("fold -s of 8 MB", BIG + "echo $x | fold -s -w 1 | wc -l", LIMIT, 1),
    Case(
        "printf of 100,000 arguments, again and again",
        "y=$(seq 100000); while :; do printf '%s\\n' $y | wc -l; done",
        TIMEOUT,
        1,
    ),
]

PARSE = [
    Case(
        "a script of 2 MB",
        "echo hello world; x=$((1+2)); if [ $x -eq 3 ]; then echo ok; fi\n" * 30_000,
        "resource limit exceeded",
        1,
        timeout=3.0,
        limits={"max_parser_operations": 10**9},
    ),
    Case(
        "a script of 2 MB under timeout_ms",
        "echo hi; x=1\n" * 150_000,
        ("timed out", MEMORY),  # the parse's tree may reach the memory budget first
        (124, 1),
        timeout_ms=1000,
        limits={"max_parser_operations": 10**9},
    ),
]

MEMORY_CASES = [
    Case(
        "arrays of 8 MB values",
        BIG + "for i in $(seq 60); do a[$i]=$x$i; done",
        MEMORY,
        1,
        timeout=10.0,
    ),
    Case(
        "variables of 8 MB values",
        BIG + 'for i in $(seq 60); do printf -v v$i %s%s "$x" $i; done',
        MEMORY,
        1,
        timeout=10.0,
    ),
    Case(
        "awk array of 9 MB strings",
        'echo | awk \'{ s = sprintf("%9000000s", ""); '
        "for (i = 0; i < 60; i++) a[i] = s i; print length(a) }'",
        MEMORY,
        1,
        timeout=10.0,
    ),
    Case("tr huge repeat", BIG + "tr -c a '[b*100000000]' <<< $x | wc -c", "8388609", 0),
    Case("seq -s with an 8 MB separator", BIG + 'seq -s "$x" 1 100 | wc -c', "", 0),
    Case("nl -w 9000000", "nl -w 9000000 <<< a | wc -c", "9000003", 0),
]

CASES = REGEX + EXPANSIONS + LOOPS + PARSE + MEMORY_CASES


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict[str, Any]]:
    return run_cases(CASES)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_hostile_work(case: Case, outcomes: dict[str, dict[str, Any]]) -> None:
    check(case, outcomes[case.name])
