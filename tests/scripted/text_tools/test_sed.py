"""sed: commands, addresses, GNU extensions, missing final newline, errors, bounds."""

from __future__ import annotations

import pytest
from text_support import oracle, oracle_available, out, run


@pytest.mark.parametrize(
    ("script", "stdin", "expected"),
    [
        ("s/-/+/g", "a-b-c\n", "a+b+c\n"),
        ("s/a/X/2", "aaaa\n", "aXaa\n"),
        ("s/a/X/2g", "aaaa\n", "aXXX\n"),
        ("s/b*/X/g", "abc\n", "XaXcX\n"),
        ("s/A/x/Ig", "aA\n", "xx\n"),
        (r"s/\(l\+\)/[\U\1]/", "hello\n", "he[LL]o\n"),
        (r"s/\w\+/\u&/g", "hello world\n", "Hello World\n"),
        (r"s/.*/\L&\E!/", "HeLLo\n", "hello!\n"),
        (r"s/a/[\&]/", "cat\n", "c[&]t\n"),
        ("s/a/\\n/", "bab\n", "b\nb\n"),
        ("s|a\\|b|X|", "a|b\n", "X\n"),
        ("y/abc/xyz/", "aabbcc\n", "xxyyzz\n"),
        ("2d", "a\nb\nc\n", "a\nc\n"),
        ("$d", "a\nb\nc\n", "a\nb\n"),
        ("2!d", "a\nb\nc\n", "b\n"),
        ("0,/b/d", "b\nb\nc\n", "b\nc\n"),
        ("1,/b/d", "b\nb\nc\n", "c\n"),
        ("/a/,+1d", "a\nb\nc\nd\n", "c\nd\n"),
        ("0~2d", "1\n2\n3\n4\n5\n", "1\n3\n5\n"),
        ("2,~4d", "1\n2\n3\n4\n5\n", "1\n5\n"),
        ("N;P;D", "a\nb\nc\n", "a\nb\nc\n"),
        ("$!N;s/\\n/ /", "1\n2\n3\n", "1 2\n3\n"),
        (":a;N;$!ba;s/\\n/,/g", "a\nb\nc\n", "a,b,c\n"),
        ("1!G;h;$!d", "1\n2\n3\n", "3\n2\n1\n"),
        ("G", "a\n", "a\n\n"),
        ("x;G", "a\nb\n", "\na\na\nb\n"),
        ("=", "a\nb\n", "1\na\n2\nb\n"),
        ("1i\\top", "a\n", "top\na\n"),
        ("$a bottom", "a\nb", "a\nb\nbottom\n"),
        ("2c\\X", "a\nb\nc\n", "a\nX\nc\n"),
        ("1,2c\\X", "a\nb\nc\n", "X\nc\n"),
        ("a a\\tb", "x\n", "x\na\tb\n"),
        ("s/x/y/;t;s/a/b/", "x a\na\n", "y a\nb\n"),
        ("s/a/b/;T;s/$/!/", "a\nc\n", "b!\nc\n"),
        (":l;s/aa/a/;tl", "aaaa\n", "a\n"),
        ("n;d", "1\n2\n3\n4\n5\n", "1\n3\n5\n"),
        ("2q", "a\nb\nc\n", "a\nb\n"),
        ("2Q", "a\nb\nc\n", "a\n"),
        ("p", "abc", "abc\nabc"),
        ("$!d", "a\nb", "b"),
        ("z;s/^$/empty/", "a\n", "empty\n"),
        ("F", "a\n", "-\na\n"),
        ("w /dev/stdout", "a\n", "a\na\n"),
        ("s/\\x41/b/", "A\n", "b\n"),
        ("", "a\nb\n", "a\nb\n"),
    ],
)
def test_scripts(script: str, stdin: str, expected: str) -> None:
    assert out("sed", script, stdin=stdin) == expected


def test_options() -> None:
    assert out("sed", "-n", "2,3p", stdin="1\n2\n3\n4\n") == "2\n3\n"
    assert out("sed", "-n", "$=", stdin="a\nb\nc\n") == "3\n"
    assert out("sed", "-E", "s/(a+)(b+)/\\2\\1/", stdin="aabbb\n") == "bbbaa\n"
    assert out("sed", "-r", "s/a{2}/X/", stdin="aaa\n") == "Xa\n"
    assert out("sed", "-e", "s/a/b/", "-e", "s/b/c/", stdin="a\n") == "c\n"
    assert out("sed", "-z", "s/\\n/,/g", stdin="a\nb\n") == "a,b,"
    assert out("sed", "#n\np", stdin="a\n") == "a\n"
    assert out("sed", "-n", "l", stdin="a\tb\x01é\\\n") == "a\\tb\\001\\303\\251\\\\$\n"
    assert out("sed", "-n", "l 5", stdin="abcdefgh\n") == "abcd\\\nefgh$\n"


def test_quit_status() -> None:
    result = run("sed", "2q5", stdin="a\nb\nc\n")
    assert (result.stdout, result.exit_code) == ("a\nb\n", 5)


@pytest.mark.parametrize(
    ("script", "stderr", "status"),
    [
        ("k", "sed: -e expression #1, char 1: unknown command: `k'\n", 1),
        ("s/a/b", "sed: -e expression #1, char 5: unterminated `s' command\n", 1),
        ("/a", "sed: -e expression #1, char 2: unterminated address regex\n", 1),
        ("{p", "sed: -e expression #1, char 2: unmatched `{'\n", 1),
        ("p}", "sed: -e expression #1, char 2: unexpected `}'\n", 1),
        ("b nowhere", "sed: can't find label for jump to `nowhere'\n", 4),
        ("e ls", "sed: -e expression #1, char 1: e/r/w commands disabled in sandbox mode\n", 1),
        (
            "y/ab/c/",
            "sed: -e expression #1, char 7: strings for `y' command are different lengths\n",
            1,
        ),
    ],
)
def test_errors(script: str, stderr: str, status: int) -> None:
    result = run("sed", script, stdin="a\n")
    assert (result.stdout, result.stderr, result.exit_code) == ("", stderr, status)


def test_usage_without_script() -> None:
    result = run("sed", stdin="a\n")
    assert result.exit_code == 1
    assert result.stderr.startswith("Usage: sed")


def test_endless_branch_is_bounded() -> None:
    result = run("sed", ":a;ba", stdin="x\n")
    assert result.exit_code == 4
    assert result.stderr == "sed: too many jumps without reading input (1000000)\n"


def test_reading_files_reads_nothing() -> None:
    # GNU sed ignores a file "r" cannot read; every file is unreadable here.
    assert out("sed", "r /etc/passwd", stdin="a\n") == "a\n"


CASES = [
    ("s/[aeiou]//g", "education\n"),
    ("-n '/start/,/end/p'", "x\nstart\ny\nend\nz\n"),
    ("s/^[ \\t]*//", "  \t x\n"),
    ("s/\\<./\\u&/g", "the quick fox\n"),
    ("1~3{N;N;s/\\n/,/g}", "1\n2\n3\n4\n5\n6\n"),
    ("$!N;P;D", "a\na\nb\n"),
    ("s/.\\{3\\}/&-/g", "abcdefgh\n"),
    ("-n h;n;G;p", "a\nb\n"),
    ("3,1p", "a\nb\nc\nd\n"),
    ("s/[[:upper:]]/\\l&/g", "ABc\n"),
]


@pytest.mark.skipif(not oracle_available("sed"), reason="GNU sed is not installed")
@pytest.mark.parametrize(("script", "stdin"), CASES)
def test_matches_gnu_sed(script: str, stdin: str) -> None:
    args = ["-n", script.split(" ", 1)[1].strip("'")] if script.startswith("-n ") else [script]
    got = run("sed", *args, stdin=stdin)
    assert (got.stdout, got.exit_code) == oracle("sed", args, stdin)
