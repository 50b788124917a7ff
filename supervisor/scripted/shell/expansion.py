"""Word expansion: parameters, command and arithmetic substitution, splitting, quoting.

Expansion writes into a ``FieldBuilder`` that knows which text was quoted, so one walk
over a word serves every context: argument fields (IFS splitting, ``"$@"``), plain
strings (assignments, here-docs), glob patterns (quoted characters escaped) and ``=~``
regexes. There is no pathname expansion: ``*`` stays literal, as in the peer.
Words without command substitution take a synchronous fast path.

Differential cases: ``cases_expansion.txt``, ``cases_quoting.txt``,
``cases_variables.txt``.
"""

from __future__ import annotations

import re

from ..budget import spend
from ..contract import ExecutionLimits
from ..errors import AbortExecution, DiscardLine, FatalShellError, LimitExceeded, unbound
from ..integers import INT_MAX
from ..syntax import ast as A
from .arithmetic import ArithError, compile_arith
from .param_ops import (
    attr_flags,
    convert_case,
    format_declare,
    quote_double,
    quote_single,
    slice_items,
    substring,
    transform,
)
from .patterns import quote_pattern, remove_prefix, remove_suffix, replace
from .state import (
    ASSOC,
    EXPORT,
    INTEGER,
    LOWER,
    NAMEREF,
    READONLY,
    UPPER,
    Variables,
    assoc_items,
)

FIELDS, STRING, PATTERN, REGEX, REPLACEMENT = 0, 1, 2, 3, 4
#: in an expanded value used as a ``${x/p/r}`` replacement, bash reads ``\&`` as ``&`` and
#: ``\\`` as ``\`` and keeps any other backslash: escape those for ``_replacement``
_KEEP_BACKSLASH = re.compile(r"\\(?![&\\])")
#: the most fields one word may split into (the peer's word-split limit)
MAX_FIELDS = 100_000
PROCESS_SUBSTITUTION = "execution error: bash: process substitution disabled"
_DEFAULT_IFS = " \t\n"
_WS_SPLIT = re.compile("[ \t\n]+")


def _any_in(chars: str, text: str) -> bool:
    return any(c in text for c in chars)


_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_REF_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(.*)\]\Z", re.DOTALL)


class FieldBuilder:
    """Accumulates the fields of one word (or several, for brace-expanded words), within
    ``limit`` characters and ``MAX_FIELDS`` fields: ``$x$x$x...`` or splitting a huge
    value cannot make memory grow past the limits."""

    __slots__ = (
        "cur", "fields", "has", "ifs_chars", "ifs_nws", "ifs_ws", "limit", "mode", "size",
        "split",
    )  # fmt: skip

    def __init__(self, mode: int, ifs: str | None, limit: int) -> None:
        self.mode = mode
        self.limit = limit
        self.size = 0
        self.fields: list[str] = []
        self.cur: list[str] = []
        self.has = False
        if ifs is None:
            ifs = _DEFAULT_IFS
        self.split = mode == FIELDS and ifs != ""
        self.ifs_ws = "".join(c for c in ifs if c in " \t\n")
        self.ifs_nws = "".join(c for c in ifs if c not in " \t\n")
        self.ifs_chars = frozenset(ifs)

    def grow(self, n: int) -> None:
        self.size += n
        if self.size > self.limit:
            raise LimitExceeded(f"maximum value size exceeded ({self.limit})")
        if n > 65_536:
            spend(n >> 12)  # a big piece: the time and memory checks come sooner

    def quoted(self, text: str) -> None:
        self.grow(len(text))
        mode = self.mode
        if mode in (PATTERN, REPLACEMENT):
            text = quote_pattern(text)
        elif mode == REGEX:
            text = re.escape(text)
        self.cur.append(text)
        self.has = True

    def literal(self, text: str) -> None:
        if text:
            self.grow(len(text))
            self.cur.append(text)
            self.has = True

    def expanded(self, text: str) -> None:
        """Unquoted expansion output: subject to IFS splitting in field mode."""
        self.grow(len(text))
        if self.mode == REPLACEMENT and "\\" in text:
            text = _KEEP_BACKSLASH.sub(r"\\\\", text)
        if not self.split:
            if text:
                self.cur.append(text)
                self.has = True
            return
        ws, nws = self.ifs_ws, self.ifs_nws
        if not any(c in text for c in self.ifs_chars):  # memchr speed: no split at all
            if text:
                self.cur.append(text)
                self.has = True
            return
        # the next position of each IFS character, found again only once passed: the
        # scans run at C speed and each character is scanned once per IFS character
        nxt = {c: text.find(c) for c in self.ifs_chars}
        i, n = 0, len(text)
        while i < n:
            j = n
            for c, at in nxt.items():
                if 0 <= at < i:
                    at = nxt[c] = text.find(c, i)
                if 0 <= at < j:
                    j = at
            if j > i:
                self.cur.append(text[i:j])
                self.has = True
                i = j
                continue
            spend(1)
            while j < n and text[j] in ws:
                j += 1
            if j < n and text[j] in nws:
                self.end(True)
                j += 1
                while j < n and text[j] in ws:
                    j += 1
            else:
                self.end(False)
            i = j

    def end(self, force: bool) -> None:
        if self.has or force:
            if len(self.fields) >= MAX_FIELDS:
                raise LimitExceeded(f"maximum word count exceeded ({MAX_FIELDS})")
            self.fields.append("".join(self.cur))
        self.cur.clear()
        self.has = False

    def finish(self) -> list[str]:
        if self.has:
            self.fields.append("".join(self.cur))
            self.cur.clear()
            self.has = False
        return self.fields

    def text(self) -> str:
        """Everything as one string (string/pattern modes)."""
        if self.fields:
            return " ".join([*self.fields, "".join(self.cur)] if self.has else self.fields)
        return "".join(self.cur)


class GlobFields(FieldBuilder):
    """Fields under ``shopt -s nullglob``: quoted text is escaped as in a pattern, so a
    field that keeps an unquoted ``*``, ``?`` or ``[...]`` is a glob pattern, which
    matches nothing (there are no files) and is dropped, as bash drops it."""

    __slots__ = ()

    def quoted(self, text: str) -> None:
        super().quoted(quote_pattern(text))

    def literal(self, text: str) -> None:
        super().literal(text.replace("\\", "\\\\"))

    def expanded(self, text: str) -> None:
        super().expanded(text.replace("\\", "\\\\"))

    def finish(self) -> list[str]:
        return [_UNESCAPE.sub(r"\1", f) for f in super().finish() if not _GLOB.search(f)]


#: an unescaped glob character: ``*``, ``?`` or a bracket expression
_GLOB = re.compile(r"(?<!\\)(?:\\\\)*(?:[*?]|\[[^]]*\])")
_UNESCAPE = re.compile(r"\\(.)", re.S)


class Expander(Variables):
    """Word expansion over the shell state (mixed into the interpreter)."""

    status: int
    last_bg: int | None
    opt_nounset: bool
    lineno: int
    limits: ExecutionLimits
    #: EXTGLOB / NOCASE bits from ``shopt`` (``patterns`` flags)
    pattern_flags: int
    shopts: set[str]

    async def command_substitution(self, program: A.Program) -> str:
        raise NotImplementedError

    def flags_string(self) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------- entry points

    def fast_args(self, words: tuple[A.ArgWord, ...]) -> list[str] | None:
        """Arguments made only of literals and plain ``$x``: no await needed."""
        if self.shopts and "nullglob" in self.shopts:
            return None
        out: list[str] = []
        for w in words:
            if type(w) is not A.Word:
                return None
            lit = w.literal
            if lit is not None:
                out.append(lit)
                continue
            fast = self.fast_fields(w)
            if fast is None:
                return None
            out.extend(fast)
        return out

    async def expand_args(self, words: tuple[A.ArgWord, ...]) -> list[str]:
        """Command arguments: fields after splitting (brace words give several)."""
        if self.shopts and "nullglob" in self.shopts:
            return await self._expand_args_nullglob(words)
        out: list[str] = []
        for w in words:
            if type(w) is A.Word:
                lit = w.literal
                if lit is not None:
                    out.append(lit)
                    continue
                fast = self.fast_fields(w)
                if fast is not None:
                    out.extend(fast)
                    continue
                b = FieldBuilder(FIELDS, self.get("IFS"), self.limits.max_value_bytes)
                await self.expand_parts(w.parts, False, b)
                out.extend(b.finish())
            else:
                for sub in w.words:  # type: ignore[union-attr]
                    if sub.literal is not None:
                        out.append(sub.literal)
                        continue
                    b = FieldBuilder(FIELDS, self.get("IFS"), self.limits.max_value_bytes)
                    await self.expand_parts(sub.parts, False, b)
                    out.extend(b.finish())
        return out

    async def _expand_args_nullglob(self, words: tuple[A.ArgWord, ...]) -> list[str]:
        """``expand_args`` under ``nullglob``: every word through ``GlobFields``."""
        out: list[str] = []
        for w in words:
            for sub in (w,) if type(w) is A.Word else w.words:  # type: ignore[union-attr]
                b = GlobFields(FIELDS, self.get("IFS"), self.limits.max_value_bytes)
                await self.expand_parts(sub.parts, False, b)
                out.extend(b.finish())
        return out

    async def expand_string(self, word: A.ArgWord) -> str:
        """A word as one string: no splitting (assignments, here-docs, [[ operands])."""
        if type(word) is A.BraceWord:
            parts = [await self.expand_string(w) for w in word.words]
            return " ".join(parts)
        w: A.Word = word  # type: ignore[assignment]
        if w.literal is not None:
            return w.literal
        fast = self.fast_string(w)
        if fast is not None:
            return fast
        b = FieldBuilder(STRING, None, self.limits.max_value_bytes)
        await self.expand_parts(w.parts, False, b)
        return b.text()

    async def expand_pattern(self, word: A.ArgWord, mode: int = PATTERN) -> str:
        """A word as a glob pattern (quoted chars escaped) or an ERE (``mode=REGEX``)."""
        if type(word) is A.BraceWord:
            return " ".join([await self.expand_pattern(w, mode) for w in word.words])
        b = FieldBuilder(mode, None, self.limits.max_value_bytes)
        await self.expand_parts(word.parts, False, b)  # type: ignore[union-attr]
        return b.text()

    # --------------------------------------------------------------- fast paths

    def fast_string(self, w: A.Word) -> str | None:
        """Plain ``$x`` / ``"$x"`` / ``$((expr))`` / literal+var concatenations."""
        out: list[str] = []
        for p in w.parts:
            t = type(p)
            if t is A.Lit:
                out.append(p.text)  # type: ignore[union-attr]
            elif t is A.Param:
                v = self._fast_param(p)  # type: ignore[arg-type]
                if v is None:
                    return None
                out.append(v)
            elif t is A.DQ:
                for q in p.parts:  # type: ignore[union-attr]
                    tq = type(q)
                    if tq is A.Lit:
                        out.append(q.text)  # type: ignore[union-attr]
                    elif tq is A.Param:
                        v = self._fast_param(q)  # type: ignore[arg-type]
                        if v is None:
                            return None
                        out.append(v)
                    else:
                        return None
            elif t is A.ArithSub:
                expr = p.expr.literal  # type: ignore[union-attr]
                if expr is None:
                    return None
                out.append(str(self.arith_expr(expr)))
            else:
                return None
        if len(out) > 1 and sum(map(len, out)) > self.limits.max_value_bytes:
            raise LimitExceeded(f"maximum value size exceeded ({self.limits.max_value_bytes})")
        return "".join(out)

    def fast_fields(self, w: A.Word) -> list[str] | None:
        parts = w.parts
        if len(parts) != 1:
            return None
        p = parts[0]
        t = type(p)
        if t is A.DQ:
            s = self.fast_string(w)
            if s is None or any(type(q) is A.Param and q.name in "@*" for q in p.parts):  # type: ignore[union-attr]
                return None
            return [s]
        if t is A.ArithSub:
            expr = p.expr.literal  # type: ignore[union-attr]
            if expr is None:
                return None
            arith_ifs = self.get("IFS")
            if arith_ifs is not None and arith_ifs != " \t\n":
                return None
            return [str(self.arith_expr(expr))]
        if t is A.Param:
            v = self._fast_param(p)  # type: ignore[arg-type]
            if v is None:
                return None
            if not v:
                return []
            ifs_var = self.vars.get("IFS")
            ifs: object = _DEFAULT_IFS if ifs_var is None else ifs_var.value
            if ifs == _DEFAULT_IFS:
                if " " in v or "\t" in v or "\n" in v:
                    fields = _WS_SPLIT.split(v.strip(" \t\n"))
                    if len(fields) > MAX_FIELDS:
                        raise LimitExceeded(f"maximum word count exceeded ({MAX_FIELDS})")
                    return fields if fields != [""] else []
                return [v]
            if not isinstance(ifs, str) or (ifs and _any_in(ifs, v)):
                return None  # the general splitter handles custom IFS
            return [v]
        return None

    def _fast_param(self, p: A.Param) -> str | None:
        """The value of a plain set scalar ``$name``; None means "take the slow path"."""
        if p.op or p.index is not None or p.indirect:
            return None
        v = self.vars.get(p.name)
        if v is None:
            return None
        val = v.value
        if type(val) is str and not v.attrs & NAMEREF:
            return val
        return None

    # --------------------------------------------------------------- the walk

    async def expand_parts(
        self, parts: tuple[A.Part, ...], quoted: bool, b: FieldBuilder, lit_split: bool = False
    ) -> None:
        for p in parts:
            t = type(p)
            if t is A.Lit:
                if quoted or p.quoted:  # type: ignore[union-attr]
                    b.quoted(p.text)  # type: ignore[union-attr]
                elif lit_split:
                    b.expanded(p.text)  # type: ignore[union-attr]
                else:
                    b.literal(p.text)  # type: ignore[union-attr]
            elif t is A.Param:
                await self.expand_param(p, quoted, b)  # type: ignore[arg-type]
            elif t is A.DQ:
                await self.expand_parts(p.parts, True, b)  # type: ignore[union-attr]
                if not b.has and not _only_at(p):  # type: ignore[arg-type]
                    b.quoted("")
            elif t is A.CmdSub:
                out = await self.command_substitution(p.body)  # type: ignore[union-attr]
                if quoted:
                    b.quoted(out)
                else:
                    b.expanded(out)
            elif t is A.ArithSub:
                expr = p.expr  # type: ignore[union-attr]
                text = expr.literal if expr.literal is not None else await self.expand_string(expr)
                value = str(self.arith_expr(text))
                if quoted:
                    b.quoted(value)
                else:
                    b.expanded(value)
            elif t is A.Tilde:
                b.quoted(self.tilde(p.user))  # type: ignore[union-attr]
            elif t is A.ProcSub:
                opener = p.text[:2]  # type: ignore[union-attr]
                raise AbortExecution(
                    f"{PROCESS_SUBSTITUTION} (line {self.lineno}: {opener}...) as a file"
                    " name; read its output with < <(...) or a pipe)"
                )

    def tilde(self, user: str) -> str:
        if user == "":
            return self.get("HOME") or "/home/sandbox"
        if user == "+":
            return self.get("PWD") or "/home/user"
        if user == "-":
            return self.get("OLDPWD") or "~-"
        return "~" + user

    def arith_expr(self, text: str) -> int:
        try:
            return compile_arith(text)(self)
        except ArithError as exc:
            raise DiscardLine(exc.render(text.strip()), 1) from None
        except RecursionError:
            raise DiscardLine(f"{text.strip()}: expression recursion level exceeded") from None

    # ------------------------------------------------------------- parameters

    def special(self, name: str) -> str | None:
        if name == "?":
            return str(self.status)
        if name == "#":
            return str(len(self.positional))
        if name == "$":
            return "1"
        if name == "0":
            return "bash"
        if name == "!":
            return None if self.last_bg is None else str(self.last_bg)
        if name == "-":
            return self.flags_string()
        if name.isdigit():
            i = int(name) if len(name) < 19 else INT_MAX
            return self.positional[i - 1] if i <= len(self.positional) else None
        return self.get(name)

    async def subscript_key(self, name: str, index: A.Word) -> int | str:
        text = index.literal if index.literal is not None else await self.expand_string(index)
        if self.is_assoc(name):
            return text
        return self.arith_expr(text)

    async def param_value(self, p: A.Param) -> tuple[str | None, list[str] | None, bool]:
        """(scalar, multi, star): ``multi`` is set for ``$@ $* ${a[@]} ${a[*]}``."""
        name = p.name
        index = p.index
        if p.indirect:
            if index in ("@", "*"):  # ${!a[@]}: the keys
                return None, self.keys(name), index == "*"
            v = self.vars.get(name)
            if v is not None and v.attrs & NAMEREF and isinstance(v.value, str):
                return v.value, None, False  # ${!ref}: the name a nameref points to
            ref = self.special(name)
            if ref is None:
                if self.opt_nounset:
                    raise unbound(name)
                return None, None, False
            m = _REF_RE.match(ref)
            if m is not None:
                name = m.group(1)
                sub = m.group(2)
                if sub in ("@", "*"):
                    return None, self.values(name), sub == "*"
                key: int | str = sub if self.is_assoc(name) else self.arith_expr(sub)
                return self.get_item(name, key), None, False
            if not (_NAME_RE.match(ref) or ref.isdigit() or ref in "@*#?-$!"):
                raise DiscardLine(f"{ref}: invalid variable name", 1)
            name = ref
            index = None
        if name in ("@", "*"):
            return None, list(self.positional), name == "*"
        if index is None:
            return self.special(name), None, False
        if index in ("@", "*"):
            return None, self.values(name), index == "*"
        key = await self.subscript_key(name, index)  # type: ignore[arg-type]
        return self.get_item(name, key), None, False

    async def expand_param(self, p: A.Param, quoted: bool, b: FieldBuilder) -> None:
        op = p.op
        if op == "bad":
            raise DiscardLine(f"{p.text}: bad substitution", 1)
        if op in ("!*", "!@"):
            names = sorted(n for n in self.vars if n.startswith(p.name))
            self._emit_multi(names, quoted, op == "!*", b)
            return
        if op == "len":
            await self._length(p, b)
            return
        value, multi, star = await self.param_value(p)
        unset = value is None and multi is None
        if op in ("-", ":-", "=", ":=", "?", ":?", "+", ":+"):
            empty = unset or (op[0] == ":" and (value == "" if multi is None else not multi))
            if multi is not None and op[0] != ":":
                empty = not multi
            kind = op[-1]
            if kind == "+":
                if not empty:
                    await self.expand_parts(p.arg.parts if p.arg else (), quoted, b, True)
                return
            if not empty:
                self._emit(value, multi, star, quoted, b)
                return
            if kind == "-":
                await self.expand_parts(p.arg.parts if p.arg else (), quoted, b, True)
                return
            text = await self.expand_string(p.arg) if p.arg else ""
            if kind == "=":
                if p.indirect or not _NAME_RE.match(p.name):
                    raise DiscardLine(f"${p.name}: cannot assign in this way", 1)
                if isinstance(p.index, A.Word):
                    self.assign_item(p.name, await self.subscript_key(p.name, p.index), text)
                else:
                    self.assign(p.name, text)
                self._emit(text, None, False, quoted, b)
                return
            raise FatalShellError(f"{p.name}: {text or 'parameter null or not set'}", 1)
        if unset and self.opt_nounset and p.name not in ("@", "*") and not p.indirect:
            raise unbound(p.name if p.index is None else p.text[2:-1])
        if not op:
            self._emit(value, multi, star, quoted, b)
            return
        items = multi if multi is not None else ([] if value is None else [value])
        if op == ":":
            await self._substring(p, value, multi, star, quoted, b)
            return
        if op in ("#", "##", "%", "%%"):
            pattern = await self.expand_pattern(p.arg) if p.arg else ""
            fn = remove_prefix if op[0] == "#" else remove_suffix
            longest = len(op) == 2
            out = [fn(x, pattern, longest, self.pattern_flags) for x in items]
        elif op[0] == "/":
            pattern = await self.expand_pattern(p.arg) if p.arg else ""
            repl = await self._replacement(p.arg2)
            limit = self.limits.max_value_bytes
            out = [replace(x, pattern, repl, op, self.pattern_flags, limit) for x in items]
        elif op in ("^", "^^", ",", ",,", "~", "~~"):
            case_pattern = await self.expand_pattern(p.arg) if p.arg and p.arg.parts else None
            out = [convert_case(x, op, case_pattern, self.pattern_flags) for x in items]
        elif op == "@A":
            out = [self._assignment_form(p.name, value, multi is not None)]
            multi = None
        elif op == "@a":
            out = [self._attr_letters(p.name)]
            multi = None
        elif op == "@K":
            out = [self._kv_form(p.name, value, multi is not None)]
            multi = None
        else:
            out = [transform(op, x) for x in items]
        if multi is None:
            if unset and op not in ("@a",):
                return
            self._emit(out[0] if out else "", None, False, quoted, b)
        else:
            self._emit(None, out, star, quoted, b)

    def _emit(
        self,
        value: str | None,
        multi: list[str] | None,
        star: bool,
        quoted: bool,
        b: FieldBuilder,
    ) -> None:
        if multi is None:
            if value is None:
                return
            if quoted:
                b.quoted(value)
            else:
                b.expanded(value)
            return
        self._emit_multi(multi, quoted, star, b)

    def _emit_multi(self, items: list[str], quoted: bool, star: bool, b: FieldBuilder) -> None:
        if (quoted and star) or b.mode != FIELDS:
            ifs = self.get("IFS")
            sep = (" " if ifs is None else ifs[:1]) if star else " "
            joined = sep.join(items)
            if quoted:
                b.quoted(joined)
            else:
                b.expanded(joined)
            return
        if quoted:
            for i, item in enumerate(items):
                if i:
                    b.end(True)
                b.quoted(item)
            return
        for i, item in enumerate(items):
            if i:
                b.end(False)
            b.expanded(item)

    async def _length(self, p: A.Param, b: FieldBuilder) -> None:
        name = p.name
        if name in ("@", "*"):
            n = len(self.positional)
        elif p.index in ("@", "*"):
            n = len(self.values(name))
        else:
            value, _, _ = await self.param_value(A.Param(name, "", p.index))
            if value is None and self.opt_nounset:
                raise unbound(name)
            n = len(value or "")
        b.quoted(str(n)) if b.mode != FIELDS else b.expanded(str(n))

    async def _substring(
        self,
        p: A.Param,
        value: str | None,
        multi: list[str] | None,
        star: bool,
        quoted: bool,
        b: FieldBuilder,
    ) -> None:
        off_text = await self.expand_string(p.arg) if p.arg else ""
        offset = self.arith_expr(off_text)
        length = None
        if p.arg2 is not None:
            length = self.arith_expr(await self.expand_string(p.arg2))
        try:
            if multi is None:
                if value is None:
                    return
                self._emit(substring(value, offset, length), None, False, quoted, b)
                return
            if p.name in ("@", "*"):
                items = list(enumerate(["bash", *self.positional]))
            elif self.is_assoc(p.name):
                items = list(enumerate(multi))
            else:
                v = self.lookup(p.name)
                val = v.value if v is not None else None
                items = sorted(val.items()) if type(val) is dict else list(enumerate(multi))
            self._emit(None, slice_items(items, offset, length), star, quoted, b)
        except ValueError as exc:
            raise DiscardLine(str(exc), 1) from None

    async def _replacement(self, word: A.Word | None):  # type: ignore[no-untyped-def]
        """The replacement of ``${x/p/r}``: an unquoted ``&`` stands for the match."""
        if word is None:
            return lambda m: ""
        b = FieldBuilder(REPLACEMENT, None, self.limits.max_value_bytes)
        await self.expand_parts(word.parts, False, b)
        text = b.text()
        if "&" not in text and "\\" not in text:
            return lambda m: text
        pieces: list[str | None] = []
        buf: list[str] = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 2
                continue
            if c == "&":
                pieces.append("".join(buf))
                buf.clear()
                pieces.append(None)
            else:
                buf.append(c)
            i += 1
        pieces.append("".join(buf))
        return lambda m: "".join(m if x is None else x for x in pieces)

    # ------------------------------------------------------- @A @a @K helpers

    def _attr_letters(self, name: str) -> str:
        v = self.lookup(name)
        if v is None:
            return ""
        flags = ""
        if type(v.value) is dict:
            flags += "A" if v.attrs & ASSOC else "a"
        for bit, letter in ((INTEGER, "i"), (LOWER, "l"), (NAMEREF, "n"), (READONLY, "r")):
            if v.attrs & bit:
                flags += letter
        if v.attrs & UPPER:
            flags += "u"
        if v.attrs & EXPORT:
            flags += "x"
        return flags

    def _assignment_form(self, name: str, value: str | None, whole: bool) -> str:
        """``${x@A}``: a scalar as ``x='v'`` (with ``declare -i`` etc. when it has
        attributes); ``${a[@]@A}`` as ``declare -p`` prints it."""
        v = self.lookup(name)
        if v is None:
            return ""
        if whole and type(v.value) is dict:
            return format_declare(name, v)
        flags = attr_flags(v)
        if value is None:
            return f"declare {flags} {name}" if flags != "--" else ""
        text = f"{name}={quote_single(value)}"
        return text if flags == "--" else f"declare {flags} {text}"

    def _kv_form(self, name: str, value: str | None, whole: bool) -> str:
        v = self.lookup(name)
        if v is None:
            return ""
        val = v.value
        if whole and type(val) is dict:
            if v.attrs & ASSOC:  # bash ends an associative array's pairs with a space
                return "".join(f"{k} {quote_double(x)} " for k, x in assoc_items(val))
            return " ".join(f"{k} {quote_double(x)}" for k, x in sorted(val.items()))
        return quote_single(value or "")


def _only_at(p: A.DQ) -> bool:
    """``"$@"`` / ``"${a[@]}"`` alone in quotes: zero elements give zero fields."""
    return (
        len(p.parts) == 1
        and type(p.parts[0]) is A.Param
        and ((p.parts[0].name in ("@",) and not p.parts[0].op) or p.parts[0].index == "@")
    )
