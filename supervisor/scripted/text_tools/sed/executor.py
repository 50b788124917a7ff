"""Running a parsed sed script over the lines of stdin (GNU sed 4.9 semantics).

The pattern space, hold space, append queue, range states and the ``t`` flag live in
one ``_Machine``; a program counter walks the flat command list. Output keeps GNU's
handling of a last line without a newline: it stays without one unless more follows.
"""

from __future__ import annotations

import re

from ...budget import spend
from ...case_map import lower, upper
from ..common import check_size
from ..posix_regex import MatchLike, Regex
from .script import Address, Command, Replacement, SedError
from .script import Regex as SedRegex

#: Commands run per line are bounded by the input, except loops through ``b``/``t``/``D``
#: that do not consume input; this caps the jumps so a script cannot spin forever.
MAX_JUMPS = 1_000_000


class Quit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Output:
    def __init__(self, sep: str) -> None:
        self.parts: list[str] = []
        self.err: list[str] = []
        self.size = 0
        self.missing_newline = False
        self.sep = sep

    def write(self, text: str, newline: bool = True) -> None:
        if self.missing_newline:
            self.parts.append(self.sep)
            self.missing_newline = False
        self.parts.append(text)
        if newline:
            self.parts.append(self.sep)
        self.size += len(text) + 1
        check_size(self.size)

    def pattern(self, text: str, chomped: bool) -> None:
        """The pattern space, newline-terminated unless its line had none."""
        self.write(text, newline=chomped)
        if not chomped:
            self.missing_newline = True


def _escape_l(text: str, width: int) -> str:
    """The ``l`` command's unambiguous form, wrapped at ``width`` (0: no wrapping)."""
    pieces: list[str] = []
    for ch in text:
        if ch == "\\":
            pieces.append("\\\\")
        elif ch in "\a\b\f\n\r\t\v":
            pieces.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif ch.isascii() and ch.isprintable():
            pieces.append(ch)
        else:
            pieces.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogateescape"))
    lines: list[str] = []
    current = ""
    for piece in pieces:
        if width > 1 and len(current) + len(piece) > width - 1:
            lines.append(current + "\\")
            current = ""
        current += piece
    lines.append(current + "$")
    return "\n".join(lines)


class _Machine:
    def __init__(
        self, commands: list[Command], lines: list[str], last_chomped: bool, quiet: bool,
        sep: str, line_wrap: int,
    ) -> None:  # fmt: skip
        self.commands = commands
        self.lines = lines
        self.last_chomped = last_chomped
        self.quiet = quiet
        self.sep = sep
        self.line_wrap = line_wrap
        self.out = _Output(sep)
        self.next_index = 0
        self.line_number = 0
        self.pattern = ""
        self.chomped = True
        self.hold = ""
        self.append_queue: list[str] = []
        self.active = [False] * len(commands)
        self.range_end = [0] * len(commands)
        self.substituted = False
        self.last_regex: Regex | None = None
        self.jumps = 0

    # -- input
    def has_next(self) -> bool:
        return self.next_index < len(self.lines)

    def read(self) -> bool:
        if not self.has_next():
            return False
        self.pattern = self.lines[self.next_index]
        self.chomped = self.next_index < len(self.lines) - 1 or self.last_chomped
        self.next_index += 1
        self.line_number += 1
        self.substituted = False
        return True

    def is_last(self) -> bool:
        return not self.has_next()

    def flush_appends(self) -> None:
        for text in self.append_queue:
            self.out.write(text)
        self.append_queue.clear()

    # -- regexes and addresses
    def regex(self, rx: SedRegex | None) -> Regex:
        if rx is None or rx.compiled is None:
            if self.last_regex is None:
                raise SedError("no previous regular expression")
            return self.last_regex
        self.last_regex = rx.compiled
        return rx.compiled

    def match_one(self, addr: Address) -> bool:
        kind = addr.kind
        if kind == "line":
            return self.line_number == addr.number
        if kind == "last":
            return self.is_last()
        if kind == "regex":
            return self.regex(addr.regex).search(self.pattern) is not None
        if kind == "step":
            if addr.step <= 0:
                return self.line_number == addr.number
            return (
                self.line_number >= addr.number
                and (self.line_number - addr.number) % addr.step == 0
            )
        return False

    def selected(self, index: int, cmd: Command) -> bool:
        a1, a2 = cmd.addr1, cmd.addr2
        if a1 is None:
            return True
        if a2 is None:
            return self.match_one(a1)
        n = self.line_number
        if self.active[index]:
            if a2.kind in ("line", "plus", "tilde"):
                end = self.range_end[index]
                if n >= end:
                    self.active[index] = False
                return n <= end
            if self.match_one(a2):
                self.active[index] = False
            return True
        start = a1.kind == "zero" and n == 1 and not self.started_zero(index)
        if not start and not (a1.kind != "zero" and self.match_one(a1)):
            return False
        if a1.kind == "zero":
            self.mark_zero(index)
            if self.match_one(a2):
                return True
            self.active[index] = True
            return True
        if a2.kind == "line":
            if a2.number > n:
                self.active[index] = True
                self.range_end[index] = a2.number
        elif a2.kind == "plus":
            if a2.number > 0:
                self.active[index] = True
                self.range_end[index] = n + a2.number
        elif a2.kind == "tilde":
            if a2.number > 0 and n % a2.number:
                self.active[index] = True
                self.range_end[index] = n + (a2.number - n % a2.number)
        elif a2.kind == "last":
            if not self.is_last():
                self.active[index] = True
        else:
            self.active[index] = True
        return True

    def started_zero(self, index: int) -> bool:
        return self.range_end[index] == -1

    def mark_zero(self, index: int) -> None:
        self.range_end[index] = -1

    # -- substitution
    def substitute(self, cmd: Command) -> bool:
        assert cmd.replacement is not None
        rx = self.regex(cmd.regex)
        text = self.pattern
        if len(text) > 1024:  # each substitution copies the pattern space
            spend(len(text) >> 10)
        replacement = cmd.replacement
        if cmd.occurrence == 1 and isinstance(rx, re.Pattern):
            # The common cases, at C speed: the first match, or all of them when the
            # pattern cannot match empty (so re.sub's empty-match rule cannot differ).
            if not cmd.global_:
                first = rx.search(text)
                if first is None:
                    return False
                self.pattern = (
                    text[: first.start()] + _expand(replacement, first) + text[first.end() :]
                )
                check_size(len(self.pattern))
                return True
            if rx.search("") is None:
                template = replacement.template
                if template is not None:
                    result, count = rx.subn(template, text)
                else:
                    result, count = rx.subn(lambda m: _expand(replacement, m), text)
                if not count:
                    return False
                check_size(len(result))
                self.pattern = result
                return True
        out: list[str] = []
        pos = 0
        count = 0
        done = False
        prev_end = -1
        while pos <= len(text):
            spend()
            m = rx.search(text, pos)
            if m is None:
                break
            start, end = m.span()
            if start == end and start == prev_end:
                # No empty match right after the previous match (GNU).
                if start >= len(text):
                    break
                out.append(text[pos : start + 1])
                pos = start + 1
                continue
            count += 1
            if count >= cmd.occurrence:
                out.append(text[pos:start])
                out.append(_expand(cmd.replacement, m))
                done = True
            else:
                out.append(text[pos:end])
            prev_end = end
            if end == start:
                if start < len(text):
                    out.append(text[start])
                pos = start + 1
            else:
                pos = end
            if done and not cmd.global_:
                break
        if not done:
            return False
        out.append(text[pos:])
        self.pattern = "".join(out)
        check_size(len(self.pattern))
        return True

    # -- the cycle
    def jumped(self) -> None:
        spend()
        self.jumps += 1
        if self.jumps > MAX_JUMPS:
            raise SedError(f"too many jumps without reading input ({MAX_JUMPS})")

    def cycle(self) -> bool:
        """Run the script once over the pattern space; True when ``D`` asks to run it
        again without reading input."""
        commands = self.commands
        pc = 0
        while pc < len(commands):
            cmd = commands[pc]
            if self.selected(pc, cmd) == cmd.negate:
                pc = cmd.target if cmd.name == "{" else pc + 1
                continue
            result = self.execute(cmd, pc)
            if result is None:
                pc += 1
            elif result < 0:
                self.flush_appends()
                return result == -2
            else:
                if result <= pc:
                    self.jumped()
                pc = result
        if not self.quiet:
            self.out.pattern(self.pattern, self.chomped)
        self.flush_appends()
        return False

    def run(self) -> int:
        # fuel by the script's length (a cycle runs each command once; jumps spend their
        # own): for 32 cycles at once, or at each cycle of a script of 32 commands or more
        per = max(1, len(self.commands))
        mask, fuel = (31, 32 * per) if per < 32 else (0, per)
        while self.read():
            if not self.next_index & mask:
                spend(fuel)
            while self.cycle():
                self.jumped()
        return 0

    def execute(self, cmd: Command, pc: int) -> int | None:
        """Run one selected command: None to go on, an index to jump, -1/-2 to end."""
        name = cmd.name
        out = self.out
        if name == "{":
            return None
        if name == "b":
            return cmd.target
        if name == "t":
            if self.substituted:
                self.substituted = False
                return cmd.target
            return None
        if name == "T":
            if not self.substituted:
                return cmd.target
            self.substituted = False
            return None
        if name == "s":
            if self.substitute(cmd):
                self.substituted = True
                for _ in range(cmd.print_):
                    out.pattern(self.pattern, self.chomped)
                if cmd.write is not None:
                    self.write_file(cmd.write, self.pattern)
            return None
        if name == "p":
            out.pattern(self.pattern, self.chomped)
        elif name == "d":
            return -1
        elif name == "D":
            if "\n" not in self.pattern:
                return -1
            self.pattern = self.pattern.split("\n", 1)[1]
            return -2
        elif name == "n":
            if not self.has_next():
                if not self.quiet:
                    out.pattern(self.pattern, self.chomped)
                self.flush_appends()
                raise Quit(0)
            if not self.quiet:
                out.pattern(self.pattern, self.chomped)
            self.flush_appends()
            self.read()
        elif name == "N":
            if not self.has_next():
                if not self.quiet:
                    out.pattern(self.pattern, self.chomped)
                self.flush_appends()
                raise Quit(0)
            self.flush_appends()
            previous = self.pattern
            self.read()
            self.pattern = previous + "\n" + self.pattern
            check_size(len(self.pattern))
        elif name == "P":
            first, newline, _ = self.pattern.partition("\n")
            out.pattern(first, bool(newline) or self.chomped)
        elif name == "g":
            self.pattern = self.hold
        elif name == "G":
            self.pattern = self.pattern + "\n" + self.hold
            check_size(len(self.pattern))
        elif name == "h":
            self.hold = self.pattern
        elif name == "H":
            self.hold = self.hold + "\n" + self.pattern
            check_size(len(self.hold))
        elif name == "x":
            self.pattern, self.hold = self.hold, self.pattern
        elif name == "z":
            self.pattern = ""
        elif name == "=":
            out.write(str(self.line_number))
        elif name == "l":
            width = cmd.number if cmd.number is not None else self.line_wrap
            out.write(_escape_l(self.pattern, width))
        elif name == "a":
            self.append_queue.append(cmd.text)
        elif name == "i":
            out.write(cmd.text)
        elif name == "c":
            if cmd.addr2 is None or not self.active[pc] or cmd.negate:
                out.write(cmd.text)
            return -1
        elif name == "y":
            self.pattern = self.pattern.translate(cmd.translate)
        elif name in "qQ":
            if name == "q":
                if not self.quiet:
                    out.pattern(self.pattern, self.chomped)
                self.flush_appends()
            raise Quit(cmd.number or 0)
        elif name in "wW":
            text = self.pattern if name == "w" else self.pattern.split("\n", 1)[0]
            assert cmd.write is not None
            self.write_file(cmd.write, text)
        elif name == "F":
            out.write("-")
        # r, R (no readable file: nothing, as GNU for a missing file), v: nothing.
        return None

    def write_file(self, path: str, text: str) -> None:
        if path == "/dev/stdout":
            self.out.write(text)
        else:
            self.out.err.append(text + "\n")


def _expand(replacement: Replacement, m: MatchLike) -> str:
    if not replacement.has_case:
        return "".join(
            str(value) if kind == "lit" else (m.group(int(value)) or "")
            for kind, value in replacement.parts
        )
    out: list[str] = []
    mode = ""  # "L" or "U" until \E
    one = ""  # "l" or "u" for the next character
    for kind, value in replacement.parts:
        if kind == "case":
            if value in ("l", "u"):
                one = str(value)
            else:
                mode = "" if value == "E" else str(value)
                one = ""
            continue
        text = str(value) if kind == "lit" else (m.group(int(value)) or "")
        if mode == "L":
            text = lower(text)
        elif mode == "U":
            text = upper(text)
        if one and text:
            text = (lower(text[0]) if one == "l" else upper(text[0])) + text[1:]
            one = ""
        out.append(text)
    return "".join(out)


def run_script(
    commands: list[Command], text: str, quiet: bool, sep: str, line_wrap: int
) -> tuple[str, str, int]:
    lines = text.split(sep) if text else []
    last_chomped = True
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        last_chomped = False
    machine = _Machine(commands, lines, last_chomped, quiet, sep, line_wrap)
    try:
        status = machine.run()
    except Quit as q:
        status = q.status
    return "".join(machine.out.parts), "".join(machine.out.err), status
