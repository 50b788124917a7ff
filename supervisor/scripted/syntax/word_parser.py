"""Lexing of one shell word into quoted/unquoted parts and expansions.

tree-sitter decides where a word starts and ends and parses the programs inside
``$(...)``; the inside of a word (quotes, escapes, ``${...}`` operators, arithmetic text)
is lexed here, because tree-sitter-bash's view of those is lossy (``${x/a/b}`` becomes a
"regex" node, ``$"..."`` splits into two arguments). Positions are character offsets into
the whole script, so a resolver can hand back the already-parsed ``$(...)`` program.

Differential cases: ``cases_quoting.txt``, ``cases_expansion.txt``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import ShellSyntaxError
from .ast import (
    DQ,
    ArithSub,
    CmdSub,
    Lit,
    Param,
    Part,
    ProcSub,
    Program,
    Tilde,
    Word,
)

#: (absolute start offset of ``$(``, `` ` `` or ``<(``) -> (program, absolute end offset)
SubstResolver = Callable[[int], "tuple[Program, int] | None"]
#: parses a fragment of script text (the fallback when no resolver knows an offset)
FragmentParser = Callable[[str], Program]

SPECIAL_PARAMS = frozenset("@*#?-$!0")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_DQ_ESCAPABLE = frozenset('$`"\\\n')
_HEREDOC_ESCAPABLE = frozenset("$`\\\n")
_PARAM_OPS = (":-", ":=", ":?", ":+", "//", "/#", "/%", "##", "%%", "^^", ",,", "~~")
_PARAM_OPS1 = frozenset("-=?+#%/^,~:@")
_TRANSFORMS = frozenset("QEPAKaUuLk")

#: a word with no quoting, expansion, tilde or process substitution
_PLAIN_WORD = re.compile(r"[^\\'\"$`~<>\s]*")

_ANSI_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def decode_ansi_c(body: str) -> str:
    """Decode the inside of ``$'...'`` (also used by ``printf %b`` and ``echo -e``).
    ``\\xHH`` and ``\\NNN`` are bytes, as in bash: a run of them is decoded as UTF-8
    (``$'\\xe2\\x9c\\x93'`` is one character), bytes that are not UTF-8 as
    surrogate escapes, as the text tools read them."""
    out: list[str] = []
    raw = bytearray()  # the run of byte escapes being collected

    def flush() -> None:
        if raw:
            out.append(raw.decode("utf-8", "surrogateescape"))
            raw.clear()

    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\" or i + 1 >= n:
            flush()
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in "01234567":
            j = i - 1
            while j < n and j < i + 2 and body[j] in "01234567":
                j += 1
            raw.append(int(body[i - 1 : j], 8) & 0xFF)
            i = j
            continue
        if e == "x":
            j = i
            while j < n and j < i + 2 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j > i:
                raw.append(int(body[i:j], 16))
                i = j
                continue
        flush()
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
        elif e == "x":
            out.append("\\x")
        elif e in "uU":
            j = i
            limit = 4 if e == "u" else 8
            while j < n and j < i + limit and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i:
                out.append("\\" + e)
            else:
                code = int(body[i:j], 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
            i = j
        elif e == "c" and i < n:
            out.append(chr(ord(body[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    flush()
    return "".join(out)


def make_word(parts: list[Part], text: str) -> Word:
    """Merge adjacent literals and precompute the value of a word without expansions."""
    merged: list[Part] = []
    for p in parts:
        if type(p) is Lit and merged and type(merged[-1]) is Lit and merged[-1].quoted == p.quoted:
            merged[-1] = Lit(merged[-1].text + p.text, p.quoted)
        else:
            merged.append(p)
    literal: str | None = None
    if all(type(p) is Lit for p in merged):
        literal = "".join(p.text for p in merged)  # type: ignore[union-attr]
    elif all(type(p) is Lit or (type(p) is DQ and _dq_literal(p)) for p in merged):
        literal = "".join(
            p.text if type(p) is Lit else "".join(q.text for q in p.parts)  # type: ignore[union-attr]
            for p in merged
        )
    return Word(tuple(merged), literal, text)


def _dq_literal(p: DQ) -> bool:
    return all(type(q) is Lit for q in p.parts)


class WordLexer:
    """Lexes ``source[start:end]`` as one word (or here-doc body, or arithmetic text)."""

    __slots__ = ("end", "line", "parse_fragment", "pos", "resolve", "src")

    def __init__(
        self,
        src: str,
        start: int,
        end: int,
        resolve: SubstResolver,
        parse_fragment: FragmentParser,
        line: int = 1,
    ) -> None:
        self.src = src
        self.pos = start
        self.end = end
        self.resolve = resolve
        self.parse_fragment = parse_fragment
        self.line = line

    # ------------------------------------------------------------------ entry points

    def word(self, assignment: bool = False) -> Word:
        """An ordinary word; ``assignment`` enables ``~`` after ``:`` (``PATH=~/a:~/b``)."""
        start = self.pos
        text = self.src[start : self.end]
        if _PLAIN_WORD.fullmatch(text):  # the common case: nothing to lex
            self.pos = self.end
            return Word((Lit(text),), text, text)
        parts = self._parts(stop="", assignment=assignment, tilde=True)
        return make_word(parts, self.src[start : self.pos])

    def heredoc(self) -> Word:
        start = self.pos
        parts = self._heredoc_parts()
        return make_word(parts, self.src[start : self.pos])

    # -------------------------------------------------------------------- unquoted

    def _parts(
        self,
        stop: str,
        assignment: bool = False,
        tilde: bool = False,
        brace_depth_stop: bool = False,
        in_dq: bool = False,
        single_quotes_literal: bool = False,
    ) -> list[Part]:
        """Lex until end or an unnested char of ``stop`` (not consumed)."""
        src, end = self.src, self.end
        parts: list[Part] = []
        buf: list[str] = []
        depth = 0

        def flush() -> None:
            if buf:
                parts.append(Lit("".join(buf), in_dq))
                buf.clear()

        if tilde and self.pos < end and src[self.pos] == "~":
            self._tilde(parts, stop, assignment)
        while self.pos < end:
            c = src[self.pos]
            if depth == 0 and c in stop:
                break
            if c == "\\":
                if self.pos + 1 >= end:
                    buf.append("\\")
                    self.pos += 1
                    continue
                nxt = src[self.pos + 1]
                self.pos += 2
                if nxt == "\n":
                    continue
                if in_dq and nxt not in _DQ_ESCAPABLE and nxt not in stop:
                    buf.append("\\" + nxt)
                    continue
                flush()
                parts.append(Lit(nxt, True))
            elif c == "'" and not single_quotes_literal:
                close = src.find("'", self.pos + 1, end)
                if close < 0:
                    raise ShellSyntaxError("unexpected EOF while looking for matching `''")
                flush()
                parts.append(Lit(src[self.pos + 1 : close], True))
                self.pos = close + 1
            elif c == '"':
                flush()
                self.pos += 1
                parts.append(DQ(tuple(self._dq_parts())))
            elif c == "$":
                flush()
                self._dollar(parts, in_dq)
            elif c == "`":
                flush()
                parts.append(self._backquote())
            elif c in "<>" and self.pos + 1 < end and src[self.pos + 1] == "(" and not in_dq:
                flush()
                parts.append(self._procsub())
            else:
                if brace_depth_stop:
                    if c == "{":
                        depth += 1
                    elif c == "}":
                        depth -= 1
                buf.append(c)
                self.pos += 1
                if assignment and c == ":" and self.pos < end and src[self.pos] == "~":
                    flush()
                    self._tilde(parts, stop, assignment)
        flush()
        return parts

    def _tilde(self, parts: list[Part], stop: str, assignment: bool) -> None:
        src, end = self.src, self.end
        j = self.pos + 1
        while j < end and src[j] not in "/:" + stop and (src[j] in _NAME_CHARS or src[j] in "+-"):
            j += 1
        if j < end and src[j] not in "/" + stop and not (assignment and src[j] == ":"):
            return  # not a tilde prefix (e.g. ~"x"); stays literal
        user = src[self.pos + 1 : j]
        if user and user not in ("+", "-") and not all(ch in _NAME_CHARS for ch in user):
            return
        parts.append(Tilde(user))
        self.pos = j

    # ------------------------------------------------------------- double quoted

    def _dq_parts(self) -> list[Part]:
        src, end = self.src, self.end
        parts: list[Part] = []
        buf: list[str] = []
        while True:
            if self.pos >= end:
                raise ShellSyntaxError("unexpected EOF while looking for matching `\"'")
            c = src[self.pos]
            if c == '"':
                self.pos += 1
                break
            if c == "\\" and self.pos + 1 < end:
                nxt = src[self.pos + 1]
                self.pos += 2
                if nxt in _DQ_ESCAPABLE:
                    if nxt != "\n":
                        buf.append(nxt)
                else:
                    buf.append("\\" + nxt)
            elif c == "$":
                if buf:
                    parts.append(Lit("".join(buf), True))
                    buf.clear()
                self._dollar(parts, True)
            elif c == "`":
                if buf:
                    parts.append(Lit("".join(buf), True))
                    buf.clear()
                parts.append(self._backquote())
            else:
                buf.append(c)
                self.pos += 1
        if buf:
            parts.append(Lit("".join(buf), True))
        return parts

    def _heredoc_parts(self) -> list[Part]:
        src, end = self.src, self.end
        parts: list[Part] = []
        buf: list[str] = []
        while self.pos < end:
            c = src[self.pos]
            if c == "\\" and self.pos + 1 < end:
                nxt = src[self.pos + 1]
                self.pos += 2
                if nxt in _HEREDOC_ESCAPABLE:
                    if nxt != "\n":
                        buf.append(nxt)
                else:
                    buf.append("\\" + nxt)
            elif c == "$" or c == "`":
                if buf:
                    parts.append(Lit("".join(buf), True))
                    buf.clear()
                if c == "$":
                    self._dollar(parts, True)
                else:
                    parts.append(self._backquote())
            else:
                buf.append(c)
                self.pos += 1
        if buf:
            parts.append(Lit("".join(buf), True))
        return parts

    # ---------------------------------------------------------------- expansions

    def _dollar(self, parts: list[Part], in_dq: bool) -> None:
        src, end, pos = self.src, self.end, self.pos
        nxt = src[pos + 1] if pos + 1 < end else ""
        if nxt == "{":
            self.pos = pos + 2
            parts.append(self._brace_param(in_dq))
        elif nxt == "(":
            if pos + 2 < end and src[pos + 2] == "(":
                arith = self._arith(pos + 3, "))")
                if arith is not None:
                    parts.append(arith)
                    return
            parts.append(self._cmdsub(pos, pos + 2, ")"))
        elif nxt == "[":
            arith = self._arith(pos + 2, "]")
            if arith is None:
                raise ShellSyntaxError("unexpected EOF while looking for matching `]'")
            parts.append(arith)
        elif nxt == "'" and not in_dq:
            close = pos + 2
            while close < end and src[close] != "'":
                close += 2 if src[close] == "\\" else 1
            if close >= end:
                raise ShellSyntaxError("unexpected EOF while looking for matching `''")
            parts.append(Lit(decode_ansi_c(src[pos + 2 : close]), True))
            self.pos = close + 1
        elif nxt == '"' and not in_dq:
            self.pos = pos + 2
            parts.append(DQ(tuple(self._dq_parts())))
        elif nxt in _NAME_START:
            j = pos + 2
            while j < end and src[j] in _NAME_CHARS:
                j += 1
            parts.append(Param(src[pos + 1 : j], text=src[pos:j]))
            self.pos = j
        elif nxt in _DIGITS or (nxt in SPECIAL_PARAMS and nxt):
            parts.append(Param(nxt, text=src[pos : pos + 2]))
            self.pos = pos + 2
        else:
            parts.append(Lit("$", in_dq))
            self.pos = pos + 1

    def _cmdsub(self, start: int, body_start: int, close: str) -> Part:
        found = self.resolve(start)
        if found is not None:
            program, stop = found
            self.pos = stop
            return CmdSub(program)
        stop = self._match_paren(body_start)
        self.pos = stop + 1
        return CmdSub(self.parse_fragment(self.src[body_start:stop]))

    def _procsub(self) -> Part:
        start = self.pos
        found = self.resolve(start)
        if found is not None:
            program, self.pos = found
        else:
            self.pos = self._match_paren(start + 2) + 1
            program = self.parse_fragment(self.src[start + 2 : self.pos - 1])
        return ProcSub(self.src[start : self.pos], program)

    def _match_paren(self, i: int) -> int:
        """Index of the ``)`` closing a ``(`` just before ``i`` (quotes respected)."""
        src, end = self.src, self.end
        depth = 1
        while i < end:
            c = src[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                j = src.find("'", i + 1, end)
                i = end if j < 0 else j + 1
                continue
            if c == '"':
                i += 1
                while i < end and src[i] != '"':
                    i += 2 if src[i] == "\\" else 1
                i += 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        raise ShellSyntaxError("unexpected EOF while looking for matching `)'")

    def _backquote(self) -> Part:
        start = self.pos
        found = self.resolve(start)
        src, end = self.src, self.end
        j = start + 1
        body: list[str] = []
        while j < end and src[j] != "`":
            if src[j] == "\\" and j + 1 < end and src[j + 1] in "$`\\":
                body.append(src[j + 1])
                j += 2
                continue
            body.append(src[j])
            j += 1
        if j >= end:
            raise ShellSyntaxError("unexpected EOF while looking for matching ``'")
        self.pos = j + 1
        text = "".join(body)
        if found is not None and "\\" not in src[start:j]:
            return CmdSub(found[0])
        return CmdSub(self.parse_fragment(text))

    def _arith(self, body_start: int, close: str) -> ArithSub | None:
        """Lex arithmetic text up to the unnested ``close``; None when not found."""
        src, end = self.src, self.end
        i, depth = body_start, 0
        while i < end:
            c = src[i]
            if c == "(":
                depth += 1
            elif c == ")" and depth > 0:
                depth -= 1
            elif depth == 0 and src.startswith(close, i):
                break
            elif c == "\\":
                i += 1
            elif c == "'":
                j = src.find("'", i + 1, end)
                i = end if j < 0 else j
            i += 1
        else:
            return None
        sub = WordLexer(src, body_start, i, self.resolve, self.parse_fragment, self.line)
        parts = sub._parts(stop="")
        self.pos = i + len(close)
        return ArithSub(make_word(parts, src[body_start:i]))

    def _brace_param(self, in_dq: bool) -> Part:
        """Lex the inside of ``${...}`` (``self.pos`` is just past ``${``)."""
        src, end = self.src, self.end
        start = self.pos - 2
        i = self.pos
        if i >= end:
            raise ShellSyntaxError("unexpected EOF while looking for matching `}'")
        length = indirect = False
        c = src[i]
        if c == "#" and i + 1 < end and src[i + 1] != "}" and not self._is_op_after_hash(i):
            length = True
            i += 1
        elif c == "!" and i + 1 < end and src[i + 1] != "}":
            indirect = True
            i += 1
        # the name
        j = i
        if j < end and src[j] in _NAME_START:
            while j < end and src[j] in _NAME_CHARS:
                j += 1
        elif j < end and src[j] in _DIGITS:
            while j < end and src[j] in _DIGITS:
                j += 1
        elif j < end and src[j] in SPECIAL_PARAMS:
            j += 1
        name = src[i:j]
        self.pos = j
        index: Word | str | None = None
        if name and self.pos < end and src[self.pos] == "[" and name[0] in _NAME_START:
            index = self._subscript()
        op = ""
        arg: Word | None = None
        arg2: Word | None = None
        if indirect and self.pos < end and src[self.pos] in "*@" and index is None:
            # ${!prefix*} / ${!prefix@}: names starting with prefix
            op = "!" + src[self.pos]
            self.pos += 1
            indirect = False
        if self.pos >= end:
            raise ShellSyntaxError("unexpected EOF while looking for matching `}'")
        c = src[self.pos]
        if c == "}":
            self.pos += 1
        elif not name or length:
            self._skip_to_brace()
            return Param("", "bad", text=src[start : self.pos])
        else:
            op = next((o for o in _PARAM_OPS if src.startswith(o, self.pos)), "")
            if not op:
                if c not in _PARAM_OPS1:
                    self._skip_to_brace()
                    return Param(name, "bad", text=src[start : self.pos])
                op = c
            self.pos += len(op)
            if op == "@":
                t = src[self.pos] if self.pos < end else ""
                if t not in _TRANSFORMS or self.pos + 1 >= end or src[self.pos + 1] != "}":
                    self._skip_to_brace()
                    return Param(name, "bad", text=src[start : self.pos])
                op = "@" + t
                self.pos += 2
            elif op == ":":
                arg = self._sub_word(":}", in_dq, arith=True)
                if src[self.pos] == ":":
                    self.pos += 1
                    arg2 = self._sub_word("}", in_dq, arith=True)
                self.pos += 1
            elif op[0] == "/":
                arg = self._sub_word("/}", in_dq, pattern=True)
                if src[self.pos] == "/":
                    self.pos += 1
                    arg2 = self._sub_word("}", in_dq, repl=True)
                self.pos += 1
            else:
                pattern = op[0] in "#%^,~"
                literal_sq = in_dq and not pattern
                arg = self._sub_word("}", in_dq, pattern=pattern, literal_sq=literal_sq)
                self.pos += 1
        if length:
            op = "len"
        return Param(name, op, index, arg, arg2, indirect, src[start : self.pos])

    def _is_op_after_hash(self, i: int) -> bool:
        """``${#}`` is $#; ``${#:-x}``... treat ``#`` followed by an operator as the name."""
        nxt = self.src[i + 1]
        return nxt in ":-=?+%/" and not (nxt in "-?" and self.src[i + 2 : i + 3] == "}")

    def _subscript(self) -> Word | str:
        src, end = self.src, self.end
        i = self.pos + 1
        depth = 1
        j = i
        while j < end:
            c = src[j]
            if c == "[":
                depth += 1
            elif c == "]":
                depth -= 1
                if depth == 0:
                    break
            elif c == "\\":
                j += 1
            j += 1
        if j >= end:
            raise ShellSyntaxError("unexpected EOF while looking for matching `]'")
        raw = src[i:j]
        self.pos = j + 1
        if raw in ("@", "*"):
            return raw
        sub = WordLexer(src, i, j, self.resolve, self.parse_fragment, self.line)
        return sub.word()

    def _sub_word(
        self,
        stop: str,
        in_dq: bool,
        arith: bool = False,
        pattern: bool = False,
        literal_sq: bool = False,
        repl: bool = False,
    ) -> Word:
        start = self.pos
        if in_dq and not pattern:
            parts = self._dq_like_parts(stop, literal_sq, repl)
        else:
            parts = self._parts(stop=stop, brace_depth_stop=True)
        if self.pos >= self.end:
            raise ShellSyntaxError("unexpected EOF while looking for matching `}'")
        return make_word(parts, self.src[start : self.pos])

    def _dq_like_parts(self, stop: str, literal_sq: bool, repl: bool = False) -> list[Part]:
        """The operand of ``${x:-...}`` inside double quotes: quoted, but nested
        double quotes still group and single quotes stay literal. For the replacement
        of ``${x/p/r}`` (``repl``) plain text stays unquoted, so ``&`` keeps its meaning
        and only a backslash quotes it."""
        src, end = self.src, self.end
        parts: list[Part] = []
        buf: list[str] = []
        depth = 0
        plain_quoted = not repl
        while self.pos < end:
            c = src[self.pos]
            if c in stop and depth == 0:
                break
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            if c == "\\" and self.pos + 1 < end:
                nxt = src[self.pos + 1]
                self.pos += 2
                if repl and nxt in "&\\":
                    if buf:
                        parts.append(Lit("".join(buf), plain_quoted))
                        buf.clear()
                    parts.append(Lit(nxt, True))
                elif nxt in _DQ_ESCAPABLE or nxt == "}":
                    if nxt != "\n":
                        buf.append(nxt)
                else:
                    buf.append("\\" + nxt)
                continue
            if c == '"':
                if buf:
                    parts.append(Lit("".join(buf), plain_quoted))
                    buf.clear()
                self.pos += 1
                parts.extend(self._dq_parts())
                continue
            if c == "'" and not literal_sq:
                close = src.find("'", self.pos + 1, end)
                if close < 0:
                    raise ShellSyntaxError("unexpected EOF while looking for matching `''")
                buf.append(src[self.pos + 1 : close])
                self.pos = close + 1
                continue
            if c in "$`":
                if buf:
                    parts.append(Lit("".join(buf), plain_quoted))
                    buf.clear()
                if c == "$":
                    self._dollar(parts, True)
                else:
                    parts.append(self._backquote())
                continue
            buf.append(c)
            self.pos += 1
        if buf:
            parts.append(Lit("".join(buf), plain_quoted))
        return parts

    def _skip_to_brace(self) -> None:
        src, end = self.src, self.end
        depth = 1
        while self.pos < end:
            c = src[self.pos]
            self.pos += 1
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return
        raise ShellSyntaxError("unexpected EOF while looking for matching `}'")
