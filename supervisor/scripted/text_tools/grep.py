"""``grep`` (GNU grep 3.8) over stdin: BRE, ERE, fixed strings and Perl-style patterns.

Patterns are translated to Python ``re`` (``posix_regex``); ``-P`` patterns go to ``re``
as they are. Output prefixes, context groups (``--``), ``-o``, ``-c``, ``-l``/``-L``,
``-m`` and the exit statuses (0 selected, 1 none, 2 trouble) follow GNU grep.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import regex as perl_syntax

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import clamped_count
from .common import (
    FS_DISABLED,
    Opt,
    OptionSpec,
    UsageError,
    check_size,
    split_lines,
    to_bytes,
    usage_result,
)
from .posix_regex import MatchLike, Regex, RegexError, compile_source, translate

_SPEC = OptionSpec(
    [
        Opt("E", "E", "extended-regexp"),
        Opt("F", "F", "fixed-strings"),
        Opt("G", "G", "basic-regexp"),
        Opt("P", "P", "perl-regexp"),
        Opt("e", "e", "regexp", arg=True),
        Opt("f", "f", "file", arg=True),
        Opt("i", "i", "ignore-case"),
        Opt("i", "y"),
        Opt("no-i", "", "no-ignore-case"),
        Opt("w", "w", "word-regexp"),
        Opt("x", "x", "line-regexp"),
        Opt("z", "z", "null-data"),
        Opt("s", "s", "no-messages"),
        Opt("v", "v", "invert-match"),
        Opt("V", "V", "version"),
        Opt("m", "m", "max-count", arg=True),
        Opt("b", "b", "byte-offset"),
        Opt("n", "n", "line-number"),
        Opt("line-buffered", "", "line-buffered"),
        Opt("H", "H", "with-filename"),
        Opt("h", "h", "no-filename"),
        Opt("label", "", "label", arg=True),
        Opt("o", "o", "only-matching"),
        Opt("q", "q", "quiet"),
        Opt("q", "", "silent"),
        Opt("binary-files", "", "binary-files", arg=True),
        Opt("a", "a", "text"),
        Opt("I", "I"),
        Opt("d", "d", "directories", arg=True),
        Opt("D", "D", "devices", arg=True),
        Opt("r", "r", "recursive"),
        Opt("r", "R", "dereference-recursive"),
        Opt("include", "", "include", arg=True),
        Opt("exclude", "", "exclude", arg=True),
        Opt("exclude", "", "exclude-from", arg=True),
        Opt("exclude", "", "exclude-dir", arg=True),
        Opt("L", "L", "files-without-match"),
        Opt("l", "l", "files-with-matches"),
        Opt("c", "c", "count"),
        Opt("T", "T", "initial-tab"),
        Opt("Z", "Z", "null"),
        Opt("B", "B", "before-context", arg=True),
        Opt("A", "A", "after-context", arg=True),
        Opt("C", "C", "context", arg=True),
        Opt("color", "", "color", arg=True, optional=True),
        Opt("color", "", "colour", arg=True, optional=True),
        Opt("U", "U", "binary"),
    ]
)


@dataclass(slots=True)
class _Settings:
    syntax: str = "G"
    patterns: list[str] = field(default_factory=list)
    icase: bool = False
    word: bool = False
    line: bool = False
    invert: bool = False
    max_count: int | None = None
    byte_offset: bool = False
    line_number: bool = False
    with_filename: bool = False
    label: str = "(standard input)"
    only: bool = False
    quiet: bool = False
    files_with: bool = False
    files_without: bool = False
    count: bool = False
    before: int = 0
    after: int = 0
    initial_tab: bool = False
    null_after_name: bool = False
    null_data: bool = False
    text: bool = False
    no_messages: bool = False


def _context_number(value: str) -> int:
    if not (value.isdigit() and value.isascii()):
        raise UsageError(f"{value}: invalid context length argument", status=2, hint=False)
    return clamped_count(value)


def _settings(args: list[str]) -> tuple[_Settings, list[str]]:
    argv = []
    for arg in args:
        # ``-5`` is ``-C 5``.
        m = re.fullmatch(r"-(\d+)", arg)
        argv.append(f"-C{m.group(1)}" if m else arg)
    opts, operands = _SPEC.parse(argv)
    s = _Settings()
    pattern_given = False
    for key, value in opts:
        if key in "EFGP" and len(key) == 1:
            s.syntax = key
        elif key == "e":
            s.patterns.extend(value.split("\n"))
            pattern_given = True
        elif key == "f":
            raise UsageError(f"{value}: {FS_DISABLED}", status=2, hint=False)
        elif key == "i":
            s.icase = True
        elif key == "no-i":
            s.icase = False
        elif key == "w":
            s.word = True
        elif key == "x":
            s.line = True
        elif key == "v":
            s.invert = True
        elif key == "m":
            count = value.strip()
            if not (count.lstrip("-").isdigit() and count.isascii()):
                raise UsageError("invalid max count", status=2, hint=False)
            s.max_count = -1 if count.startswith("-") else clamped_count(count)
        elif key == "b":
            s.byte_offset = True
        elif key == "n":
            s.line_number = True
        elif key == "H":
            s.with_filename = True
        elif key == "h":
            s.with_filename = False
        elif key == "label":
            s.label = value
        elif key == "o":
            s.only = True
        elif key == "q":
            s.quiet = True
        elif key == "l":
            s.files_with, s.files_without = True, False
        elif key == "L":
            s.files_without, s.files_with = True, False
        elif key == "c":
            s.count = True
        elif key == "A":
            s.after = _context_number(value)
        elif key == "B":
            s.before = _context_number(value)
        elif key == "C":
            s.after = s.before = _context_number(value)
        elif key == "T":
            s.initial_tab = True
        elif key == "Z":
            s.null_after_name = True
        elif key == "z":
            s.null_data = True
        elif key == "a":
            s.text = True
        elif key == "s":
            s.no_messages = True
        elif key == "r":
            raise UsageError(f"-r: {FS_DISABLED}", status=2, hint=False)
        elif key == "V":
            raise _Version
    if not pattern_given:
        if not operands:
            raise UsageError("Usage: grep [OPTION]... PATTERNS [FILE]...", status=2, hint=True)
        s.patterns.extend(operands[0].split("\n"))
        operands = operands[1:]
    return s, operands


class _Version(Exception):
    pass


def _compile(s: _Settings) -> Callable[[str, int], MatchLike | None]:
    """A search function ``(line, pos) -> match`` for all the patterns together."""
    sources: list[str] = []
    for pattern in s.patterns:
        if s.syntax == "F":
            source = re.escape(pattern)
        elif s.syntax == "P":
            try:  # the regex module reads Perl's \K, possessive quantifiers, atomic groups
                perl_syntax.compile(pattern)
            except perl_syntax.error as exc:
                raise RegexError(str(exc)) from None
            source = pattern
        else:
            source = translate(pattern, ere=s.syntax == "E", dialect="grep")
        if s.word:
            source = rf"(?<!\w)(?:{source})(?!\w)"
        sources.append(source)
    if s.line:
        sources = [rf"(?:{src})\Z" for src in sources]
    longest = s.syntax != "P"  # POSIX's leftmost-longest; Perl's leftmost-first
    # Patterns with back-references keep their own group numbers: search each.
    if len(sources) == 1 or not any(re.search(r"\\\d|\(\?P=", src) for src in sources):
        combined = sources[0] if len(sources) == 1 else "|".join(f"(?:{x})" for x in sources)
        regex = compile_source(combined, icase=s.icase, longest=longest)
        if s.line:
            return lambda text, pos: regex.match(text, pos)
        return regex.search
    regexes: list[Regex] = [compile_source(src, icase=s.icase, longest=longest) for src in sources]

    def search(text: str, pos: int) -> MatchLike | None:
        best: MatchLike | None = None
        for rx in regexes:
            m = rx.match(text, pos) if s.line else rx.search(text, pos)
            if m is not None and (
                best is None
                or m.start() < best.start()
                or (m.start() == best.start() and m.end() > best.end())
            ):
                best = m
        return best

    return search


def grep(args: list[str], stdin: str | None) -> CommandResult:
    try:
        s, operands = _settings(args)
        search = _compile(s)
    except _Version:
        return CommandResult("grep (GNU grep) 3.8 (sandvisor)\n", "", 0)
    except UsageError as err:
        return usage_result("grep", err, status=2)
    except RegexError as exc:
        return CommandResult("", f"grep: {exc}\n", 2)
    files = [f for f in operands if f != "-"]
    problems = ""
    if files:
        problems = "" if s.no_messages else "".join(f"grep: {f}: {FS_DISABLED}\n" for f in files)
        if "-" not in operands:
            return CommandResult("", problems, 2)
    if len(operands) > 1:
        s.with_filename = True
    result = _run(s, search, stdin or "")
    if files:
        result.stderr = problems + result.stderr
        if not (s.quiet and result.exit_code == 0):
            result.exit_code = 2
    return result


def _run(s: _Settings, search: Callable[[str, int], MatchLike | None], text: str) -> CommandResult:
    sep = "\0" if s.null_data else "\n"
    lines, _ = split_lines(text, sep)
    binary = not s.text and not s.null_data and "\0" in text
    selected_total = 0
    out: list[str] = []
    size = 0
    last_printed = -1
    pending_after = 0
    offsets: list[int] | None = None
    if s.byte_offset:
        offsets = []
        pos = 0
        for line in lines:
            offsets.append(pos)
            pos += len(to_bytes(line)) + 1
    name = s.label
    context = bool(s.before or s.after) and not (
        s.count or s.files_with or s.files_without or s.quiet or binary or s.only
    )

    def prefix(index: int, mark: str, offset: int | None = None) -> str:
        parts = []
        if s.with_filename:
            parts.append(name + ("\0" if s.null_after_name else mark))
        if s.line_number:
            parts.append(f"{index + 1}{mark}")
        if offsets is not None:
            parts.append(f"{offsets[index] if offset is None else offset}{mark}")
        text = "".join(parts)
        if s.initial_tab and text:
            text += "\t"
        return text

    def emit(piece: str) -> None:
        nonlocal size
        size += len(piece)
        check_size(size)
        out.append(piece)

    # fuel for 256 lines at once (one call, not one a line), by their mean length
    block_fuel = 256 * (1 + len(text) // (32 * max(len(lines), 1)))
    for index, line in enumerate(lines):
        if not index & 255:
            spend(block_fuel)
        if s.max_count is not None and selected_total >= s.max_count:
            if context and pending_after > 0:
                # GNU prints the trailing context of the last selected line.
                emit(prefix(index, "-") + line + sep)
                last_printed = index
                pending_after -= 1
                continue
            break
        matched = search(line, 0) is not None
        if matched == s.invert:
            if context and pending_after > 0:
                emit(prefix(index, "-") + line + sep)
                last_printed = index
                pending_after -= 1
            continue
        selected_total += 1
        if s.quiet:
            return CommandResult("", "", 0)
        if s.count or s.files_with or s.files_without or binary:
            continue
        if context:
            start = max(index - s.before, last_printed + 1)
            if last_printed >= 0 and start > last_printed + 1:
                emit("--\n")
            for j in range(start, index):
                emit(prefix(j, "-") + lines[j] + sep)
            pending_after = s.after
            last_printed = index
        if s.only:
            if s.invert:
                continue
            pos = 0
            while pos <= len(line):
                spend()
                m = search(line, pos)
                if m is None:
                    break
                if m.end() == m.start():
                    pos = m.end() + 1
                    continue
                offset = None
                if offsets is not None:
                    offset = offsets[index] + len(to_bytes(line[: m.start()]))
                emit(prefix(index, ":", offset) + m.group(0) + sep)
                pos = m.end()
            continue
        emit(prefix(index, ":") + line + sep)
    status = 0 if selected_total else 1
    if s.count:
        label = prefix_name(s, name)
        return CommandResult(f"{label}{selected_total}\n", "", status)
    end = "\0" if s.null_after_name else "\n"
    if s.files_with:
        return CommandResult(name + end if selected_total else "", "", status)
    if s.files_without:
        return CommandResult("" if selected_total else name + end, "", status)
    if binary and selected_total:
        return CommandResult("", f"grep: {name}: binary file matches\n", 0)
    return CommandResult("".join(out), "", status)


def prefix_name(s: _Settings, name: str) -> str:
    if not s.with_filename:
        return ""
    return name + ("\0" if s.null_after_name else ":")
