"""Shared pieces of the text tools: results, GNU-style option parsing, lines, limits.

Every text tool is a pure function ``(args, stdin) -> CommandResult``. These helpers keep
the tools small and make them fail the same way: a usage error is a ``UsageError`` turned
into the tool's own message and exit status, and output that would grow past
``MAX_OUTPUT_BYTES`` stops with ``OutputLimitError`` instead of eating the host's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from supervisor.scripted.contract import CommandResult, ExecutionLimits

#: The most a text tool writes to stdout (and the longest string it builds): the value cap
#: of the language core, so nothing a tool produces is bigger than a variable may be.
MAX_OUTPUT_BYTES = ExecutionLimits().max_value_bytes

FS_DISABLED = "filesystem access disabled"


class UsageError(Exception):
    """Bad options or operands: the message is printed after ``<tool>: ``."""

    def __init__(self, message: str, status: int | None = None, *, hint: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.hint = hint


class OutputLimitError(Exception):
    """A tool's output (or a string it builds) grew past ``MAX_OUTPUT_BYTES``."""


def usage_result(tool: str, err: UsageError, status: int = 1) -> CommandResult:
    """GNU's two-line usage complaint: the message, then the ``--help`` hint. ``status``
    is the tool's usage status (1 for coreutils, 2 for grep, awk and jq)."""
    text = f"{tool}: {err.message}\n"
    if err.hint:
        text += f"Try '{tool} --help' for more information.\n"
    return CommandResult("", text, status if err.status is None else err.status)


def limit_result(tool: str, status: int = 1) -> CommandResult:
    return CommandResult("", f"{tool}: output limit exceeded ({MAX_OUTPUT_BYTES} bytes)\n", status)


def check_size(size: int) -> None:
    """Raise ``OutputLimitError`` when ``size`` (characters or bytes) is past the cap."""
    if size > MAX_OUTPUT_BYTES:
        raise OutputLimitError


# --------------------------------------------------------------------------- lines


def split_lines(text: str | None, sep: str = "\n") -> tuple[list[str], bool]:
    """The lines of ``text`` without their separators, and whether the last one ended
    with the separator (GNU tools add it back on output; sed and head/tail keep it off)."""
    if not text:
        return [], True
    lines = text.split(sep)
    if lines[-1] == "":
        lines.pop()
        return lines, True
    return lines, False


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def from_bytes(data: bytes) -> str:
    """Bytes a tool cut at an arbitrary offset: a split character becomes U+FFFD, as
    the differential harness reads bash's output."""
    return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------- options


@dataclass(frozen=True, slots=True)
class Opt:
    """One option of a tool: its short letter and/or long name, and whether it takes a
    value (``arg``: required; ``optional``: only in ``--name=value`` form)."""

    key: str
    short: str = ""
    long: str = ""
    arg: bool = False
    optional: bool = False


class OptionSpec:
    """GNU ``getopt_long`` with permutation: options may follow operands, ``--`` ends
    them, short options cluster (``-nr``), values attach (``-n5``, ``--lines=5``), and
    an unambiguous prefix of a long option is accepted."""

    def __init__(self, opts: Sequence[Opt], *, permute: bool = True) -> None:
        self.by_short = {o.short: o for o in opts if o.short}
        self.by_long = {o.long: o for o in opts if o.long}
        self.permute = permute

    def parse(
        self,
        args: Sequence[str],
        *,
        is_operand: Callable[[str], bool] | None = None,
    ) -> tuple[list[tuple[str, str]], list[str]]:
        opts: list[tuple[str, str]] = []
        operands: list[str] = []
        i = 0
        n = len(args)
        while i < n:
            arg = args[i]
            i += 1
            if arg == "--":
                operands.extend(args[i:])
                break
            if len(arg) < 2 or arg[0] != "-" or (is_operand is not None and is_operand(arg)):
                operands.append(arg)
                if not self.permute:
                    operands.extend(args[i:])
                    break
                continue
            if arg.startswith("--"):
                name, eq, value = arg[2:].partition("=")
                opt = self._long(name, arg)
                if opt.arg and not eq and not opt.optional:
                    if i >= n:
                        raise UsageError(f"option '--{opt.long}' requires an argument")
                    value = args[i]
                    i += 1
                elif eq and not opt.arg:
                    raise UsageError(f"option '--{opt.long}' doesn't allow an argument")
                opts.append((opt.key, value))
                continue
            j = 1
            while j < len(arg):
                ch = arg[j]
                j += 1
                short = self.by_short.get(ch)
                if short is None:
                    raise UsageError(f"invalid option -- '{ch}'")
                if short.arg and not short.optional:
                    if j < len(arg):
                        value = arg[j:]
                    elif i < n:
                        value = args[i]
                        i += 1
                    else:
                        raise UsageError(f"option requires an argument -- '{ch}'")
                    opts.append((short.key, value))
                    break
                opts.append((short.key, ""))
        return opts, operands

    def _long(self, name: str, arg: str) -> Opt:
        opt = self.by_long.get(name)
        if opt is not None:
            return opt
        matches = [o for long, o in self.by_long.items() if long.startswith(name)]
        if len({id(o) for o in matches}) == 1:
            return matches[0]
        if matches:
            raise UsageError(f"option '{arg}' is ambiguous")
        raise UsageError(f"unrecognized option '{arg}'")


def file_operand_error(tool: str, path: str) -> str:
    """``<tool>: <path>: filesystem access disabled`` (reference-bashkit.md 4.2)."""
    return f"{tool}: {path}: {FS_DISABLED}\n"


def reject_files(tool: str, operands: Sequence[str], status: int = 1) -> CommandResult | None:
    """The result for file operands (``-`` is stdin and allowed), or None when none."""
    files = [f for f in operands if f != "-"]
    if not files:
        return None
    return CommandResult("", "".join(file_operand_error(tool, f) for f in files), status)
