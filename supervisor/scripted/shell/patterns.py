"""Shell patterns and POSIX regular expressions, translated to Python ``re`` (cached).

A *pattern string* here is the expanded pattern word in which every quoted character is
preceded by a backslash, so ``[[ $x == "a*"* ]]`` becomes ``a\\*\\**``: quoted characters
match literally, unquoted ones keep their glob meaning (including extglob operators).

Differential cases: ``cases_expansion.txt``, ``cases_control.txt``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..budget import spend
from ..errors import LimitExceeded
from ..safe_regex import PatternError, SafePattern, compile_pattern
from ..sized_cache import sized_cache

Regex = re.Pattern[str] | SafePattern

_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v",
    "blank": " \\t",
    "punct": "!-/:-@\\[-`{-~",
    "print": " -~",
    "graph": "!-~",
    "cntrl": "\\x00-\\x1f\\x7f",
    "xdigit": "0-9A-Fa-f",
    "word": "a-zA-Z0-9_",
}
EXTGLOB = 1  # pattern flag: ?( ) *( ) +( ) @( ) !( ) (shopt extglob; always in [[ ]])
NOCASE = 2  # pattern flag: shopt nocasematch
_GLOB_SPECIAL = frozenset("*?[\\")
_QUOTE_SPECIAL = frozenset("*?[\\()|&")
_EXTGLOB = frozenset("?*+@!")


_QUOTE_TABLE = {ord(c): "\\" + c for c in _QUOTE_SPECIAL}


def quote_pattern(text: str) -> str:
    """Escape ``text`` so that it matches itself as a pattern (scans at C speed: the
    text may be a value of megabytes)."""
    if not any(c in text for c in _QUOTE_SPECIAL):
        return text
    return text.translate(_QUOTE_TABLE)


def has_glob(pattern: str) -> bool:
    return any(c in pattern for c in _GLOB_SPECIAL)


def _bracket(pat: str, i: int) -> tuple[str, int] | None:
    """Translate a bracket expression starting at ``pat[i] == '['``."""
    n = len(pat)
    j = i + 1
    negate = False
    if j < n and pat[j] in "!^":
        negate = True
        j += 1
    out: list[str] = []
    first = True
    while j < n:
        c = pat[j]
        if c == "]" and not first:
            body = "".join(out)
            if not body:
                return None
            return ("[^" if negate else "[") + body + "]", j + 1
        first = False
        if c == "[" and j + 1 < n and pat[j + 1] == ":":
            end = pat.find(":]", j + 2)
            if end >= 0:
                name = pat[j + 2 : end]
                cls = _CLASSES.get(name)
                if cls is not None:
                    out.append(cls)
                    j = end + 2
                    continue
        if c == "\\" and j + 1 < n:
            out.append(re.escape(pat[j + 1]))
            j += 2
            continue
        if c == "-" and out and j + 1 < n and pat[j + 1] != "]":
            out.append("-")
            j += 1
            continue
        out.append("\\" + c if c in "\\]^-[" else c)
        j += 1
    return None


def _glob(pat: str, i: int, stop: str, lazy: bool, ext: bool = True) -> tuple[str, int]:
    """Translate from ``i`` until an unnested char in ``stop``; returns (regex, index)."""
    out: list[str] = []
    n = len(pat)
    star = ".*?" if lazy else ".*"
    while i < n:
        c = pat[i]
        if c in stop:
            break
        if ext and c in _EXTGLOB and i + 1 < n and pat[i + 1] == "(":
            alts: list[str] = []
            j = i + 2
            while True:
                sub, j = _glob(pat, j, "|)", lazy, ext)
                alts.append(sub)
                if j >= n:
                    break
                if pat[j] == ")":
                    j += 1
                    break
                j += 1
            if j <= n and pat[j - 1 : j] == ")":
                body = "|".join(alts)
                if c == "?":
                    out.append(f"(?:{body})?")
                elif c == "*":
                    out.append(f"(?:{body})*")
                elif c == "+":
                    out.append(f"(?:{body})+")
                elif c == "@":
                    out.append(f"(?:{body})")
                else:
                    rest, _ = _glob(pat, j, stop, lazy, ext)
                    out.append(f"(?:(?!(?:{body}){rest}\\Z).*?)")
                i = j
                continue
        if c == "*":
            while i + 1 < n and pat[i + 1] == "*":
                i += 1
            out.append(star)
        elif c == "?":
            out.append(".")
        elif c == "[":
            br = _bracket(pat, i)
            if br is None:
                out.append("\\[")
            else:
                out.append(br[0])
                i = br[1]
                continue
        elif c == "\\":
            if i + 1 < n:
                out.append(re.escape(pat[i + 1]))
                i += 2
                continue
            out.append("\\\\")
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out), i


@sized_cache(max_entries=1024, max_bytes=1 << 20)
def glob_regex(pattern: str, lazy: bool = False, flags: int = 0) -> Regex:
    """The regex of a shell pattern (not anchored; callers choose match/fullmatch)."""
    body, _ = _glob(pattern, 0, "", lazy, bool(flags & EXTGLOB))
    return _compile(body, re.DOTALL | (re.IGNORECASE if flags & NOCASE else 0))


def _compile(source: str, flags: int, longest: bool = False) -> Regex:
    try:
        return compile_pattern(source, flags, longest=longest)
    except PatternError:
        raise LimitExceeded(f"maximum pattern size exceeded ({len(source)} bytes)") from None


def _plain(pattern: str, flags: int) -> bool:
    return (
        not has_glob(pattern) and not (flags & EXTGLOB and "(" in pattern) and not (flags & NOCASE)
    )


def fnmatch(text: str, pattern: str, flags: int = 0) -> bool:
    """Does the whole of ``text`` match the shell pattern?"""
    if _plain(pattern, flags):
        return text == pattern
    if _stars_only(pattern, flags):
        return _star_match(text, pattern.split("*"))
    return glob_regex(pattern, False, flags).fullmatch(text) is not None


def _stars_only(pattern: str, flags: int) -> bool:
    """Literal text and ``*`` only: matched without a regex (``[[ $x == $big* ]]``)."""
    return (
        not (flags & NOCASE)
        and not any(c in pattern for c in "?[\\")
        and not (flags & EXTGLOB and "(" in pattern)
    )


def _star_match(text: str, pieces: list[str]) -> bool:
    """``*``-separated literal ``pieces`` against the whole of ``text``: the first at the
    start, the last at the end, the others leftmost in between (linear in the text)."""
    first, last = pieces[0], pieces[-1]
    if len(text) < len(first) + len(last) or not text.startswith(first):
        return False
    if not text.endswith(last):
        return False
    pos, end = len(first), len(text) - len(last)
    for piece in pieces[1:-1]:
        found = text.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return True


_EXACT_LIMIT = 1024  # strings up to this size get exhaustive (exact) matching


@sized_cache(max_entries=512, max_bytes=1 << 20)
def _suffix_regex(pattern: str, longest: bool, flags: int) -> Regex:
    body, _ = _glob(pattern, 0, "", False, bool(flags & EXTGLOB))
    lead = ".*?" if longest else ".*"
    return _compile(f"{lead}({body})\\Z", re.DOTALL | (re.IGNORECASE if flags & NOCASE else 0))


def remove_prefix(text: str, pattern: str, longest: bool, flags: int = 0) -> str:
    """``${x#pat}`` / ``${x##pat}``."""
    if not pattern:
        return text
    if _plain(pattern, flags):
        return text[len(pattern) :] if text.startswith(pattern) else text
    rx = glob_regex(pattern, False, flags)
    if len(text) <= _EXACT_LIMIT:
        ends = range(len(text), -1, -1) if longest else range(len(text) + 1)
        for end in ends:
            if rx.fullmatch(text, 0, end):
                return text[end:]
        return text
    m = glob_regex(pattern, not longest, flags).match(text)
    return text if m is None else text[m.end() :]


def remove_suffix(text: str, pattern: str, longest: bool, flags: int = 0) -> str:
    """``${x%pat}`` / ``${x%%pat}`` (exact at any size: the regex engine scans starts)."""
    if not pattern:
        return text
    if _plain(pattern, flags):
        return text[: -len(pattern)] if text.endswith(pattern) else text
    m = _suffix_regex(pattern, longest, flags).match(text)
    return text if m is None else text[: m.start(1)]


def replace(
    text: str,
    pattern: str,
    repl: Callable[[str], str],
    mode: str,
    flags: int = 0,
    limit: int = 10_000_000,
) -> str:
    """``${x/pat/rep}``: mode '/' first, '//' all, '/#' anchored start, '/%' anchored end.
    Raises ``LimitExceeded`` rather than build a result longer than ``limit``."""
    if pattern == "" and mode in ("/", "//"):
        return text
    if mode == "/#":
        rest = remove_prefix(text, pattern, True, flags)
        if rest == text and not glob_regex(pattern, False, flags).fullmatch(""):
            return text
        return repl(text[: len(text) - len(rest)]) + rest
    if mode == "/%":
        m = _suffix_regex(pattern, True, flags).match(text)
        if m is None:
            return text
        return text[: m.start(1)] + repl(text[m.start(1) :])
    if mode in ("/", "//") and _plain(pattern, flags):
        # a literal: str.replace at C speed, its size known before it is built
        if pattern not in text:
            return text
        piece = repl(pattern)
        if mode == "/":
            return text.replace(pattern, piece, 1)
        if len(text) + text.count(pattern) * (len(piece) - len(pattern)) > limit:
            raise LimitExceeded(f"maximum value size exceeded ({limit})")
        return text.replace(pattern, piece)
    rx = glob_regex(pattern, False, flags)
    out: list[str] = []
    pos = 0
    size = 0
    n = len(text)
    while pos <= n:
        spend(4)
        found = _longest_at_or_after(rx, text, pos)
        if found is None:
            break
        s, e = found
        if e == s:  # bash skips empty matches
            if s >= n:
                break
            out.append(text[pos : s + 1])
            pos = s + 1
            continue
        out.append(text[pos:s])
        piece = repl(text[s:e])
        out.append(piece)
        size += s - pos + len(piece)
        if size > limit:
            raise LimitExceeded(f"maximum value size exceeded ({limit})")
        pos = e
        if mode != "//":
            break
    out.append(text[pos:])
    return "".join(out)


def _longest_at_or_after(rx: Regex, text: str, pos: int) -> tuple[int, int] | None:
    m = rx.search(text, pos)
    if m is None:
        return None
    s = m.start()
    if len(text) - s <= _EXACT_LIMIT:
        for end in range(len(text), m.end() - 1, -1):
            if rx.fullmatch(text, s, end):
                return s, end
    return s, m.end()


# ----------------------------------------------------------------- POSIX ERE (=~)


@sized_cache(max_entries=512, max_bytes=1 << 20)
def ere_regex(ere: str, nocase: bool = False) -> Regex:
    """Translate a POSIX extended regular expression (glibc flavour) and compile it for
    POSIX's leftmost-longest match."""
    out: list[str] = []
    i, n = 0, len(ere)
    while i < n:
        c = ere[i]
        if c == "\\" and i + 1 < n:
            e = ere[i + 1]
            if e in "<>":
                out.append("\\b")
            elif e in "wWsSbB":
                out.append("\\" + e)
            elif e == "`":
                out.append("\\A")
            elif e == "'":
                out.append("\\Z")
            else:
                out.append(re.escape(e))
            i += 2
            continue
        if c == "[":
            br = _bracket_ere(ere, i)
            if br is not None:
                out.append(br[0])
                i = br[1]
                continue
            out.append("\\[")
        elif c == "$":
            out.append("\\Z")  # POSIX `$`: the end of the string only
        elif c == "{":
            m = re.match(r"\{(\d*)(,(\d*))?\}", ere[i:])
            if m and out and (m.group(1) or m.group(3)):
                out.append(m.group(0))
                i += m.end()
                continue
            out.append("\\{")
        elif c in "}":
            out.append("\\}")
        elif c == "(" and ere[i + 1 : i + 2] == "?":
            out.append("(\\?")
            i += 2
            continue
        else:
            out.append(c)
        i += 1
    return compile_pattern("".join(out), re.DOTALL | (re.IGNORECASE if nocase else 0), longest=True)


def _bracket_ere(ere: str, i: int) -> tuple[str, int] | None:
    n = len(ere)
    j = i + 1
    negate = False
    if j < n and ere[j] == "^":
        negate = True
        j += 1
    out: list[str] = []
    first = True
    while j < n:
        c = ere[j]
        if c == "]" and not first:
            return ("[^" if negate else "[") + "".join(out) + "]", j + 1
        first = False
        if c == "[" and j + 1 < n and ere[j + 1] in ":.=":
            kind = ere[j + 1]
            end = ere.find(kind + "]", j + 2)
            if end >= 0:
                name = ere[j + 2 : end]
                if kind == ":":
                    out.append(_CLASSES.get(name, ""))
                else:
                    out.append(re.escape(name))
                j = end + 2
                continue
        if c == "-" and out and j + 1 < n and ere[j + 1] != "]":
            out.append("-")
        else:
            out.append("\\" + c if c in "\\]^-[" else c)
        j += 1
    return None
