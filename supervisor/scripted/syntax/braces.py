"""Brace expansion (``{a,b}``, ``{1..10..2}``, ``{a..e}``), done once at parse time.

Bash expands braces before any other expansion and only on unquoted literal text, so
the result depends on the source alone: a word becomes a ``BraceWord`` of words.

Differential cases: ``cases_expansion.txt``, ``cases_quoting.txt``.
"""

from __future__ import annotations

from itertools import pairwise

from ..errors import ParseLimitError
from ..integers import decimal64
from .ast import BraceWord, Lit, Part, Word
from .word_parser import make_word

MAX_BRACE_WORDS = 100_000

Token = str | Part  # a one-character str is an unquoted literal char


def brace_expand(word: Word) -> Word | BraceWord:
    """The word itself, or a BraceWord when it contains a valid brace expression."""
    if not any(type(p) is Lit and not p.quoted and "{" in p.text for p in word.parts):
        return word
    tokens: list[Token] = []
    for p in word.parts:
        if type(p) is Lit and not p.quoted:
            tokens.extend(p.text)
        else:
            tokens.append(p)
    expanded = _expand(tokens)
    if len(expanded) == 1:
        return word
    words = tuple(_to_word(t) for t in expanded)
    return BraceWord(words, word.text)


def _to_word(tokens: list[Token]) -> Word:
    parts: list[Part] = []
    buf: list[str] = []
    for t in tokens:
        if type(t) is str:
            buf.append(t)
        else:
            if buf:
                parts.append(Lit("".join(buf)))
                buf.clear()
            parts.append(t)  # type: ignore[arg-type]
    if buf:
        parts.append(Lit("".join(buf)))
    return make_word(parts, "")


def _expand(tokens: list[Token]) -> list[list[Token]]:
    n = len(tokens)
    i = 0
    while i < n:
        if tokens[i] != "{":
            i += 1
            continue
        depth = 0
        commas: list[int] = []
        close = -1
        for j in range(i, n):
            t = tokens[j]
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth == 0:
                    close = j
                    break
            elif t == "," and depth == 1:
                commas.append(j)
        if close < 0:
            return [tokens]
        alternatives: list[list[Token]] | None = None
        if commas:
            bounds = [i, *commas, close]
            alternatives = [tokens[a + 1 : b] for a, b in pairwise(bounds)]
        else:
            seq = _sequence(tokens[i + 1 : close])
            if seq is not None:
                alternatives = [list(s) for s in seq]
        if alternatives is None:
            i += 1
            continue
        prefix = tokens[:i]
        suffixes = _expand(tokens[close + 1 :])
        result: list[list[Token]] = []
        for alt in alternatives:
            for a in _expand(alt) if commas else [alt]:
                for s in suffixes:
                    result.append(prefix + a + s)
                    if len(result) > MAX_BRACE_WORDS:
                        raise ParseLimitError(
                            f"brace expansion too large (max {MAX_BRACE_WORDS} words)"
                        )
        return result
    return [tokens]


def _sequence(tokens: list[Token]) -> list[str] | None:
    if not all(type(t) is str for t in tokens):
        return None
    text = "".join(tokens)  # type: ignore[arg-type]
    pieces = text.split("..")
    if len(pieces) not in (2, 3):
        return None
    step = 1
    if len(pieces) == 3:
        given = decimal64(pieces[2]) if _is_int(pieces[2]) else None
        if given is None:  # not a number, or past 64 bits: bash leaves the word alone
            return None
        step = abs(given) or 1
    a, b = pieces[0], pieces[1]
    if _is_int(a) and _is_int(b):
        x, y = decimal64(a), decimal64(b)
        if x is None or y is None:
            return None
        count = abs(y - x) // step + 1
        if count > MAX_BRACE_WORDS:
            raise ParseLimitError(f"brace expansion too large (max {MAX_BRACE_WORDS} words)")
        width = 0
        if _padded(a) or _padded(b):
            width = max(len(a), len(b))
        values = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        if width:
            return [f"{v:0{width}d}" if v >= 0 else "-" + f"{-v:0{width - 1}d}" for v in values]
        return [str(v) for v in values]
    if len(a) == 1 and len(b) == 1 and a.isascii() and b.isascii() and a.isalpha() == b.isalpha():
        if not (a.isalpha() and b.isalpha()):
            return None
        x, y = ord(a), ord(b)
        values = range(x, y + 1, step) if x <= y else range(x, y - 1, -step)
        return [chr(v) for v in values]
    return None


def _is_int(s: str) -> bool:
    t = s[1:] if s[:1] in "+-" else s
    return t.isdigit() and t.isascii()


def _padded(s: str) -> bool:
    t = s[1:] if s[:1] in "+-" else s
    return len(t) > 1 and t[0] == "0"
