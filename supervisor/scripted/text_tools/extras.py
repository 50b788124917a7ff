"""The cheap extras: ``cat``, ``tee``, ``tac``, ``rev``, ``nl``, ``paste`` and ``fold``
(stdin only)."""

from __future__ import annotations

import re

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import clamped_count, decimal64
from .common import (
    Opt,
    OptionSpec,
    UsageError,
    check_size,
    from_bytes,
    reject_files,
    split_lines,
    to_bytes,
    usage_result,
)
from .posix_regex import RegexError, compile_posix, finditer

_CAT = OptionSpec(
    [
        Opt("A", "A", "show-all"),
        Opt("b", "b", "number-nonblank"),
        Opt("e", "e"),
        Opt("E", "E", "show-ends"),
        Opt("n", "n", "number"),
        Opt("s", "s", "squeeze-blank"),
        Opt("t", "t"),
        Opt("T", "T", "show-tabs"),
        Opt("u", "u"),
        Opt("v", "v", "show-nonprinting"),
    ]
)
_CAT_IMPLIES = {"A": "vET", "e": "vE", "t": "vT"}


def cat(args: list[str], stdin: str | None) -> CommandResult:
    """GNU cat on standard input (no operand, or ``-``); a file operand is refused like
    every file access, and cat goes on with the next operand, as GNU's does."""
    try:
        opts, operands = _CAT.parse(args)
    except UsageError as err:
        return usage_result("cat", err)
    flags = "".join(_CAT_IMPLIES.get(k, k) for k, _ in opts)
    out: list[str] = []
    errors: list[str] = []
    pending = stdin or ""
    for operand in operands or ["-"]:
        if operand != "-":
            rejected = reject_files("cat", [operand])
            assert rejected is not None
            errors.append(rejected.stderr)
            continue
        out.append(_cat_text(pending, flags) if flags.replace("u", "") else pending)
        pending = ""  # stdin is read once
    return CommandResult("".join(out), "".join(errors), 1 if errors else 0)


_TEE = OptionSpec(
    [
        Opt("a", "a", "append"),
        Opt("i", "i", "ignore-interrupts"),
        Opt("p", "p"),
        Opt("output-error", "", "output-error", arg=True, optional=True),
    ]
)


def tee(args: list[str], stdin: str | None) -> CommandResult:
    """GNU tee: standard input to standard output; a file operand is refused like every
    file access (``/dev/null`` takes the copy and says nothing), and the copy still goes
    to standard output, exit 1."""
    try:
        _opts, operands = _TEE.parse(args)
    except UsageError as err:
        return usage_result("tee", err)
    files = [f for f in operands if f != "/dev/null"]
    rejected = reject_files("tee", files) if files else None
    if rejected is None:
        return CommandResult(stdin or "", "", 0)
    return CommandResult(stdin or "", rejected.stderr, 1)


def _cat_text(text: str, flags: str) -> str:
    lines = text.split("\n")
    last_open = lines[-1] != ""
    if not last_open:
        lines.pop()
    out: list[str] = []
    number = 0
    blank_run = False
    for k, line in enumerate(lines):
        blank = line == ""
        if "s" in flags and blank and blank_run:
            continue
        blank_run = blank
        if "v" in flags:
            line = _nonprinting(line, "T" in flags)
        elif "T" in flags:
            line = line.replace("\t", "^I")
        if ("b" in flags and not blank) or ("n" in flags and "b" not in flags):
            number += 1
            line = f"{number:6d}\t{line}"
        end = "" if k == len(lines) - 1 and last_open else ("$" if "E" in flags else "") + "\n"
        out.append(line + end)
    return "".join(out)


def _nonprinting(line: str, tabs: bool) -> str:
    """``cat -v``: control bytes as ``^X``, DEL as ``^?``, high bytes as ``M-``."""
    out: list[str] = []
    for b in to_bytes(line):
        if b >= 128:
            out.append("M-")
            b -= 128
        if b == 9 and not tabs:
            out.append("\t")
        elif b < 32:
            out.append("^" + chr(b + 64))
        elif b == 127:
            out.append("^?")
        else:
            out.append(chr(b))
    return "".join(out)


_TAC = OptionSpec(
    [
        Opt("b", "b", "before"),
        Opt("r", "r", "regex"),
        Opt("s", "s", "separator", arg=True),
    ]
)


def tac(args: list[str], stdin: str | None) -> CommandResult:
    """Records in reverse order; each keeps its separator, as GNU's (so an unterminated
    last record runs into the next one)."""
    try:
        opts, operands = _TAC.parse(args)
    except UsageError as err:
        return usage_result("tac", err)
    rejected = reject_files("tac", operands)
    if rejected is not None:
        return rejected
    before = any(k == "b" for k, _ in opts)
    regex = any(k == "r" for k, _ in opts)
    sep = next((v for k, v in reversed(opts) if k == "s"), "\n")
    text = stdin or ""
    if not text:
        return CommandResult("", "", 0)
    if regex:
        try:
            pattern = compile_posix(sep, ere=False, dialect="grep")
        except RegexError as exc:
            return CommandResult("", f"tac: {exc}\n", 1)
        bounds = [(m.start(), m.end()) for m in finditer(pattern, text) if m.end() > m.start()]
    elif sep == "":
        return CommandResult("", "tac: separator cannot be empty\n", 1)
    else:
        bounds = [(m.start(), m.end()) for m in re.finditer(re.escape(sep), text)]
    records: list[str] = []
    pos = 0
    for start, end in bounds:
        if before:
            records.append(text[pos:start])
            pos = start
        else:
            records.append(text[pos:end])
            pos = end
    if pos < len(text):
        records.append(text[pos:])
    if before and records and records[0] == "":
        records.pop(0)
    return CommandResult("".join(reversed(records)), "", 0)


def rev(args: list[str], stdin: str | None) -> CommandResult:
    """Each line's characters reversed (util-linux ``rev``: multi-byte aware)."""
    operands = [a for a in args if not a.startswith("-") or a == "-"]
    rejected = reject_files("rev", operands)
    if rejected is not None:
        return rejected
    lines, terminated = split_lines(stdin)
    out = "\n".join(line[::-1] for line in lines)
    if lines and terminated:
        out += "\n"
    return CommandResult(out, "", 0)


_NL = OptionSpec(
    [
        Opt("b", "b", "body-numbering", arg=True),
        Opt("d", "d", "section-delimiter", arg=True),
        Opt("f", "f", "footer-numbering", arg=True),
        Opt("h", "h", "header-numbering", arg=True),
        Opt("i", "i", "line-increment", arg=True),
        Opt("l", "l", "join-blank-lines", arg=True),
        Opt("n", "n", "number-format", arg=True),
        Opt("p", "p", "no-renumber"),
        Opt("s", "s", "number-separator", arg=True),
        Opt("v", "v", "starting-line-number", arg=True),
        Opt("w", "w", "number-width", arg=True),
    ]
)


def _int(value: str, what: str) -> int:
    if re.fullmatch(r"[+-]?\d+", value.strip()) is None:
        raise UsageError(f"invalid {what}: ‘{value}’")
    number = decimal64(value)
    if number is None:
        raise UsageError(f"invalid {what}: ‘{value}’: Value too large for defined data type")
    return number


def nl(args: list[str], stdin: str | None) -> CommandResult:
    """Number the lines (body section only; logical-page delimiters are text)."""
    try:
        opts, operands = _NL.parse(args)
        style = "t"
        fmt = "rn"
        width = 6
        sep = "\t"
        number = 1
        incr = 1
        for key, value in opts:
            if key == "b":
                if value not in ("a", "t", "n") and not value.startswith("p"):
                    raise UsageError(f"invalid body numbering style: ‘{value}’")
                style = value
            elif key == "n":
                if value not in ("ln", "rn", "rz"):
                    raise UsageError(f"invalid line numbering format: ‘{value}’")
                fmt = value
            elif key == "w":
                width = _int(value, "line number field width")
                if width < 1:
                    raise UsageError(f"invalid line number field width: ‘{value}’")
            elif key == "s":
                sep = value
            elif key == "v":
                number = _int(value, "starting line number")
            elif key == "i":
                incr = _int(value, "line number increment")
        pattern = None
        if style.startswith("p"):
            pattern = compile_posix(style[1:], ere=False, dialect="grep")
    except UsageError as err:
        return usage_result("nl", err)
    except RegexError as exc:
        return CommandResult("", f"nl: {exc}\n", 1)
    rejected = reject_files("nl", operands)
    if rejected is not None:
        return rejected
    lines, _ = split_lines(stdin)
    check_size((width + len(sep)) * len(lines) + len(stdin or ""))
    out: list[str] = []
    blank = " " * (width + len(sep))
    for line in lines:
        spend()
        if (
            style == "a"
            or (style == "t" and line)
            or (pattern is not None and pattern.search(line))
        ):
            if fmt == "ln":
                label = f"{number:<{width}d}"
            elif fmt == "rz":
                label = f"{number:0{width}d}"
            else:
                label = f"{number:>{width}d}"
            out.append(f"{label}{sep}{line}\n")
            number += incr
        else:
            out.append(f"{blank}{line}\n" if line else blank + "\n")
    return CommandResult("".join(out), "", 0)


_PASTE = OptionSpec(
    [
        Opt("d", "d", "delimiters", arg=True),
        Opt("s", "s", "serial"),
        Opt("z", "z", "zero-terminated"),
    ]
)


def _delimiters(text: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\", "0": "", "b": "\b", "f": "\f",
                        "r": "\r", "v": "\v"}.get(nxt, nxt))  # fmt: skip
            i += 2
            continue
        out.append(ch)
        i += 1
    return out


def paste(args: list[str], stdin: str | None) -> CommandResult:
    """Join lines: ``-s`` all of stdin into one line, ``- -`` stdin lines side by side."""
    try:
        opts, operands = _PASTE.parse(args)
    except UsageError as err:
        return usage_result("paste", err)
    rejected = reject_files("paste", operands)
    if rejected is not None:
        return rejected
    serial = any(k == "s" for k, _ in opts)
    eol = "\0" if any(k == "z" for k, _ in opts) else "\n"
    delims = _delimiters(next((v for k, v in reversed(opts) if k == "d"), "\t"))
    if not delims:
        delims = [""]
    lines, _ = split_lines(stdin, eol)
    columns = max(len(operands), 1)
    if serial:
        # ``paste -s - -``: the first ``-`` takes all of stdin, the others are empty.
        out = []
        for i in range(columns):
            row = lines if i == 0 else []
            joined = "".join(
                (delims[(j - 1) % len(delims)] if j else "") + line for j, line in enumerate(row)
            )
            out.append(joined + eol)
        return CommandResult("".join(out), "", 0)
    out_lines: list[str] = []
    for start in range(0, len(lines), columns):
        chunk = lines[start : start + columns]
        chunk += [""] * (columns - len(chunk))
        joined = chunk[0]
        for j, cell in enumerate(chunk[1:]):
            joined += delims[j % len(delims)] + cell
        out_lines.append(joined + eol)
    return CommandResult("".join(out_lines), "", 0)


_FOLD = OptionSpec(
    [
        Opt("b", "b", "bytes"),
        Opt("s", "s", "spaces"),
        Opt("w", "w", "width", arg=True),
    ]
)


def fold(args: list[str], stdin: str | None) -> CommandResult:
    """Wrap lines at a width (GNU counts bytes as columns, tabs to the next 8)."""
    argv = [f"-w{a[1:]}" if re.fullmatch(r"-\d+", a) else a for a in args]
    try:
        opts, operands = _FOLD.parse(argv)
        width = 80
        for key, value in opts:
            if key == "w":
                digits = value.strip()
                if not (digits.isdigit() and digits.isascii()) or not digits.strip("0"):
                    raise UsageError(f"invalid number of columns: ‘{value}’")
                width = clamped_count(digits)
    except UsageError as err:
        return usage_result("fold", err)
    rejected = reject_files("fold", operands)
    if rejected is not None:
        return rejected
    by_bytes = any(k == "b" for k, _ in opts)
    spaces = any(k == "s" for k, _ in opts)
    data = to_bytes(stdin or "")
    if not data:
        return CommandResult("", "", 0)
    out = bytearray()
    for raw in data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"):
        spend()
        out += _fold_line(raw, width, by_bytes, spaces)
        out += b"\n"
    if data and not data.endswith(b"\n"):
        out = out[:-1]
    return CommandResult(from_bytes(bytes(out)), "", 0)


def _column(col: int, byte: int, by_bytes: bool) -> int:
    if by_bytes:
        return col + 1
    if byte == 9:
        return col + 8 - col % 8
    if byte == 8:
        return max(col - 1, 0)
    if byte == 13:
        return 0
    return col + 1


#: bytes that are not one column wide (tab, backspace, carriage return)
_SPECIAL_COLUMNS = re.compile(b"[\t\b\r]")
#: how many bytes of a line are folded between two looks at the clock
_FOLD_SLICE = 1 << 16


def _fold_line(line: bytes, width: int, by_bytes: bool, spaces: bool) -> bytes:
    if not spaces and (by_bytes or _SPECIAL_COLUMNS.search(line) is None):
        if len(line) <= width:
            return line
        # every byte is a column: pieces of ``width`` bytes, a slice of the line at a time
        step = max(width, _FOLD_SLICE - _FOLD_SLICE % width)
        pieces = []
        for start in range(0, len(line), step):
            spend(step // 16)
            chunk = line[start : start + step]
            pieces.append(b"\n".join(chunk[i : i + width] for i in range(0, len(chunk), width)))
        return b"\n".join(pieces)
    out = bytearray()
    current = bytearray()
    col = 0
    for at, byte in enumerate(line):
        if not at & 1023:
            spend(256)
        new_col = _column(col, byte, by_bytes)
        if new_col > width and current:
            if spaces:
                cut = current.rfind(b" ")
                if cut >= 0:
                    out += current[: cut + 1] + b"\n"
                    current = current[cut + 1 :]
                    col = 0
                    for b in current:
                        col = _column(col, b, by_bytes)
                    new_col = _column(col, byte, by_bytes)
                    if new_col <= width:
                        current.append(byte)
                        col = new_col
                        continue
            out += current + b"\n"
            current = bytearray()
            col = 0
            new_col = _column(0, byte, by_bytes)
        current.append(byte)
        col = new_col
    out += current
    return bytes(out)
