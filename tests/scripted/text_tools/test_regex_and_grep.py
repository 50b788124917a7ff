"""POSIX regex translation (BRE, ERE, the sed and awk dialects), the engines that keep the
deadline (POSIX's leftmost-longest match), and grep's options, output prefixes, context
and exit statuses."""

from __future__ import annotations

import re
import time

import pytest
from text_support import oracle, oracle_available, out, run

from supervisor.scripted.safe_regex import SafePattern
from supervisor.scripted.text_tools.posix_regex import (
    RegexError,
    compile_posix,
    translate,
)


@pytest.mark.parametrize(
    ("pattern", "ere", "matches", "misses"),
    [
        (r"a\(b\)\1", False, ["abb"], ["ab", "abc"]),
        (r"a\{2,3\}", False, ["aa", "aaa"], ["a"]),
        (r"a+", False, ["a+"], ["aa"]),
        (r"a\+", False, ["aa"], ["b"]),
        (r"a\|b", False, ["a", "b"], ["c"]),
        (r"*a", False, ["*a"], ["a"]),
        (r"a^b", False, ["a^b"], ["ab"]),
        (r"a$b", False, ["a$b"], ["ab"]),
        (r"^a$", False, ["a"], ["ba", "ab"]),
        (r"(a|b)+", True, ["ab"], ["c"]),
        (r"a{1,2", True, ["a{1,2"], ["a"]),
        (r"[]a]", True, ["]", "a"], ["b"]),
        (r"[^]a]", True, ["b"], ["]", "a"]),
        (r"[\]", True, ["\\"], ["]"]),
        (r"[[:digit:]]+", True, ["42"], ["x"]),
        (r"[[:alpha:]]", True, ["é", "Z"], ["1", "_"]),
        (r"[[:upper:]]", True, ["É"], ["é"]),
        (r"[[:space:]]", True, ["\t"], ["x"]),
        (r"\<is\>", False, ["is", "it is"], ["this", "island"]),
        (r"\w+\s\W", True, ["a !"], ["a b"]),
        (r"a.c", True, ["a\nc"], ["ac"]),
    ],
)
def test_translation(pattern: str, ere: bool, matches: list[str], misses: list[str]) -> None:
    regex = compile_posix(pattern, ere=ere)
    for text in matches:
        assert regex.search(text), (pattern, text)
    for text in misses:
        if text:
            assert not regex.search(text), (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"\(", "Unmatched ( or \\("),
        (r"a\{1", "Unmatched \\{"),
        ("[a", "Unmatched [, [^, [:, [., or [="),
        ("[[:nope:]]", "Invalid character class name"),
        (r"\1", "Invalid back reference"),
        ("a\\", "Trailing backslash"),
        ("[z-a]", "Invalid range end"),
    ],
)
def test_translation_errors(pattern: str, message: str) -> None:
    with pytest.raises(RegexError) as info:
        translate(pattern, ere=False)
    assert str(info.value) == message


def test_dialect_escapes() -> None:
    assert compile_posix(r"a\tb", ere=False, dialect="sed").search("a\tb")
    assert compile_posix(r"[\t]", ere=False, dialect="sed").search("\t")
    assert compile_posix(r"\x41", ere=False, dialect="sed").search("A")
    assert compile_posix(r"a\tb", ere=False, dialect="grep").search("atb")
    assert compile_posix(r"\/x\y", ere=True, dialect="awk").search("a/x y")
    assert compile_posix(r"[\/]", ere=True, dialect="awk").search("/")
    assert compile_posix(r"a+", ere=False, dialect="expr").search("a+")


def test_nested_repetition_runs_in_linear_time() -> None:
    regex = compile_posix("^(a+)+b$", ere=True)
    assert isinstance(regex, SafePattern)
    text = "a" * 200_000 + "c"
    started = time.perf_counter()
    assert regex.search(text) is None
    assert time.perf_counter() - started < 10  # `re` alone would never finish
    assert regex.search("xaab") is None
    m = compile_posix("(a+)+b", ere=True).search("xaab")
    assert m is not None and m.span() == (1, 4) and m.group(0) == "aab"


@pytest.mark.parametrize(
    ("pattern", "ere", "text", "want"),
    [
        (r"[0-9]+|[0-9]+\.[0-9]+", True, "15.50", "15.50"),
        ("ab|abcd", True, "abcd", "abcd"),
        ("(a|ab)(c|bcd)(d*)", True, "abcd", "abcd"),
        (r"\(a*\)\(ab\)*b*", False, "aabab", "aabab"),
        ("x*", True, "xxy", "xx"),
    ],
)
def test_matches_are_leftmost_longest(pattern: str, ere: bool, text: str, want: str) -> None:
    m = compile_posix(pattern, ere=ere).search(text)
    assert m is not None and m.group(0) == want


def test_plain_patterns_stay_on_re_and_backreferences_work() -> None:
    assert isinstance(compile_posix("seven", ere=False), re.Pattern)
    assert isinstance(compile_posix(r"[0-9]\.x", ere=True), re.Pattern)
    m = compile_posix(r"\(ab*\)c\1", ere=False).search("xabbcabb")
    assert m is not None and m.group(0) == "abbcabb"
    m = compile_posix(r"(a|ab)+\1", ere=True).search("abab")  # POSIX: longest overall
    assert m is not None and m.group(0) == "abab"


def test_unicode_classes_on_non_ascii_text() -> None:
    # RE2's \w is ASCII: such a pattern on a non-ASCII text goes to the other engine
    m = compile_posix(r"\w+", ere=True).search("  héllo")
    assert m is not None and m.group(0) == "héllo"
    m = compile_posix(r"l+o", ere=True).search("héllo")
    assert m is not None and m.span() == (2, 5)
    m = compile_posix("[[:alpha:]]+", ere=True).search("1 wörld 2")
    assert m is not None and m.group(0) == "wörld"
    assert compile_posix("o+", ere=True).search("\udcff oo") is not None  # not UTF-8


def test_cache_returns_the_same_object() -> None:
    assert compile_posix("x+", ere=True) is compile_posix("x+", ere=True)


# ------------------------------------------------------------------------------- grep


def test_grep_basics() -> None:
    assert out("grep", "an", stdin="apple\nbanana\ncherry\n") == "banana\n"
    assert out("grep", "-v", "an", stdin="apple\nbanana\n") == "apple\n"
    assert out("grep", "-c", "a", stdin="a\nb\na\n") == "2\n"
    assert out("grep", "-in", "foo", stdin="Foo\nbar\nFOO\n") == "1:Foo\n3:FOO\n"
    assert out("grep", "-oE", "[0-9]+", stdin="a12b345\n") == "12\n345\n"
    assert out("grep", "-ob", "ab.", stdin="abc abd\n") == "0:abc\n4:abd\n"
    assert out("grep", "-w", "is", stdin="this is\nisland\n") == "this is\n"
    assert out("grep", "-x", "-F", "a.b", stdin="a.b\na.bc\naxb\n") == "a.b\n"
    assert out("grep", "-e", "a", "-e", "b", stdin="a\nb\nc\n") == "a\nb\n"
    assert out("grep", "-H", "a", stdin="a\n") == "(standard input):a\n"
    assert out("grep", "-l", "a", stdin="a\n") == "(standard input)\n"
    assert out("grep", "-m", "1", "a", stdin="a\na\n") == "a\n"
    assert out("grep", "-P", r"\d(?=x)", "-o", stdin="1x2y\n") == "1\n"
    assert out("grep", "", stdin="a\n\n") == "a\n\n"
    # A pattern with a newline is two patterns.
    assert out("grep", "a\nb", stdin="a\nb\nc\n") == "a\nb\n"


def test_grep_context_groups() -> None:
    text = "a\nb\nc\nd\ne\na\n"
    assert out("grep", "-n", "-C1", "a", stdin=text) == "1:a\n2-b\n--\n5-e\n6:a\n"
    assert out("grep", "-A1", "-m1", "a", stdin="x\na\nb\nc\na\n") == "a\nb\n"
    assert out("grep", "-B1", "c", stdin="a\nb\nc\n") == "b\nc\n"


def test_grep_statuses() -> None:
    assert run("grep", "zzz", stdin="a\n").exit_code == 1
    assert run("grep", "-q", "a", stdin="a\n").exit_code == 0
    assert run("grep", "-q", "a", stdin="a\n").stdout == ""
    bad = run("grep", r"a\{1", stdin="a\n")
    assert (bad.stderr, bad.exit_code) == ("grep: Unmatched \\{\n", 2)
    bad = run("grep", "-E", "(", stdin="a\n")
    assert (bad.stderr, bad.exit_code) == ("grep: Unmatched ( or \\(\n", 2)
    assert run("grep", stdin="a\n").exit_code == 2
    assert run("grep", "-A", "x", "a", stdin="a\n").exit_code == 2
    binary = run("grep", "a", stdin="a\0b\n")
    assert (binary.stdout, binary.stderr, binary.exit_code) == (
        "",
        "grep: (standard input): binary file matches\n",
        0,
    )


CASES = [
    (["-E", "a|b"], "a\nb\nc\n"),
    (["a\\|b"], "a\nb\nc\n"),
    (["-c", "-v", "^#"], "# c\nx\n# d\ny\n"),
    (["-n", "-v", "x"], "x\ny\n"),
    (["-o", "[0-9]\\+"], "a12b345\n"),
    (["-E", "^(ab)+$"], "abab\nabc\n"),
    (["-E", "(ab)\\1"], "abab\nab\n"),
    (["-C", "1", "-n", "b"], "a\nb\nc\nd\ne\nb\n"),
    (["-i", "É"], "é\nÉ\n"),
    (["[[:upper:]]"], "a\nB\n"),
    (["-w", "-o", "ab"], "ab abc ab\n"),
    (["-x", ""], "a\n\nb\n"),
    (["-z", "a"], "a\0b\0"),
    (["-c", ""], "a\nb"),
    (["-E", "x?y"], "y\nxy\nz\n"),
    (["-E", "[0-9]{3}-[0-9]{4}"], "555-1234\n55-123\n"),
    (["\\bis\\b"], "this is\nis\n"),
]


@pytest.mark.skipif(not oracle_available("grep"), reason="GNU grep is not installed")
@pytest.mark.parametrize(("args", "stdin"), CASES)
def test_grep_matches_gnu(args: list[str], stdin: str) -> None:
    got = run("grep", *args, stdin=stdin)
    assert (got.stdout, got.exit_code) == oracle("grep", args, stdin)


def test_regex_flags_do_not_leak() -> None:
    # The cached patterns are compiled with DOTALL only.
    assert compile_posix("a", ere=True).flags & re.IGNORECASE == 0  # type: ignore[union-attr]
