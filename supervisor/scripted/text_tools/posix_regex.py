"""POSIX regular expressions (BRE and ERE, with the GNU extensions) translated to ``re``
syntax, then compiled for the engine that keeps the execution's deadline.

grep, sed, expr and awk take their patterns from the script, in POSIX syntax; Python's
``re`` differs in what is special (BRE's ``\\(``, ``\\{``; ERE's literal ``{``; anchors
that are literal in the middle of a BRE; backslash inside brackets; ``[:alpha:]``).
``translate`` rewrites one into the other; ``compile_posix`` caches the compiled result,
which ``safe_regex`` runs on ``re`` (plain patterns), RE2 (linear time, POSIX's
leftmost-longest match) or a backtracking engine under the deadline (backreferences).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..budget import spend
from ..safe_regex import MatchLike, PatternError, SafePattern, compile_pattern
from ..sized_cache import sized_cache

__all__ = ["MatchLike", "Regex", "RegexError", "compile_posix", "compile_source", "translate"]


class RegexError(Exception):
    """A pattern that does not compile; the message is GNU's wording where known."""


_CLASS_NAMES = (
    "alpha", "digit", "alnum", "upper", "lower", "space", "blank",
    "punct", "print", "graph", "cntrl", "xdigit",
)  # fmt: skip


@functools.cache
def _class_ranges(name: str) -> str:
    """The members of ``[:name:]`` in the UTF-8 locale (BMP), as ``re`` class ranges."""
    tests: dict[str, Callable[[str], bool]] = {
        "alpha": str.isalpha,
        "digit": lambda c: "0" <= c <= "9",
        "alnum": lambda c: c.isalpha() or "0" <= c <= "9",
        "upper": str.isupper,
        "lower": str.islower,
        "space": lambda c: c in " \t\n\r\f\v",
        "blank": lambda c: c in " \t",
        "punct": lambda c: c.isascii() and c.isprintable() and not c.isalnum() and c != " ",
        "print": lambda c: c.isprintable() and c not in "\t\n\r\f\v",
        "graph": lambda c: c.isprintable() and not c.isspace(),
        "cntrl": lambda c: ord(c) < 32 or ord(c) == 127,
        "xdigit": lambda c: c in "0123456789abcdefABCDEF",
    }
    test = tests[name]
    limit = 128 if name in ("digit", "space", "blank", "punct", "cntrl", "xdigit") else 0x10000
    parts: list[str] = []
    start = -1
    for code in range(limit + 1):
        inside = code < limit and not 0xD800 <= code < 0xE000 and test(chr(code))
        if inside and start < 0:
            start = code
        elif not inside and start >= 0:
            end = code - 1
            parts.append(_class_char(chr(start)))
            if end > start:
                parts.append("-" + _class_char(chr(end)))
            start = -1
    return "".join(parts)


def _class_char(ch: str) -> str:
    """A character escaped for use inside an ``re`` character class."""
    if ch in "\\]^-[":
        return "\\" + ch
    if ch.isprintable() and ch != " ":
        return ch
    return f"\\x{ord(ch):02x}" if ord(ch) < 256 else f"\\u{ord(ch):04x}"


@dataclass(slots=True)
class _Frame:
    """One open group: where its text starts in the output."""

    start: int


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}


class _Translator:
    def __init__(self, pattern: str, ere: bool, dialect: str, multiline: bool) -> None:
        self.p = pattern
        self.ere = ere
        self.dialect = dialect  # "grep" | "sed" | "awk" | "expr"
        self.multiline = multiline
        self.out: list[str] = []
        self.frames: list[_Frame] = [_Frame(0)]
        # The last atom: its index in ``out``, and whether it has a quantifier.
        self.atom_at = -1
        self.atom_quantified = False
        self.groups = 0

    # -- helpers
    def emit_atom(self, text: str) -> None:
        self.atom_at = len(self.out)
        self.out.append(text)
        self.atom_quantified = False

    def emit_anchor(self, text: str) -> None:
        self.out.append(text)
        self.atom_at = -1

    def literal(self, ch: str) -> None:
        self.emit_atom(re.escape(ch))

    def at_expression_start(self) -> bool:
        """True where BRE's ``*`` is literal and ``^`` is an anchor."""
        return self.atom_at < 0 and (not self.out or self.out[-1] in ("(", "|", "^", "(?m:^)"))

    # -- quantifiers
    def quantify(self, text: str) -> None:
        if self.atom_at < 0:
            raise RegexError("Invalid preceding regular expression")
        if self.atom_quantified:
            # POSIX allows ``a**``; re does not: wrap what is there.
            self.out[self.atom_at :] = ["(?:" + "".join(self.out[self.atom_at :]) + ")"]
        self.out.append(text)
        self.atom_quantified = True

    def interval(self, body: str) -> str | None:
        """``m``, ``m,``, ``m,n`` or ``,n`` as an re quantifier, or None if malformed."""
        m = re.fullmatch(r"(\d*)(,?)(\d*)", body)
        if m is None or (not m.group(1) and not m.group(2)):
            return None
        if len(m.group(1)) > 6 or len(m.group(3)) > 6:
            raise RegexError("Regular expression too big")
        low = int(m.group(1)) if m.group(1) else 0
        if not m.group(2):
            high = low
        elif not m.group(3):
            return f"{{{low},}}"
        else:
            high = int(m.group(3))
        if high < low:
            raise RegexError("Invalid content of \\{\\}")
        if high > 32767:
            raise RegexError("Regular expression too big")
        return f"{{{low}}}" if high == low and not m.group(2) else f"{{{low},{high}}}"

    # -- groups
    def open_group(self) -> None:
        self.groups += 1
        self.frames.append(_Frame(len(self.out)))
        self.out.append("(")
        self.atom_at = -1

    def close_group(self) -> None:
        if len(self.frames) == 1:
            if self.ere:
                self.literal(")")
                return
            raise RegexError("Unmatched ) or \\)")
        frame = self.frames.pop()
        self.out.append(")")
        self.atom_at = frame.start
        self.atom_quantified = False

    def alternate(self) -> None:
        self.out.append("|")
        self.atom_at = -1

    # -- main loop
    def run(self) -> str:
        p = self.p
        n = len(p)
        i = 0
        while i < n:
            c = p[i]
            i += 1
            if c == "\\":
                if i >= n:
                    raise RegexError("Trailing backslash")
                i = self.escape(p[i], i + 1)
                continue
            if c == "[":
                i = self.bracket(i)
                continue
            if c == ".":
                self.emit_atom(".")
                continue
            if c == "*":
                if self.at_expression_start():
                    if not self.ere:
                        self.literal("*")
                    # GNU ERE: a leading "*" repeats nothing and is ignored.
                else:
                    self.quantify("*")
                continue
            if c == "^":
                if self.ere or self.at_expression_start():
                    self.emit_anchor("(?m:^)" if self.multiline else "^")
                else:
                    self.literal("^")
                continue
            if c == "$":
                if self.ere or self.bre_dollar_is_anchor(i):
                    self.emit_anchor("(?m:$)" if self.multiline else "\\Z")
                else:
                    self.literal("$")
                continue
            if self.ere:
                if c in "+?":
                    if self.atom_at < 0:
                        self.literal(c)
                    else:
                        self.quantify(c)
                    continue
                if c == "{":
                    close = p.find("}", i)
                    spec = self.interval(p[i:close]) if close >= 0 else None
                    if spec is None or self.atom_at < 0:
                        self.literal("{")
                        continue
                    self.quantify(spec)
                    i = close + 1
                    continue
                if c == "(":
                    self.open_group()
                    continue
                if c == ")":
                    self.close_group()
                    continue
                if c == "|":
                    self.alternate()
                    continue
            self.literal(c)
        if len(self.frames) > 1:
            raise RegexError("Unmatched ( or \\(")
        return "".join(self.out)

    def bre_dollar_is_anchor(self, i: int) -> bool:
        rest = self.p[i:]
        return rest == "" or rest.startswith("\\)") or rest.startswith("\\|")

    def escape(self, c: str, i: int) -> int:
        p = self.p
        if not self.ere:
            if c == "(":
                self.open_group()
                return i
            if c == ")":
                self.close_group()
                return i
            if c == "|":
                self.alternate()
                return i
            if c == "{":
                close = p.find("\\}", i)
                if close < 0:
                    raise RegexError("Unmatched \\{")
                spec = self.interval(p[i:close])
                if spec is None:
                    raise RegexError("Invalid content of \\{\\}")
                if self.atom_at < 0:
                    raise RegexError("Invalid preceding regular expression")
                self.quantify(spec)
                return close + 2
            if c in "+?" and self.dialect != "expr":
                if self.atom_at < 0:
                    self.literal(c)
                else:
                    self.quantify(c)
                return i
        if c.isdigit() and c != "0":
            if int(c) > self.groups:
                raise RegexError("Invalid back reference")
            self.emit_atom(f"(?:\\{c})")
            return i
        if c == "<":
            self.emit_anchor(r"\b(?=\w)")
        elif c == ">":
            self.emit_anchor(r"\b(?<=\w)")
        elif (c == "b" and self.dialect != "awk") or (c == "y" and self.dialect == "awk"):
            self.emit_anchor(r"\b")
        elif c == "B":
            self.emit_anchor(r"\B")
        elif c == "`":
            self.emit_anchor(r"\A")
        elif c == "'":
            self.emit_anchor(r"\Z")
        elif c in "wWsS":
            self.emit_atom("\\" + c)
        elif c in _SIMPLE_ESCAPES and self.dialect in ("sed", "awk"):
            self.literal(_SIMPLE_ESCAPES[c])
        elif c in "xdoc" and self.dialect == "sed" and (code := numeric_escape(self.p, i - 1)):
            char, i = code
            self.literal(char)
        elif c == "b" and self.dialect == "awk":
            self.literal("\b")
        elif c == "/" and self.dialect == "awk":
            self.literal("/")
        else:
            self.literal(c)
        return i

    def bracket(self, i: int) -> int:
        """A bracket expression starting after ``[``; returns the index after ``]``."""
        p = self.p
        n = len(p)
        negate = False
        if i < n and p[i] == "^":
            negate = True
            i += 1
        items: list[str] = []
        first = True
        awk = self.dialect == "awk"
        while True:
            if i >= n:
                raise RegexError("Unmatched [, [^, [:, [., or [=")
            c = p[i]
            if c == "]" and not first:
                i += 1
                break
            first = False
            if c == "[" and i + 1 < n and p[i + 1] in ":=.":
                kind = p[i + 1]
                close = p.find(kind + "]", i + 2)
                if close < 0:
                    raise RegexError("Unmatched [, [^, [:, [., or [=")
                name = p[i + 2 : close]
                i = close + 2
                if kind == ":":
                    if name not in _CLASS_NAMES:
                        raise RegexError("Invalid character class name")
                    items.append(_class_ranges(name))
                    continue
                if len(name) != 1:
                    raise RegexError("Invalid collation character")
                lo = name
            elif c == "\\" and awk and i + 1 < n:
                esc = p[i + 1]
                lo = _SIMPLE_ESCAPES.get(esc, "\b" if esc == "b" else esc)
                i += 2
            elif c == "\\" and self.dialect == "sed" and i + 1 < n and p[i + 1] in _SIMPLE_ESCAPES:
                # GNU sed converts \n, \t... before the regex is compiled, brackets too.
                lo = _SIMPLE_ESCAPES[p[i + 1]]
                i += 2
            else:
                lo = c
                i += 1
            if i + 1 < n and p[i] == "-" and p[i + 1] != "]":
                hi = p[i + 1]
                step = 2
                if hi == "[" and i + 2 < n and p[i + 2] in ".=":
                    close = p.find(p[i + 2] + "]", i + 3)
                    if close < 0:
                        raise RegexError("Unmatched [, [^, [:, [., or [=")
                    hi = p[i + 3 : close]
                    step = close + 2 - i
                elif hi == "\\" and awk and i + 2 < n:
                    hi = _SIMPLE_ESCAPES.get(p[i + 2], p[i + 2])
                    step = 3
                if len(hi) != 1 or hi < lo:
                    raise RegexError("Invalid range end")
                items.append(_class_char(lo) + "-" + _class_char(hi))
                i += step
            else:
                items.append(_class_char(lo))
        body = "".join(items)
        if negate:
            # POSIX: a non-matching list never matches a newline only in REG_NEWLINE mode;
            # grep/sed/awk all let [^a] match a newline inside a multi-line buffer.
            self.emit_atom(f"[^{body}]" if body else ".")
        else:
            self.emit_atom(f"[{body}]" if body else "(?!)")
        return i


def numeric_escape(p: str, i: int) -> tuple[str, int] | None:
    """GNU sed's ``\\xHH``, ``\\dNNN``, ``\\oNNN`` and ``\\cX`` at ``p[i]`` (the letter):
    the character and the index after the escape."""
    kind = p[i]
    if kind == "c":
        if i + 1 < len(p):
            return chr(ord(p[i + 1].upper()) ^ 0x40), i + 2
        return None
    digits = {"x": "0123456789abcdefABCDEF", "d": "0123456789", "o": "01234567"}[kind]
    width = {"x": 2, "d": 3, "o": 3}[kind]
    j = i + 1
    while j < len(p) and j < i + 1 + width and p[j] in digits:
        j += 1
    if j == i + 1:
        return None
    value = int(p[i + 1 : j], {"x": 16, "d": 10, "o": 8}[kind])
    return chr(value), j


def translate(pattern: str, *, ere: bool, dialect: str = "grep", multiline: bool = False) -> str:
    """The ``re`` source for a POSIX pattern (``dialect`` picks the escape rules)."""
    return _Translator(pattern, ere, dialect, multiline).run()


#: A compiled pattern of any engine, and a match of any engine.
Regex = re.Pattern[str] | SafePattern


def finditer(regex: Regex, text: str) -> Iterator[MatchLike]:
    """``re.finditer`` for any ``Regex`` (empty matches step one character on); each
    match spends fuel (a million of them in one text take seconds)."""
    pos = 0
    n = len(text)
    while pos <= n:
        m = regex.search(text, pos)
        if m is None:
            return
        spend()
        yield m
        start, end = m.span()
        pos = end if end > start else end + 1


def split(regex: Regex, text: str) -> list[str]:
    """``re.split`` without the captured groups, for any ``Regex``."""
    pieces: list[str] = []
    pos = 0
    for m in finditer(regex, text):
        start, end = m.span()
        if end == start:
            continue
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return pieces


@sized_cache(max_entries=512, max_bytes=1 << 20)
def compile_posix(
    pattern: str,
    *,
    ere: bool,
    icase: bool = False,
    dialect: str = "grep",
    multiline: bool = False,
) -> Regex:
    """Translate and compile, cached: scripts call the same pattern in loops."""
    return compile_source(
        translate(pattern, ere=ere, dialect=dialect, multiline=multiline), icase=icase
    )


def compile_source(source: str, *, icase: bool = False, longest: bool = True) -> Regex:
    """An ``re`` source (translated, or ``grep -P``'s) compiled for the engine that keeps
    the deadline (``safe_regex``); POSIX's leftmost-longest match unless ``longest`` is
    False (Perl's leftmost-first, for ``-P``)."""
    flags = re.DOTALL | (re.IGNORECASE if icase else 0)
    try:
        return compile_pattern(source, flags, longest=longest)
    except PatternError as exc:
        raise RegexError(str(exc)) from exc
