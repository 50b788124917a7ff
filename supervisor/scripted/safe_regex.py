"""A linear-time matcher for the regular expressions that could make Python's ``re``
backtrack for ever.

``re`` is a backtracking engine: ``[[ $x =~ ^(a+)+$ ]]`` on a long run of ``a`` followed by
``b`` takes exponential time inside one C call, where no clock check can stop it. The
patterns the shell builds (from EREs and globs, see ``patterns``) are parsed here; when
one has a repeated sub-expression that itself repeats or alternates (the shape of every
catastrophic case), it runs on a Pike VM instead: simulation of all threads in step, time
linear in the text, priorities as in ``re`` (leftmost-first), captures for
``BASH_REMATCH``, and a ``check`` callback every few thousand characters so the
execution's deadline still holds. Other patterns keep using ``re``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .budget import spend

MAX_PROGRAM = 20_000  # instructions: `(a{1,200}){1,200}` is refused, not expanded

# ------------------------------------------------------------------------------- syntax

Node = tuple[Any, ...]
# ("lit", pred) ("assert", kind) ("cat", [n...]) ("alt", [n...]) ("group", n, index|None)
# ("rep", n, min, max|None, lazy)


class Unsupported(Exception):
    """A construct the VM does not implement (lookahead): use ``re``."""


_CLASS_ESCAPES: dict[str, Callable[[str], bool]] = {
    "w": lambda c: c.isalnum() or c == "_",
    "W": lambda c: not (c.isalnum() or c == "_"),
    "s": lambda c: c.isspace(),
    "S": lambda c: not c.isspace(),
    "d": lambda c: c.isdigit(),
    "D": lambda c: not c.isdigit(),
}
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "0": "\0"}


class _Parser:
    def __init__(self, source: str, nocase: bool) -> None:
        self.s = source
        self.i = 0
        self.groups = 0
        self.nocase = nocase

    def parse(self) -> Node:
        node = self.alt()
        if self.i != len(self.s):
            raise Unsupported(self.s[self.i :])
        return node

    def alt(self) -> Node:
        branches = [self.cat()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            branches.append(self.cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self) -> Node:
        items: list[Node] = []
        s = self.s
        while self.i < len(s) and s[self.i] not in "|)":
            items.append(self.repeat(self.atom()))
        return items[0] if len(items) == 1 else ("cat", items)

    def repeat(self, node: Node) -> Node:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in "*+?":
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self.i += 1
            elif c == "{":
                m = re.match(r"\{(\d*)(,(\d*))?\}", s[self.i :])
                if m is None:
                    return node
                lo = int(m.group(1) or 0)
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                self.i += m.end()
            else:
                return node
            lazy = self.i < len(s) and s[self.i] == "?"
            if lazy:
                self.i += 1
            node = ("rep", node, lo, hi, lazy)
        return node

    def atom(self) -> Node:
        s = self.s
        c = s[self.i]
        self.i += 1
        if c == "(":
            index: int | None = None
            if s.startswith("?:", self.i):
                self.i += 2
            elif s.startswith("?", self.i):
                raise Unsupported("(?")
            else:
                self.groups += 1
                index = self.groups
            inner = self.alt()
            if self.i >= len(s) or s[self.i] != ")":
                raise Unsupported("unbalanced")
            self.i += 1
            return ("group", inner, index)
        if c == ".":
            return ("lit", lambda ch: True)
        if c == "^":
            return ("assert", "^")
        if c == "$":
            return ("assert", "$")
        if c == "[":
            return ("lit", self.klass())
        if c == "\\":
            return self.escape()
        return ("lit", self.char(c))

    def char(self, c: str) -> Callable[[str], bool]:
        if self.nocase and c.lower() != c.upper():
            low = c.lower()
            return lambda ch: ch.lower() == low
        return lambda ch: ch == c

    def escape(self) -> Node:
        s = self.s
        e = s[self.i]
        self.i += 1
        if e in "AZbB":
            return ("assert", e)
        if e in _CLASS_ESCAPES:
            return ("lit", _CLASS_ESCAPES[e])
        if e in _SIMPLE_ESCAPES:
            return ("lit", self.char(_SIMPLE_ESCAPES[e]))
        if e == "x":
            code = int(s[self.i : self.i + 2], 16)
            self.i += 2
            return ("lit", self.char(chr(code)))
        return ("lit", self.char(e))

    def klass(self) -> Callable[[str], bool]:
        s = self.s
        negate = s.startswith("^", self.i)
        if negate:
            self.i += 1
        singles: set[str] = set()
        ranges: list[tuple[str, str]] = []
        tests: list[Callable[[str], bool]] = []
        first = True
        while True:
            if self.i >= len(s):
                raise Unsupported("unterminated class")
            c = s[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            self.i += 1
            if c == "\\":
                e = s[self.i]
                self.i += 1
                if e in _CLASS_ESCAPES:
                    tests.append(_CLASS_ESCAPES[e])
                    continue
                if e == "x":
                    c = chr(int(s[self.i : self.i + 2], 16))
                    self.i += 2
                else:
                    c = _SIMPLE_ESCAPES.get(e, e)
            if s.startswith("-", self.i) and self.i + 1 < len(s) and s[self.i + 1] != "]":
                self.i += 1
                hi = s[self.i]
                self.i += 1
                if hi == "\\":
                    e = s[self.i]
                    self.i += 1
                    if e == "x":
                        hi = chr(int(s[self.i : self.i + 2], 16))
                        self.i += 2
                    else:
                        hi = _SIMPLE_ESCAPES.get(e, e)
                ranges.append((c, hi))
            else:
                singles.add(c)
        nocase = self.nocase

        def test(ch: str) -> bool:
            for cand in {ch, ch.lower(), ch.upper()} if nocase else (ch,):
                if cand in singles or any(lo <= cand <= hi for lo, hi in ranges):
                    return True
                if any(t(cand) for t in tests):
                    return True
            return False

        return (lambda ch: not test(ch)) if negate else test


def _risky(node: Node, inside_repeat: bool = False) -> bool:
    """A repeated sub-expression containing a repetition or an alternation."""
    kind = node[0]
    if kind == "rep":
        unbounded = node[3] is None or node[3] > 1
        if inside_repeat and (unbounded or node[2] != node[3]):
            return True
        return _risky(node[1], inside_repeat or unbounded)
    if kind == "alt":
        if inside_repeat:
            return True
        return any(_risky(b, inside_repeat) for b in node[1])
    if kind == "cat":
        return any(_risky(x, inside_repeat) for x in node[1])
    if kind == "group":
        return _risky(node[1], inside_repeat)
    return False


# ------------------------------------------------------------------------------ program

# opcodes
_CHAR, _SPLIT, _JMP, _SAVE, _MATCH, _ASSERT = range(6)


class _Compiler:
    def __init__(self) -> None:
        self.prog: list[list[Any]] = []

    def emit(self, *ins: Any) -> int:
        if len(self.prog) >= MAX_PROGRAM:
            raise ValueError("regular expression too large")
        self.prog.append(list(ins))
        return len(self.prog) - 1

    def gen(self, n: Node) -> None:
        kind = n[0]
        if kind == "lit":
            self.emit(_CHAR, n[1])
        elif kind == "assert":
            self.emit(_ASSERT, n[1])
        elif kind == "cat":
            for x in n[1]:
                self.gen(x)
        elif kind == "alt":
            jumps: list[int] = []
            branches = n[1]
            for b in branches[:-1]:
                split = self.emit(_SPLIT, 0, 0)
                self.prog[split][1] = len(self.prog)
                self.gen(b)
                jumps.append(self.emit(_JMP, 0))
                self.prog[split][2] = len(self.prog)
            self.gen(branches[-1])
            for j in jumps:
                self.prog[j][1] = len(self.prog)
        elif kind == "group":
            index = n[2]
            if index is not None:
                self.emit(_SAVE, 2 * index)
            self.gen(n[1])
            if index is not None:
                self.emit(_SAVE, 2 * index + 1)
        elif kind == "rep":
            self.repeat(n[1], n[2], n[3], n[4])

    def repeat(self, x: Node, lo: int, hi: int | None, lazy: bool) -> None:
        for _ in range(lo):
            self.gen(x)
        if hi is None:
            start = self.emit(_SPLIT, 0, 0)
            body = len(self.prog)
            self.gen(x)
            self.emit(_JMP, start)
            after = len(self.prog)
            self.prog[start][1:] = [after, body, after] if lazy else [body, after, after]
            return
        splits: list[int] = []
        for _ in range(hi - lo):
            split = self.emit(_SPLIT, 0, 0)
            splits.append(split)
            self.prog[split][1 if not lazy else 2] = len(self.prog)
            self.gen(x)
        end = len(self.prog)
        for split in splits:
            self.prog[split][2 if not lazy else 1] = end


@dataclass
class VMMatch:
    """The part of ``re.Match`` the shell uses."""

    spans: list[int]

    def start(self, n: int = 0) -> int:
        return self.spans[2 * n]

    def end(self, n: int = 0) -> int:
        return self.spans[2 * n + 1]

    def group(self, n: int = 0) -> str:
        return self.text[self.spans[2 * n] : self.spans[2 * n + 1]]

    def groups(self) -> tuple[str | None, ...]:
        out: list[str | None] = []
        for k in range(1, len(self.spans) // 2):
            s, e = self.spans[2 * k], self.spans[2 * k + 1]
            out.append(None if s < 0 or e < 0 else self.text[s:e])
        return tuple(out)

    text: str = ""


class PikeRegex:
    """``search``/``match``/``fullmatch`` like ``re.Pattern``, in linear time."""

    def __init__(self, tree: Node, groups: int) -> None:
        comp = _Compiler()
        comp.emit(_SAVE, 0)
        comp.gen(tree)
        comp.emit(_SAVE, 1)
        comp.emit(_MATCH)
        self.prog = comp.prog
        self.nslots = 2 * (groups + 1)

    def _add(
        self,
        lst: list[tuple[int, list[int]]],
        seen: set[int],
        start: tuple[int, list[int]],
        text: str,
        i: int,
        endpos: int,
    ) -> None:
        """Follow the epsilon moves from ``start``, adding the threads that wait for a
        character (or match) to ``lst`` in priority order."""
        prog = self.prog
        stack = [start]
        while stack:
            pc, caps = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            ins = prog[pc]
            op = ins[0]
            if op == _JMP:
                target: int = ins[1]
                if target in seen and len(prog[target]) > 3:
                    # back to a loop already entered at this position: the iteration
                    # matched empty; leave the loop with its captures (as ``re`` does)
                    stack.append((prog[target][3], caps))
                else:
                    stack.append((target, caps))
            elif op == _SPLIT:
                stack.append((ins[2], caps))
                stack.append((ins[1], caps))
            elif op == _SAVE:
                new = list(caps)
                new[ins[1]] = i
                stack.append((pc + 1, new))
            elif op == _ASSERT:
                if _assert(ins[1], text, i, endpos):
                    stack.append((pc + 1, caps))
            else:
                lst.append((pc, caps))

    def _run(self, text: str, pos: int, endpos: int, anchored: bool, full: bool) -> VMMatch | None:
        prog = self.prog
        clist: list[tuple[int, list[int]]] = []
        matched: list[int] | None = None
        add = self._add
        i = pos
        while True:
            if matched is None and (i == pos or not anchored):
                add(clist, {pc for pc, _ in clist}, (0, [-1] * self.nslots), text, i, endpos)
            if not clist:
                if anchored or matched is not None or i >= endpos:
                    break
                i += 1  # nothing alive here: try the next start position
                continue
            nlist: list[tuple[int, list[int]]] = []
            seen: set[int] = set()
            ch = text[i] if i < endpos else None
            for pc, caps in clist:
                ins = prog[pc]
                if ins[0] == _MATCH:
                    if not full or i == endpos:
                        matched = caps
                        break  # lower-priority threads are cut off
                    continue
                if ch is not None and ins[1](ch):
                    add(nlist, seen, (pc + 1, caps), text, i + 1, endpos)
            if ch is None:
                break
            clist = nlist
            i += 1
            spend(len(clist) + 1)
        if matched is None:
            return None
        return VMMatch(matched, text)

    def search(self, text: str, pos: int = 0) -> VMMatch | None:
        return self._run(text, pos, len(text), False, False)

    def match(self, text: str, pos: int = 0) -> VMMatch | None:
        return self._run(text, pos, len(text), True, False)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> VMMatch | None:
        end = len(text) if endpos is None else min(endpos, len(text))
        return self._run(text, pos, end, True, True)


def _assert(kind: str, text: str, i: int, end: int) -> bool:
    if kind in ("^", "A"):
        return i == 0
    if kind in ("$", "Z"):
        return i == end
    before = i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")
    after = i < end and (text[i].isalnum() or text[i] == "_")
    return (before != after) if kind == "b" else (before == after)


def compile_vm(source: str, flags: int = 0) -> PikeRegex:
    """Always the VM (tests compare it with ``re``); raises Unsupported."""
    parser = _Parser(source, bool(flags & re.IGNORECASE))
    return PikeRegex(parser.parse(), parser.groups)


def _unbounded(node: Node) -> int:
    """How many unbounded repetitions: ``re``'s worst case grows like n**(k+1)."""
    kind = node[0]
    if kind == "rep":
        return (node[3] is None) + _unbounded(node[1])
    if kind in ("cat", "alt"):
        return sum(_unbounded(x) for x in node[1])
    if kind == "group":
        return _unbounded(node[1])
    return 0


#: work budget for ``re`` on one call, in worst-case steps
RE_BUDGET = 10**8


class SafePattern:
    """A compiled pattern that runs on ``re`` when its worst case is cheap for the text
    at hand and on the linear VM otherwise (nested repetition, or many unbounded
    repetitions on a long text). The API is the part of ``re.Pattern`` the shell uses."""

    __slots__ = ("limit", "rx", "vm")

    def __init__(self, source: str, flags: int) -> None:
        self.rx = re.compile(source, flags)
        self.vm: PikeRegex | None = None
        self.limit = 1 << 62  # longest text for which `re` is used
        try:
            parser = _Parser(source, bool(flags & re.IGNORECASE))
            tree = parser.parse()
        except (Unsupported, IndexError, ValueError):
            return  # a construct the VM lacks (lookahead): `re` it is
        k = _unbounded(tree)
        if _risky(tree):
            self.limit = -1
        elif k:
            self.limit = int(RE_BUDGET ** (1 / (k + 1)))
        if self.limit < 1 << 62:
            try:
                self.vm = PikeRegex(tree, parser.groups)
            except ValueError:
                self.limit = 1 << 62  # too large to expand: keep `re`

    def _pick(self, size: int) -> re.Pattern[str] | PikeRegex:
        vm = self.vm
        return self.rx if vm is None or size <= self.limit else vm

    def search(self, text: str, pos: int = 0) -> re.Match[str] | VMMatch | None:
        return self._pick(len(text) - pos).search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | VMMatch | None:
        return self._pick(len(text) - pos).match(text, pos)

    def fullmatch(
        self, text: str, pos: int = 0, endpos: int | None = None
    ) -> re.Match[str] | VMMatch | None:
        end = len(text) if endpos is None else endpos
        return self._pick(end - pos).fullmatch(text, pos, end)
