"""Regular expressions that keep the execution's deadline, whatever the pattern and text.

Python's ``re`` backtracks inside one C call, where no clock check can stop it:
``grep -E '(a|aa)*b'`` or ``[[ $x =~ ^(a+)+$ ]]`` on a long line would run for ever. Every
pattern the shell and the text tools build (from EREs, BREs and globs, already in ``re``
syntax) is compiled here, for one of three engines:

* ``re``, only for a *plain* pattern: no repetition and no alternation, so each start
  position costs at most the pattern's length and all matches from a position have one
  length (leftmost-first is leftmost-longest). The ordinary literal ``grep 7`` and
  ``s/7/seven/`` stay at ``re``'s speed.
* RE2 (``re2_engine``) for the rest: linear time, and POSIX's leftmost-longest overall
  match when ``longest`` (``[0-9]+|[0-9]+\\.[0-9]+`` on ``15.50`` is ``15.50``).
* The ``regex`` module, a backtracking engine, for what RE2 cannot do (backreferences,
  lookaround, a program past RE2's cap, a text RE2 cannot read), with its ``timeout``
  bounding each call by CPU time in slices that fit the execution's wall-clock deadline
  (see ``SafePattern._slow``). Its ``POSIX`` flag gives leftmost-longest matches.
"""

from __future__ import annotations

import re
import time
from typing import Any

import regex

from .budget import check_time, seconds_left
from .re2_engine import Re2Match, Re2Regex, compile_re2

#: a plain pattern longer than this goes to RE2 too: ``re``'s cost per start position is
#: the pattern's length
PLAIN_MAX = 256


def is_plain(source: str) -> bool:
    """No repetition, no alternation (escaped characters and bracket contents aside)."""
    if len(source) > PLAIN_MAX:
        return False
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            if i < n and source[i] == "^":
                i += 1
            if i < n and source[i] == "]":
                i += 1
            while i < n and source[i] != "]":
                i += 2 if source[i] == "\\" else 1
            i += 1
            continue
        if c in "*+?{|":
            if c == "?" and i > 0 and source[i - 1] == "(":
                i += 1  # (?: (?= (?! (?m: ...: a group's flags, not a repetition
                continue
            return False
        i += 1
    return True


class PatternError(Exception):
    """A pattern neither engine compiles."""


#: A match of any engine (the ``regex`` module's matches have the same methods).
MatchLike = re.Match[str] | Re2Match


#: the longest source the backtracking engine compiles (its compile is one C call: an
#: 8 MB glob took 25 s); past RE2's cap and this, a pattern is "too big"
MAX_BACKTRACK_SOURCE = 1 << 16
#: the backtracking engine's first slice of CPU time, in seconds
_FIRST_SLICE = 0.01


class SafePattern:
    """A compiled pattern on RE2, with the ``regex`` module (deadline as timeout) for what
    RE2 cannot take. The API is the part of ``re.Pattern`` the shell and the tools use."""

    __slots__ = ("_fallback", "_flags", "_re2", "groups", "pattern")

    def __init__(self, source: str, flags: int, *, longest: bool = False) -> None:
        self.pattern = source
        self._flags = flags | (regex.POSIX if longest else 0)
        self._fallback: Any = None
        self._re2: Re2Regex | None = compile_re2(
            source,
            icase=bool(flags & re.IGNORECASE),
            dotall=bool(flags & re.DOTALL),
            longest=longest,
        )
        if self._re2 is None:
            if len(source) > MAX_BACKTRACK_SOURCE:
                raise PatternError("Regular expression too big")
            self.groups: int = self._backtracking().groups
        else:
            self.groups = self._re2.groups

    def _backtracking(self) -> Any:
        if self._fallback is None:
            check_time()
            self._fallback = regex.compile(self.pattern, self._flags)
        return self._fallback

    def _slow(self, how: str, text: str, pos: int, endpos: int | None) -> MatchLike | None:
        """The backtracking engine, in slices of CPU time (its ``timeout`` is process CPU
        time, which a loaded machine stretches in wall time): each slice doubles the last
        but fits in what is left of the deadline at the wall/CPU ratio the last one saw,
        so the call ends within about one slice of the deadline; work repeated across
        slices is at most what the last slice does."""
        method = getattr(self._backtracking(), how)
        end = len(text) if endpos is None else endpos
        if seconds_left() is None:
            found: MatchLike | None = method(text, pos, end, concurrent=True)
            return found
        cpu_slice = _FIRST_SLICE
        while True:
            wall, cpu = time.monotonic(), time.process_time()
            try:
                found = method(text, pos, end, concurrent=True, timeout=cpu_slice)
                return found
            except TimeoutError:
                check_time()  # raises past the deadline
            ratio = max(1.0, (time.monotonic() - wall) / max(time.process_time() - cpu, 1e-4))
            left = seconds_left() or _FIRST_SLICE
            cpu_slice = max(_FIRST_SLICE, min(2 * cpu_slice, left / ratio))

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> MatchLike | None:
        rx = self._re2
        if rx is not None and rx.takes(text):
            return rx.search(text, pos, endpos)
        return self._slow("search", text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> MatchLike | None:
        rx = self._re2
        if rx is not None and rx.takes(text):
            return rx.match(text, pos, endpos)
        return self._slow("match", text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> MatchLike | None:
        rx = self._re2
        if rx is not None and rx.takes(text):
            return rx.fullmatch(text, pos, endpos)
        return self._slow("fullmatch", text, pos, endpos)


def compile_pattern(
    source: str, flags: int = re.DOTALL, *, longest: bool = False
) -> re.Pattern[str] | SafePattern:
    """``re`` for a plain pattern, a ``SafePattern`` otherwise (see the module docstring);
    raises ``PatternError`` for a pattern no engine compiles."""
    try:
        if is_plain(source):
            return re.compile(source, flags)
        return SafePattern(source, flags, longest=longest)
    except (re.error, regex.error) as exc:
        raise PatternError(str(exc)) from None
    except RecursionError:  # pragma: no cover
        raise PatternError("Regular expression too big") from None
