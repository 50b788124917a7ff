"""The linear-time regex VM agrees with ``re`` (priorities, spans, captures) and stays
linear on the patterns that make ``re`` backtrack for ever."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.scripted.safe_regex import PikeRegex, SafePattern, compile_vm


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
        st.builds(lambda x: f"{x}$", inner),
    )


def _same(
    got: object, want: re.Match[str] | None, groups: bool, rx: re.Pattern[str], text: str
) -> None:
    if want is None:
        assert got is None
        return
    assert got is not None
    span = (got.start(), got.end())  # type: ignore[attr-defined]
    if span != want.span():
        # One corner differs by design: after an iteration of a nested loop matched
        # empty, ``re`` stops the outer loop, while the VM (like bash's POSIX matcher:
        # `[[ .a =~ ((([^a])*|a))* ]]` gives ".a") may take one more iteration. Then
        # the VM's match starts at the same place, is longer, and is itself a match.
        assert span[0] == want.start() and span[1] > want.end()
        assert rx.fullmatch(text, span[0], span[1]) is not None
        return
    if groups:
        assert got.groups() == want.groups()  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(_regex(), st.text(alphabet="abc.", max_size=8))
def test_vm_agrees_with_re(pattern: str, text: str) -> None:
    rx = re.compile(pattern, re.DOTALL)
    vm = compile_vm(pattern, re.DOTALL)
    # captures inside nested loops that iterate on empty matches differ from ``re``'s
    # (a Pike VM keeps one thread per state); spans never do
    groups = sum(pattern.count(q) for q in "*+?{") <= 1
    _same(vm.search(text), rx.search(text), groups, rx, text)
    _same(vm.match(text), rx.match(text), groups, rx, text)
    _same(vm.fullmatch(text), rx.fullmatch(text), groups, rx, text)


def test_an_empty_inner_iteration_continues_like_bash() -> None:
    # bash: [[ .a =~ ((([^a])*|a))* ]] matches ".a" (re stops at ".")
    match = compile_vm("((([^a])*|a))*", re.DOTALL).search(".a")
    assert match is not None and (match.start(), match.end()) == (0, 2)


def test_catastrophic_patterns_use_the_vm_and_stay_fast() -> None:
    for pattern in (r"^(a+)+$", r"^(a|aa)+$", r"(a*)*b", r"^([a-z]+\.)+[a-z]{2,}$"):
        rx = SafePattern(pattern, re.DOTALL)
        assert isinstance(rx._pick(10), PikeRegex), pattern
        start = time.monotonic()
        assert rx.search("a" * 5000 + "!") is None
        assert time.monotonic() - start < 2.0


def test_many_stars_on_a_long_text_use_the_vm() -> None:
    rx = SafePattern(".*a.*a.*a.*b", re.DOTALL)
    assert isinstance(rx._pick(20), re.Pattern)
    assert isinstance(rx._pick(100_000), PikeRegex)
    start = time.monotonic()
    assert rx.fullmatch("a" * 20_000) is None
    assert time.monotonic() - start < 5.0


def test_plain_patterns_keep_re() -> None:
    assert isinstance(SafePattern(r"^[a-z]+@[a-z.]+$", 0)._pick(10**6), PikeRegex)
    assert isinstance(SafePattern(r"a(b|c)d", 0)._pick(10**6), re.Pattern)
    assert isinstance(SafePattern(r"x[0-9]{2,5}", 0)._pick(10**6), re.Pattern)
