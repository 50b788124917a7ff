"""``wc`` (GNU coreutils): line, word, character, byte and longest-line counts of stdin.

Column alignment follows GNU for a pipe: one count prints bare, several are each
right-aligned in 7 columns (the width GNU uses when the input size is unknown).
"""

from __future__ import annotations

import re
import unicodedata

from supervisor.scripted.contract import CommandResult

from .common import Opt, OptionSpec, UsageError, reject_files, to_bytes, usage_result

_SPEC = OptionSpec(
    [
        Opt("l", "l", "lines"),
        Opt("w", "w", "words"),
        Opt("m", "m", "chars"),
        Opt("c", "c", "bytes"),
        Opt("L", "L", "max-line-length"),
        Opt("total", "", "total", arg=True),
    ]
)

# GNU counts a word between white space; the ASCII separators U+001C..U+001F are not.
_SPACE_RUN = re.compile(r"[^\S\x1c-\x1f]+")


def _words(text: str) -> int:
    return sum(1 for part in _SPACE_RUN.split(text) if part)


def _width(line: str) -> int:
    """Display width as GNU ``wc -L`` measures it: tabs to the next multiple of 8,
    wide characters 2, combining and control characters 0, ``\\r`` back to column 0."""
    if line.isascii() and line.isprintable():
        return len(line)
    col = best = 0
    for ch in line:
        if ch == "\t":
            col += 8 - col % 8
        elif ch in "\r\f":
            col = 0
        elif ch == "\v":
            pass
        elif unicodedata.combining(ch) or not ch.isprintable():
            continue
        elif unicodedata.east_asian_width(ch) in "WF":
            col += 2
        else:
            col += 1
        best = max(best, col)
    return max(best, col)


def wc(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
    except UsageError as err:
        return usage_result("wc", err)
    rejected = reject_files("wc", operands)
    if rejected is not None:
        return rejected
    wanted = {key for key, _ in opts if key != "total"}
    if not wanted:
        wanted = {"l", "w", "c"}
    text = stdin or ""
    counts: list[int] = []
    if "l" in wanted:
        counts.append(text.count("\n"))
    if "w" in wanted:
        counts.append(_words(text))
    if "m" in wanted:
        counts.append(len(text))
    if "c" in wanted:
        counts.append(len(to_bytes(text)) if not text.isascii() else len(text))
    if "L" in wanted:
        counts.append(max((_width(line) for line in text.split("\n")), default=0))
    name = " -" if "-" in operands else ""
    # One count prints bare; several each take 7 columns (GNU's width for a pipe).
    line = f"{counts[0]}" if len(counts) == 1 else " ".join(f"{c:7d}" for c in counts)
    return CommandResult(line + name + "\n", "", 0)
