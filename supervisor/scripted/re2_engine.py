"""RE2 (the maintained ``google-re2`` binding) behind the part of ``re.Pattern`` the shell
and the text tools use: linear-time matching, and POSIX's leftmost-longest overall match
(``longest_match``) for the POSIX dialects.

Sources are in ``re`` syntax (translated by ``posix_regex`` and ``patterns``); RE2 reads
almost all of it. ``to_re2`` rewrites the few spellings that differ (``\\Z`` is ``\\z``,
``\\uXXXX`` is ``\\x{XXXX}``, ``{,n}`` is ``{0,n}``, the never-matching ``(?!)``) and
returns None for what RE2 cannot do at all (backreferences, lookaround); so does
``compile_re2`` for a program past ``MAX_PROGRAM``, and the caller keeps its other engine.

RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII where ``re``'s are Unicode: a pattern
using them (``ascii_only``) runs on RE2 only for an ASCII text. A text that is not valid
Unicode (a lone surrogate) is not for RE2 either (``takes``).

Offsets: RE2 works on UTF-8 bytes. The text of the last call is kept encoded with the
last character/byte offset pair, so a loop of searches along one line (``grep -o``,
``s///g``) converts offsets in one pass; for an ASCII text they are the same.

RE2 releases the GIL while it matches and its time is linear in the text times the program
size; ``MAX_PROGRAM`` bounds the program, so one call, which nothing can interrupt, is
bounded too (about 10 ms per MB of text at the largest program).
"""

from __future__ import annotations

import re
from typing import Any

from re2 import Options, _re2

from .budget import check_time, spend

#: RE2's memory for one compiled pattern (its default is 8 MiB): a larger one fails to
#: compile, and the caller falls back
MAX_MEM = 4 << 20
#: the largest program RE2 gets; a larger one runs on the fallback engine (with fuel)
MAX_PROGRAM = 5_000

_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_ANCHOR_START = _re2.RE2.Anchor.ANCHOR_START
_ANCHOR_BOTH = _re2.RE2.Anchor.ANCHOR_BOTH
_NULL = (-1, -1)

# after the escaped characters are blanked out (see ``_blank_escapes``)
_UNSUPPORTED = re.compile(r"\\[1-9]|\(\?[=!<]|\(\?P=|\\g")
_UNICODE_CLASSES = re.compile(r"\\[wWdDsSbB]")


def _blank_escapes(source: str) -> str:
    """``source`` with every escaped character but the ones that matter here replaced,
    so that ``\\\\1`` is no backreference and ``\\(?=`` no lookahead."""
    return re.sub(r"\\([^1-9wWdDsSbBgu])", "__", source)


def to_re2(source: str) -> str | None:
    """The RE2 spelling of an ``re`` source, or None when RE2 cannot match it."""
    if _UNSUPPORTED.search(_blank_escapes(source)):
        return None
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            nxt = source[i + 1]
            if nxt == "Z":
                out.append("\\z")
            elif nxt == "u" and i + 6 <= n:
                out.append("\\x{" + source[i + 2 : i + 6] + "}")
                i += 6
                continue
            else:
                out.append(c + nxt)
            i += 2
            continue
        if c == "(" and source.startswith("(?!)", i):
            out.append("[^\\x00-\\x{10FFFF}]")
            i += 4
            continue
        if c == "{" and i + 1 < n and source[i + 1] == ",":
            out.append("{0")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


class Re2Match:
    """The part of ``re.Match`` the tools use."""

    __slots__ = ("_spans", "_text")

    def __init__(self, text: str, spans: list[tuple[int, int]]) -> None:
        self._text = text
        self._spans = spans

    def start(self, group: int = 0, /) -> int:
        return self._spans[group][0]

    def end(self, group: int = 0, /) -> int:
        return self._spans[group][1]

    def span(self, group: int = 0, /) -> tuple[int, int]:
        return self._spans[group]

    def group(self, group: int = 0, /) -> Any:
        start, end = self._spans[group]
        return None if start < 0 else self._text[start:end]

    def groups(self, default: Any = None) -> tuple[Any, ...]:
        return tuple(default if s < 0 else self._text[s:e] for s, e in self._spans[1:])

    @property
    def lastindex(self) -> int | None:
        best, index = -1, None
        for i, (_, end) in enumerate(self._spans[1:], 1):
            if end > best:
                best, index = end, i
        return index


class Re2Regex:
    """A compiled RE2 pattern with ``search``/``match``/``fullmatch`` on ``str``."""

    __slots__ = ("_ascii", "_bpos", "_cpos", "_data", "_regexp", "_text", "ascii_only", "groups")

    def __init__(self, regexp: Any, ascii_only: bool) -> None:
        self._regexp = regexp
        self.ascii_only = ascii_only
        self.groups: int = regexp.NumberOfCapturingGroups()
        self._text: str | None = None
        self._data = b""
        self._ascii = True
        self._cpos = self._bpos = 0

    def takes(self, text: str) -> bool:
        """Whether RE2 matches ``text`` as ``re`` would (see the module docstring)."""
        if text.isascii():
            return True
        if self.ascii_only:
            return False
        if text is self._text:
            return True
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    def _encode(self, text: str) -> bytes:
        if text is not self._text:
            self._data = text.encode("utf-8")
            self._ascii = len(self._data) == len(text)
            self._text = text
            self._cpos = self._bpos = 0
        return self._data

    def _byte(self, pos: int) -> int:
        """The byte offset of character ``pos`` (non-ASCII text), from the last pair."""
        data = self._data
        if pos < self._cpos:
            self._cpos = self._bpos = 0
        spend((pos - self._cpos) // 4096)
        self._bpos += _re2.CharLenToBytes(data, self._bpos, pos - self._cpos)
        self._cpos = pos
        return self._bpos

    def _char(self, bpos: int) -> int:
        data = self._data
        if bpos < self._bpos:
            self._cpos = self._bpos = 0
        spend((bpos - self._bpos) // 4096)
        self._cpos += _re2.BytesToCharLen(data, self._bpos, bpos)
        self._bpos = bpos
        return self._cpos

    def _run(self, anchor: Any, text: str, pos: int, endpos: int | None) -> Re2Match | None:
        n = len(text)
        if pos == 0 and endpos is None:  # the common call: the whole text
            end = n
        else:
            end = n if endpos is None else max(0, min(endpos, n))
            pos = max(0, min(pos, n))
            if pos > end:
                return None
        data = self._data if text is self._text else self._encode(text)
        if end - pos > 4096:
            spend((end - pos) >> 10)
        if self._ascii:
            spans = self._regexp.Match(anchor, data, pos, end)
            if spans[0][0] < 0:
                return None
            return Re2Match(text, spans)
        bpos = self._byte(pos)
        bend = len(data) if end == n else self._byte(end)
        spans = self._regexp.Match(anchor, data, bpos, bend)
        if spans[0] == _NULL:
            return None
        # convert in increasing order, so that the pair only moves forward
        offsets = sorted({b for span in spans for b in span if b >= 0})
        chars = {b: self._char(b) for b in offsets}
        return Re2Match(text, [_NULL if s < 0 else (chars[s], chars[e]) for s, e in spans])

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Re2Match | None:
        return self._run(_UNANCHORED, text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Re2Match | None:
        return self._run(_ANCHOR_START, text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> Re2Match | None:
        return self._run(_ANCHOR_BOTH, text, pos, endpos)


def compile_re2(
    source: str, *, icase: bool = False, dotall: bool = True, longest: bool = True
) -> Re2Regex | None:
    """``source`` (``re`` syntax) on RE2, or None when RE2 cannot run it (see
    ``to_re2``) or its program is too large."""
    spelled = to_re2(source)
    if spelled is None:
        return None
    options = Options()
    options.longest_match = longest
    options.case_sensitive = not icase
    options.dot_nl = dotall
    options.log_errors = False
    options.max_mem = MAX_MEM
    check_time()
    regexp = _re2.RE2(spelled.encode("utf-8", "surrogatepass"), options)
    if not regexp.ok() or regexp.ProgramSize() > MAX_PROGRAM:
        return None
    ascii_only = _UNICODE_CLASSES.search(_blank_escapes(source)) is not None
    return Re2Regex(regexp, ascii_only)
