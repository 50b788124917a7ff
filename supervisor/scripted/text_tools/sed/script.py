"""sed scripts parsed into a flat list of commands (GNU sed 4.9 syntax).

Blocks become jumps: ``{`` remembers the index after its ``}``, so the executor walks
one list with a program counter; ``b``/``t``/``T`` targets are resolved to indexes here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...budget import spend
from ...integers import clamped_count
from ..common import FS_DISABLED
from ..posix_regex import Regex as CompiledRegex
from ..posix_regex import RegexError, compile_posix, numeric_escape


class SedError(Exception):
    """A script error: GNU's message and exit status (1; 4 for files)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(slots=True)
class Regex:
    """A pattern as written (None: the empty regex, meaning the last one used)."""

    source: str | None
    icase: bool = False
    multiline: bool = False
    compiled: CompiledRegex | None = None


@dataclass(slots=True)
class Address:
    kind: str  # "line" "last" "regex" "step" "zero" "plus" "tilde"
    number: int = 0
    step: int = 0
    regex: Regex | None = None


@dataclass(slots=True)
class Replacement:
    """A parsed ``s`` replacement: literal text, group references and case marks."""

    parts: list[tuple[str, str | int]]  # ("lit", text) ("grp", n) ("case", "L|U|l|u|E")
    has_case: bool
    #: The same as an ``re.sub`` template (None with case conversions), so that
    #: ``re`` expands it in C.
    template: str | None = None


@dataclass(slots=True)
class Command:
    name: str
    addr1: Address | None = None
    addr2: Address | None = None
    negate: bool = False
    text: str = ""
    label: str = ""
    target: int = -1
    regex: Regex | None = None
    replacement: Replacement | None = None
    global_: bool = False
    occurrence: int = 1
    print_: int = 0
    write: str | None = None
    number: int | None = None
    translate: dict[int, str] = field(default_factory=dict)


_COMMAND_CHARS = set("{}=aiccbtTdDgGhHlnNpPqQrRswWxyz#:eFv")


class _Parser:
    def __init__(self, script: str, ere: bool) -> None:
        self.s = script
        self.i = 0
        self.ere = ere
        self.commands: list[Command] = []
        self.blocks: list[int] = []
        self.labels: dict[str, int] = {}

    # -- errors and low-level scanning
    def fail(self, message: str) -> SedError:
        return SedError(f"-e expression #1, char {self.i}: {message}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def skip_spaces(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def skip_blanks(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t\n;":
            self.i += 1

    def end_of_command(self) -> None:
        """After a command: spaces, then ``;``, newline, ``}``, ``#`` or the end."""
        self.skip_spaces()
        c = self.peek()
        if c in ("", "\n", ";"):
            if c:
                self.i += 1
            return
        if c in "}#":
            return
        raise self.fail("extra characters after command")

    # -- pieces
    def delimited(self, delim: str, *, regex: bool) -> str:
        """Text up to an unescaped ``delim``; ``\\delim`` stands for the delimiter. In a
        regex, a bracket expression is taken whole, as GNU does: the delimiter does not
        end it and a backslash there is itself (``[\\/&]`` holds ``\\``, ``/`` and ``&``)."""
        out: list[str] = []
        s = self.s
        while True:
            if self.i >= len(s):
                raise SedError("")
            c = s[self.i]
            if c == "[" and regex:
                end = _bracket_end(s, self.i)
                if end > 0:
                    out.append(s[self.i : end])
                    self.i = end
                    continue
            if c == "\\" and self.i + 1 < len(s):
                nxt = s[self.i + 1]
                self.i += 2
                if nxt == delim:
                    # GNU: an escaped delimiter is the plain character (even ".").
                    out.append(delim)
                elif nxt == "\n":
                    out.append("\\n" if regex else "\n")
                else:
                    out.append("\\" + nxt)
                continue
            if c == "\n" and regex:
                raise SedError("")
            self.i += 1
            if c == delim:
                return "".join(out)
            out.append(c)

    def regex(self, delim: str, what: str) -> Regex:
        try:
            source = self.delimited(delim, regex=True)
        except SedError:
            raise self.fail(f"unterminated {what}") from None
        return Regex(source if source else None)

    def label_text(self) -> str:
        self.skip_spaces()
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in "\n;":
            self.i += 1
        return self.s[start : self.i].strip()

    def filename(self) -> str:
        self.skip_spaces()
        start = self.i
        while self.i < len(self.s) and self.s[self.i] != "\n":
            self.i += 1
        return self.s[start : self.i]

    def number(self) -> int:
        start = self.i
        while self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1
        digits = self.s[start : self.i]
        return clamped_count(digits) if digits.isascii() else int(digits)

    def address(self) -> Address | None:
        c = self.peek()
        if c.isdigit():
            n = self.number()
            if self.peek() == "~":
                self.i += 1
                step = self.number() if self.peek().isdigit() else 0
                return Address("step", number=n, step=step)
            return Address("zero" if n == 0 else "line", number=n)
        if c == "$":
            self.i += 1
            return Address("last")
        if c == "/" or c == "\\":
            if c == "\\":
                self.i += 1
                delim = self.peek()
                if not delim or delim == "\n":
                    raise self.fail("unexpected `,'")
            else:
                delim = "/"
            self.i += 1
            rx = self.regex(delim, "address regex")
            while self.peek() in ("I", "M"):
                if self.peek() == "I":
                    rx.icase = True
                else:
                    rx.multiline = True
                self.i += 1
            return Address("regex", regex=rx)
        return None

    def address2(self) -> Address:
        self.skip_spaces()
        c = self.peek()
        if c == "+" or c == "~":
            self.i += 1
            if not self.peek().isdigit():
                raise self.fail("expected newer version of sed")
            return Address("plus" if c == "+" else "tilde", number=self.number())
        addr = self.address()
        if addr is None:
            raise self.fail("unexpected `,'")
        if addr.kind == "zero":
            raise self.fail("invalid usage of line address 0")
        if addr.kind == "step":
            addr = Address("line", number=addr.number)
        return addr

    def text_argument(self) -> str:
        """``a``/``i``/``c`` text: GNU's one-line form or the classic ``a\\`` lines."""
        s = self.s
        self.skip_spaces()
        if self.peek() == "\\":
            self.i += 1
            if self.peek() == "\n":
                self.i += 1
        elif self.i >= len(s) or self.peek() == "\n":
            raise self.fail("expected \\ after `a', `c' or `i'")
        out: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if self.i + 1 < len(s):
                    nxt = s[self.i + 1]
                    out.append(_ESCAPES.get(nxt, nxt))
                    self.i += 2
                    continue
                self.i += 1
                continue
            if c == "\n":
                self.i += 1
                break
            out.append(c)
            self.i += 1
        return "".join(out)

    # -- the script
    def parse(self) -> list[Command]:
        s = self.s
        while True:
            self.skip_blanks()
            if self.i >= len(s):
                break
            if s[self.i] == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
                continue
            spend()  # a script of megabytes parses under the deadline
            cmd = Command("")
            cmd.addr1 = self.address()
            if cmd.addr1 is not None:
                self.skip_spaces()
                if self.peek() == ",":
                    self.i += 1
                    cmd.addr2 = self.address2()
                elif cmd.addr1.kind == "zero":
                    raise self.fail("invalid usage of line address 0")
            if (
                cmd.addr1 is not None
                and cmd.addr1.kind == "zero"
                and (cmd.addr2 is None or cmd.addr2.kind != "regex")
            ):
                raise self.fail("invalid usage of line address 0")
            self.skip_spaces()
            while self.peek() == "!":
                cmd.negate = True
                self.i += 1
                self.skip_spaces()
            if self.i >= len(s):
                raise self.fail("missing command")
            name = s[self.i]
            self.i += 1
            cmd.name = name
            self.command(cmd)
        if self.blocks:
            self.i = len(s)
            raise self.fail("unmatched `{'")
        for index, cmd in enumerate(self.commands):
            if cmd.name in "btT":
                if not cmd.label:
                    cmd.target = len(self.commands)
                elif cmd.label in self.labels:
                    cmd.target = self.labels[cmd.label]
                else:
                    raise SedError(f"can't find label for jump to `{cmd.label}'", status=4)
            del index
        return self.commands

    def command(self, cmd: Command) -> None:
        name = cmd.name
        no_address = name in ":}#"
        if no_address and cmd.addr1 is not None:
            raise self.fail(": doesn't want any addresses" if name == ":" else "unexpected `}'")
        if name == "{":
            self.blocks.append(len(self.commands))
            self.commands.append(cmd)
            return
        if name == "}":
            if not self.blocks:
                raise self.fail("unexpected `}'")
            opener = self.blocks.pop()
            self.commands[opener].target = len(self.commands)
            self.end_of_command()
            return
        if name == ":":
            label = self.label_text()
            if not label:
                raise self.fail('":" lacks a label')
            self.labels[label] = len(self.commands)
            if self.peek() == ";":
                self.i += 1
            return
        if name in "aic":
            cmd.text = self.text_argument()
        elif name in "btT":
            cmd.label = self.label_text()
            if self.peek() == ";":
                self.i += 1
        elif name in "rRwW":
            path = self.filename()
            if name in "wW":
                cmd.write = _writable(path)
            cmd.text = path
        elif name in "qQlL":
            self.skip_spaces()
            if self.peek().isdigit():
                cmd.number = self.number()
            self.end_of_command()
        elif name == "s":
            self.substitute(cmd)
        elif name == "y":
            self.transliterate(cmd)
        elif name == "e":
            raise self.fail("e/r/w commands disabled in sandbox mode")
        elif name in "=dDgGhHnNpPxzFv":
            self.end_of_command()
        else:
            raise self.fail(f"unknown command: `{name}'")
        self.commands.append(cmd)

    def substitute(self, cmd: Command) -> None:
        delim = self.peek()
        if not delim or delim in "\n\\":
            raise self.fail("unterminated `s' command")
        self.i += 1
        cmd.regex = self.regex(delim, "`s' command")
        try:
            raw = self.delimited(delim, regex=False)
        except SedError:
            raise self.fail("unterminated `s' command") from None
        cmd.replacement = parse_replacement(raw)
        while True:
            c = self.peek()
            if not c:
                break
            if c == "g":
                cmd.global_ = True
            elif c == "p":
                cmd.print_ += 1
            elif c in "iI":
                cmd.regex.icase = True
            elif c in "mM":
                cmd.regex.multiline = True
            elif c.isdigit():
                n = self.number()
                if n == 0:
                    raise self.fail("number option to `s' command may not be zero")
                cmd.occurrence = n
                continue
            elif c == "e":
                raise self.fail("e/r/w commands disabled in sandbox mode")
            elif c == "w":
                self.i += 1
                cmd.write = _writable(self.filename())
                break
            else:
                break
            self.i += 1
        self.end_of_command()

    def transliterate(self, cmd: Command) -> None:
        delim = self.peek()
        if not delim or delim in "\n\\":
            raise self.fail("unterminated `y' command")
        self.i += 1
        try:
            src = _unescape_y(self.delimited(delim, regex=False))
            dst = _unescape_y(self.delimited(delim, regex=False))
        except SedError:
            raise self.fail("unterminated `y' command") from None
        if len(src) != len(dst):
            raise self.fail("strings for `y' command are different lengths")
        cmd.translate = {ord(a): b for a, b in zip(src, dst, strict=True)}
        self.end_of_command()


def _writable(path: str) -> str:
    if path in ("/dev/stdout", "/dev/stderr"):
        return path
    raise SedError(f"couldn't open file {path}: {FS_DISABLED}", status=4)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}


def _unescape_y(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_replacement(raw: str) -> Replacement:
    parts: list[tuple[str, str | int]] = []
    literal: list[str] = []
    has_case = False

    def flush() -> None:
        if literal:
            parts.append(("lit", "".join(literal)))
            literal.clear()

    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "&":
            flush()
            parts.append(("grp", 0))
            i += 1
            continue
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            i += 2
            if nxt.isdigit():
                flush()
                parts.append(("grp", int(nxt)))
            elif nxt in "LUluE":
                flush()
                parts.append(("case", nxt))
                has_case = True
            elif nxt in _ESCAPES:
                literal.append(_ESCAPES[nxt])
            elif nxt in "cdox" and (code := numeric_escape(raw, i - 1)):
                literal.append(code[0])
                i = code[1]
            else:
                literal.append(nxt)
            continue
        literal.append(c)
        i += 1
    flush()
    template = None
    if not has_case:
        template = "".join(
            str(value).replace("\\", "\\\\") if kind == "lit" else f"\\g<{value}>"
            for kind, value in parts
        )
    return Replacement(parts, has_case, template)


def parse_script(script: str, ere: bool) -> list[Command]:
    commands = _Parser(script, ere).parse()
    for cmd in commands:
        for rx in (cmd.regex, cmd.addr1.regex if cmd.addr1 else None,
                   cmd.addr2.regex if cmd.addr2 else None):  # fmt: skip
            if rx is not None and rx.source is not None:
                try:
                    rx.compiled = compile_posix(
                        rx.source, ere=ere, icase=rx.icase, dialect="sed", multiline=rx.multiline
                    )
                except RegexError as exc:
                    raise SedError(f"-e expression #1, char 0: {exc}") from None
    return commands


def _bracket_end(s: str, i: int) -> int:
    """The index after the bracket expression opening at ``s[i]``, or -1 if it does not
    close on this line."""
    j = i + 1
    if s.startswith("^", j):
        j += 1
    if s.startswith("]", j):
        j += 1
    while j < len(s):
        c = s[j]
        if c == "\n":
            return -1
        if c == "[" and s[j + 1 : j + 2] in (":", "=", "."):
            close = s.find(s[j + 1] + "]", j + 2)
            if close < 0:
                return -1
            j = close + 2
            continue
        if c == "]":
            return j + 1
        j += 1
    return -1
