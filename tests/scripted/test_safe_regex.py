"""The regex engines agree with ``re`` where ``re`` is right (Perl semantics), give POSIX's
leftmost-longest match when asked, and keep the execution's deadline on the patterns that
make a backtracking engine run for ever."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.scripted.budget import Budget, current_budget
from supervisor.scripted.errors import LimitExceeded
from supervisor.scripted.safe_regex import SafePattern, compile_pattern, is_plain


def _atoms() -> st.SearchStrategy[str]:
    return st.sampled_from(["a", "b", ".", "[ab]", "[^a]", "\\.", "c"])


def _regex(depth: int = 3) -> st.SearchStrategy[str]:
    base = _atoms()
    if depth == 0:
        return base
    inner = _regex(depth - 1)
    return st.one_of(
        base,
        st.builds(lambda x, y: x + y, inner, inner),
        st.builds(lambda x, y: f"({x}|{y})", inner, inner),
        st.builds(lambda x: f"(?:{x})", inner),
        st.builds(
            lambda x, q: f"({x}){q}",
            inner,
            st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "+?", "??"]),
        ),
        st.builds(lambda x: f"^{x}", inner),
        st.builds(lambda x: f"{x}\\Z", inner),
    )


@settings(max_examples=300, deadline=None)
@given(_regex(), st.text(alphabet="abc.é", max_size=8))
def test_perl_semantics_agree_with_re(pattern: str, text: str) -> None:
    rx = re.compile(pattern, re.DOTALL)
    ours = compile_pattern(pattern, re.DOTALL)
    for how in ("search", "match", "fullmatch"):
        want = getattr(rx, how)(text)
        got = getattr(ours, how)(text)
        assert (got is None) == (want is None), (how, pattern, text)
        if want is not None and got is not None:
            assert got.span() == want.span(), (how, pattern, text)


@settings(max_examples=200, deadline=None)
@given(_regex(), st.text(alphabet="abc.", max_size=8))
def test_longest_is_the_longest_match_at_the_leftmost_start(pattern: str, text: str) -> None:
    # no lazy quantifiers (POSIX has none), no \Z (the oracle ends texts with endpos)
    pattern = pattern.replace("*?", "*").replace("+?", "+").replace("??", "?")
    pattern = pattern.replace("\\Z", "")
    rx = re.compile(pattern, re.DOTALL)
    got = compile_pattern(pattern, re.DOTALL, longest=True).search(text)
    starts = [i for i in range(len(text) + 1) if rx.match(text, i)]
    if not starts:
        assert got is None
        return
    assert got is not None and got.start() == starts[0]
    ends = [e for e in range(starts[0], len(text) + 1) if rx.fullmatch(text, starts[0], e)]
    assert got.end() == max(ends)


def test_plain_patterns_stay_on_re() -> None:
    assert is_plain("seven") and is_plain(r"a[*+]\.b") and is_plain(r"(?<!\w)(?:ab)(?!\w)")
    assert not is_plain("a*") and not is_plain("a|b") and not is_plain("x{2}")
    assert isinstance(compile_pattern("seven"), re.Pattern)
    assert isinstance(compile_pattern("x" * 1000), SafePattern)  # too long to be cheap


@pytest.mark.parametrize(
    "pattern", [r"^(a+)+$", r"^(a|aa)+$", r"(a*)*b", r"^([a-z]+\.)+[a-z]{2,}$", ".*a.*a.*a.*b"]
)
def test_catastrophic_patterns_stay_linear(pattern: str) -> None:
    rx = compile_pattern(pattern)
    text = "a" * 300_000 + "!"
    started = time.perf_counter()
    assert rx.search(text) is None
    assert rx.fullmatch(text) is None
    assert time.perf_counter() - started < 10


def test_backreferences_stop_at_the_deadline() -> None:
    def expired() -> None:
        if time.monotonic() >= stop:
            raise LimitExceeded("execution timeout (0.3s)")

    stop = time.monotonic() + 0.3
    token = current_budget.set(Budget(expired, 1 << 30, lambda: stop))
    try:
        rx = compile_pattern(r"(.*)(.*)(.*)\3\2\1\Z", longest=True)
        started = time.monotonic()
        with pytest.raises(LimitExceeded):
            rx.search("abcdefgh" * 400 + "q")
        assert time.monotonic() - started < 5
    finally:
        current_budget.reset(token)
    m = compile_pattern(r"(a+)b\1").search("xaabaa")
    assert m is not None and m.span() == (1, 6)


def test_bad_patterns_are_refused() -> None:
    from supervisor.scripted.safe_regex import PatternError

    with pytest.raises(PatternError):
        compile_pattern("(a")
    with pytest.raises(PatternError):
        compile_pattern(r"(a)*\2")
