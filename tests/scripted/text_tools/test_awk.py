"""awk: the language (fields, patterns, arrays, functions, getline), awk's value rules,
output formats, the sandbox refusals and the run-time bounds."""

from __future__ import annotations

import pytest
from text_support import oracle, oracle_available, out, run

from supervisor.scripted.text_tools.awk import runtime
from supervisor.scripted.text_tools.awk.values import UNINIT, StrNum, compare, to_number


@pytest.mark.parametrize(
    ("program", "stdin", "expected"),
    [
        ("{ print $1 }", "a b\nc d\n", "a\nc\n"),
        ("{ print $NF, NF }", "a b c\n\n  x  y  \n", "c 3\n 0\ny 2\n"),
        ("{ s += $1 } END { print s }", "1\n2\n3.5\n", "6.5\n"),
        ("NR == 2", "a\nb\nc\n", "b\n"),
        ("NR % 2", "a\nb\nc\n", "a\nc\n"),
        ("/b/", "a\nb\n", "b\n"),
        ("!/b/", "a\nb\n", "a\n"),
        ("/a/,/c/", "x\na\nb\nc\nd\n", "a\nb\nc\n"),
        ("NF", "a\n\nb\n", "a\nb\n"),
        ('{ $2 = "X"; print }', "a b c\n", "a X c\n"),
        ('{ $2 = "X"; OFS = "-"; print; $1 = $1; print }', "a b c\n", "a X c\na-X-c\n"),
        ("{ NF = 2; print }", "a b c d\n", "a b\n"),
        ('{ $5 = "e"; print; print NF }', "a b\n", "a b   e\n5\n"),
        ('{ $0 = "x y"; print NF, $2 }', "a\n", "2 y\n"),
        ('{ FS = ":"; print $1 }', "a:b c\nd:e f\n", "a:b\nd\n"),
        ("{ print length }", "abcd\n", "4\n"),
        ("END { print $0, NR }", "a\nb\n", "b 2\n"),
        ("NR == 1 { next } { print }", "a\nb\n", "b\n"),
        ('{ print; exit } END { print "end" }', "a\nb\n", "a\nend\n"),
        ('{ getline nxt; print $0 "+" nxt }', "a\nb\nc\n", "a+b\nc+b\n"),
        ("{ while ((getline line) > 0) n++; print n }", "a\nb\nc\n", "2\n"),
    ],
)
def test_programs(program: str, stdin: str, expected: str) -> None:
    assert out("awk", program, stdin=stdin) == expected


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("BEGIN { print 1e30, 2^53+1, 0.1+0.2, 1e-5, 100000, 1e6, 3.0, 1/3 }",
         "1000000000000000019884624838656 9007199254740992 0.3 1e-05 100000 1000000 3 0.333333\n"),
        ('BEGIN { x = 0.1; print x ""; CONVFMT = "%.2f"; print 3.14159 ""; OFMT = "%.3f"; '
         "print 3.14159, 10 }", "0.1\n3.14\n3.142 10\n"),
        ("BEGIN { print -log(0), log(0), int(-3.7), int(\"4x\") }", "+inf -inf -3 4\n"),
        ('BEGIN { print 1==1.0, "1"==1, "a"<"b", 2<10, "2"<"10" }', "1 1 1 1 0\n"),
        ('BEGIN { print substr("hello", 0, 2), substr("hello", -1, 3), substr("hello", 2) }',
         "he hel ello\n"),
        ('BEGIN { print substr("hello", 1.5), substr("hello", 2, 1.5) "|" }', "hello e|\n"),
        ('BEGIN { print index("abc", "c"), toupper("aé"), length("héllo") }', "3 AÉ 5\n"),
        ('BEGIN { printf "%c%c%c\\n", 65, "BC", 256 }', "ABĀ\n"),
        ('BEGIN { printf "%5.2s|%-4d|%04.1f|%x|%o|%e|%G|%i\\n", "abc", 7, 3.14159, 255, 8, '
         '12345.678, 0.0000123, 42.9 }', "   ab|7   |03.1|ff|10|1.234568e+04|1.23E-05|42\n"),
        ("BEGIN { print 2^3^2, -2^2, 2**3, 7%3, -7%3 }", "512 -4 8 1 -1\n"),
        ('BEGIN { print 1 " " -1, "a" (-5) }', "1-1 a-5\n"),
        ("BEGIN { x++; ++x; print x--, x }", "2 1\n"),
        ('BEGIN { print !0, !1, !"", !"a" }', "1 0 1 0\n"),
        ('BEGIN { n = split("a:b:c", a, ":"); print n, a[1], a[3] }', "3 a c\n"),
        ('BEGIN { n = split("a1b22c", a, /[0-9]+/); print n, a[1], a[2], a[3] }', "3 a b c\n"),
        ('BEGIN { n = split("abc", a, ""); print n, a[2] }', "3 b\n"),
        ('BEGIN { s = "hello"; sub(/l/, "L", s); print s; gsub(/l/, "[&]", s); print s }',
         "heLlo\nheL[l]o\n"),
        ('BEGIN { s = "aaa"; n = gsub(/a/, "\\\\&", s); print n, s }', "3 &&&\n"),
        ('BEGIN { print match("foobar", /o+/), RSTART, RLENGTH }', "2 2 2\n"),
        ('BEGIN { print match("foobar", /z/), RSTART, RLENGTH }', "0 0 -1\n"),
        ('BEGIN { print gensub(/(a)(b)/, "\\\\2\\\\1", "g", "abab") }', "baba\n"),
        ('BEGIN { x[1, 2] = 3; for (k in x) { split(k, p, SUBSEP); print p[1], p[2] } }',
         "1 2\n"),
        ('BEGIN { if ((1, 2) in x) print "y"; else print "n" }', "n\n"),
        ('BEGIN { if (!("a" in x)) print "no"; x["a"]; if ("a" in x) print "yes" }',
         "no\nyes\n"),
        ("function f(a, b) { return a + b } BEGIN { print f(1, 2) }", "3\n"),
        ("function fib(n) { return n < 2 ? n : fib(n-1) + fib(n-2) } BEGIN { print fib(15) }",
         "610\n"),
        ('function fill(arr) { arr["x"] = 1 } BEGIN { fill(a); print a["x"] }', "1\n"),
        ("BEGIN { a[3]=1; a[1]=2; a[2]=3; n = asort(a); print n, a[1] a[2] a[3] }", "3 123\n"),
        ('BEGIN { for (i = 0; i < 5; i++) { if (i == 1) continue; if (i == 3) break; '
         "printf i }; print \"\" }", "02\n"),
        ('BEGIN { do { printf "d" } while (0); print "" }', "d\n"),
        ("BEGIN { exit 3 } END { print \"e\" }", "e\n"),
        ('BEGIN { print typeof(x), typeof(1), typeof("s"), typeof(a); a[1] }',
         "untyped number string untyped\n"),
        ('BEGIN { print length(12345), length(1/4) }', "5 4\n"),
        ('BEGIN { printf "%d%%\\n", 50 }', "50%\n"),
        ('BEGIN { print "a" > "/dev/stdout" }', "a\n"),
        ('BEGIN { print and(12, 10), or(12, 10), xor(12, 10), lshift(1, 4), rshift(16, 2) }',
         "8 14 6 16 4\n"),
        ('BEGIN { print strtonum("0x1A"), strtonum("017"), strtonum("12abc") }', "26 15 12\n"),
    ],
)  # fmt: skip
def test_begin_programs(program: str, expected: str) -> None:
    assert run("awk", program).stdout == expected


def test_options_and_assignments() -> None:
    assert out("awk", "-F:", "{ print $2 }", stdin="a:b:c\n") == "b\n"
    assert out("awk", "-F", "\\t", "{ print $2 }", stdin="a\tb\n") == "b\n"
    assert out("awk", "-F[,;]", "{ print $3 }", stdin="a,b;c\n") == "c\n"
    assert out("awk", "-v", "x=5", "BEGIN { print x + 1 }") == "6\n"
    assert out("awk", "-v", "msg=hi\\tthere", "BEGIN { print msg }") == "hi\tthere\n"
    assert out("awk", "{ print $1, $2 }", "OFS=-", stdin="a b\n") == "a-b\n"
    assert out("awk", "-e", "BEGIN { print 1 }", "-e", "BEGIN { print 2 }") == "1\n2\n"
    assert out("awk", "--", "BEGIN { print 3 }") == "3\n"
    assert out("awk", "BEGIN { RS = \"\" } { print NR \": \" $1 }",
               stdin="a b\nc\n\n\nd e\n") == "1: a\n2: d\n"  # fmt: skip
    assert out("awk", 'BEGIN { RS = ";" } { print }', stdin="a;b;c\n") == "a\nb\nc\n\n"


def test_value_rules() -> None:
    assert to_number(StrNum(" 12abc")) == 12.0
    assert to_number("+inf") == float("inf")
    assert to_number("inf") == 0.0
    assert to_number("1_000") == 1.0
    assert compare(StrNum("10"), StrNum("9"), "%.6g") == 1  # both look numeric
    assert compare(StrNum("10"), "9", "%.6g") == -1  # a string constant: string compare
    assert compare(UNINIT, StrNum("0"), "%.6g") == 0
    assert out("awk", '{ print ($1 < $2), ($1 < "10"), ($1 < 10) }', stdin="2 10\n") == ("1 0 1\n")
    assert out("awk", '{ print ($1 == x), ($1 == "") }', stdin="0\n") == "1 0\n"


@pytest.mark.parametrize(
    ("program", "stderr", "status"),
    [
        ("BEGIN { x = ; }", "awk: cmd. line:1: BEGIN { x = ; }\n"
         "awk: cmd. line:1:             ^ syntax error\n", 1),
        ("BEGIN { print 1/0 }", "awk: cmd. line:1: error: division by zero attempted\n", 1),
        ("BEGIN { x = 0; print 1/x }",
         "awk: cmd. line:1: fatal: division by zero attempted\n", 2),
        ('BEGIN { system("ls") }',
         "awk: cmd. line:1: fatal: 'system' function not allowed in sandbox mode\n", 2),
        ('BEGIN { print "x" > "/tmp/f" }',
         "awk: cmd. line:1: fatal: redirection not allowed in sandbox mode\n", 2),
        ('BEGIN { "date" | getline x }',
         "awk: cmd. line:1: fatal: redirection not allowed in sandbox mode\n", 2),
        ('BEGIN { print "x" | "cat" }',
         "awk: cmd. line:1: fatal: redirection not allowed in sandbox mode\n", 2),
        ("BEGIN { f() }", "awk: cmd. line:1: fatal: function `f' not defined\n", 2),
        ("BEGIN { a[1] = 1; a = 2 }",
         "awk: cmd. line:1: fatal: attempt to use array `a' in a scalar context\n", 2),
        ("function f(n) { return f(n + 1) } BEGIN { f(1) }",
         "awk: cmd. line:1: fatal: function call nesting too deep\n", 2),
    ],
)  # fmt: skip
def test_errors(program: str, stderr: str, status: int) -> None:
    result = run("awk", program)
    assert (result.stderr, result.exit_code) == (stderr, status)


def test_getline_from_files_fails_softly() -> None:
    program = 'BEGIN { r = (getline line < "/etc/passwd"); print r, "[" line "]" }'
    assert out("awk", program) == "-1 []\n"


def test_stderr_redirection() -> None:
    result = run("awk", '{ print "err: " $0 > "/dev/stderr"; print "out" }', stdin="x\n")
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err: x\n", 0)


def test_limits_are_generous_but_finite() -> None:
    assert 1_000_000 <= runtime.MAX_LOOP_ITERATIONS <= 10_000_000
    assert 1_000_000 <= runtime.MAX_ARRAY_ELEMENTS <= 10_000_000


def test_endless_loop_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "MAX_LOOP_ITERATIONS", 5000)
    for program in ("BEGIN { while (1) { } }", "BEGIN { for (;;) ; }",
                    "BEGIN { do x++; while (1) }", "{ while (1) n++ }"):  # fmt: skip
        result = run("awk", program, stdin="line\n")
        assert result.exit_code == 2, program
        assert result.stderr.endswith("fatal: loop iteration limit (5000) exceeded\n"), program


def test_element_growth_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "MAX_ARRAY_ELEMENTS", 1000)
    result = run("awk", "BEGIN { for (;;) a[i++] }")
    assert (result.stderr, result.exit_code) == (
        "awk: cmd. line:1: fatal: array element limit (1000) exceeded\n",
        2,
    )


def test_string_growth_is_bounded() -> None:
    result = run("awk", 'BEGIN { s = "x"; while (1) s = s s }')
    assert result.exit_code == 2
    assert result.stderr == "awk: cmd. line:1: fatal: string too long\n"


def test_usage() -> None:
    result = run("awk")
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: awk")
    assert run("awk", "-z", "1").exit_code == 2
    assert out("awk", "--version").startswith("GNU Awk")


CASES = [
    ('{ a[$1] += $2 } END { for (k in a) n++; print n, a["x"] }', "x 1\ny 2\nx 3\n"),
    ('{ printf "%-5s|%5s|\\n", $1, $2 }', "ab cd\n"),
    ('{ total += $NF } END { printf "%.2f\\n", total / NR }', "a 1.5\nb 2.5\n"),
    ("{ print toupper(substr($0, 1, 1)) substr($0, 2) }", "hello\n"),
    ("{ c[$0]++ } END { for (k in c) if (c[k] > 1) print k }", "a\nb\na\n"),
    ('BEGIN { OFS = ";" } { $1 = $1 } 1', "a b c\n"),
    ("$1 ~ /^[0-9]+$/", "12\nab\n3x\n"),
    ("{ print ($1 > $2) }", "abc 9\n10 9\n"),
    ("BEGIN { IGNORECASE = 1 } /abc/", "ABC\nx\n"),
    ("length($0) > 2", "ab\nabc\n"),
    ("{ print $(NF-1) }", "a b c\n"),
    ('{ $3 = ""; print }', "a b c d\n"),
    ('BEGIN { ORS = "|" } { print } END { printf "\\n" }', "a\nb\n"),
    ('BEGIN { x = "3x"; print x + 0, x * 2 }', ""),
    ('BEGIN { printf "%s %s\\n", "a" }', ""),
    ('BEGIN { OFMT = "%.2f"; x = 3.14159; print x; print x "" }', ""),
    ("BEGIN { print 123456789012, 1234567.5, 0.000001 }", ""),
]


@pytest.mark.skipif(not oracle_available("awk"), reason="gawk is not installed")
@pytest.mark.parametrize(("program", "stdin"), CASES)
def test_matches_gawk(program: str, stdin: str) -> None:
    got = run("awk", program, stdin=stdin)
    want = oracle("awk", [program], stdin)
    if "for (k in" in program:
        assert sorted(got.stdout.splitlines()) == sorted(want[0].splitlines())
        assert got.exit_code == want[1]
    else:
        assert (got.stdout, got.exit_code) == want
