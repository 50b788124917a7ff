"""``head`` and ``tail`` (GNU coreutils): lines or bytes from the start or the end.

Both keep the input's bytes exactly (a missing final newline stays missing). ``-f`` and
its friends are accepted and ignored: stdin is a pipe, where GNU ignores them too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from supervisor.scripted.contract import CommandResult

from ..integers import INT_MAX, count_value
from .common import (
    Opt,
    OptionSpec,
    UsageError,
    from_bytes,
    reject_files,
    to_bytes,
    usage_result,
)

_SUFFIXES = {
    "": 1, "b": 512, "kB": 1000, "K": 1024, "k": 1024, "KiB": 1024, "MB": 1000**2,
    "M": 1024**2, "MiB": 1024**2, "GB": 1000**3, "G": 1024**3, "GiB": 1024**3,
    "TB": 1000**4, "T": 1024**4,
}  # fmt: skip

_NUMBER = re.compile(r"([+-]?)(\d+)([A-Za-z]*)")


def _count(text: str, what: str) -> tuple[str, int]:
    """A count with optional sign and multiplier suffix (``-n -5``, ``-c 1K``)."""
    m = _NUMBER.fullmatch(text.strip())
    if m is None or m.group(3) not in _SUFFIXES:
        raise UsageError(f"invalid number of {what}: ‘{text}’", status=1, hint=False)
    count = count_value(m.group(2))
    if count is None or count * _SUFFIXES[m.group(3)] > INT_MAX:
        raise UsageError(
            f"invalid number of {what}: ‘{text}’: Value too large for defined data type",
            status=1,
            hint=False,
        )
    return m.group(1), count * _SUFFIXES[m.group(3)]


_HEAD = OptionSpec(
    [
        Opt("n", "n", "lines", arg=True),
        Opt("c", "c", "bytes", arg=True),
        Opt("q", "q", "quiet"),
        Opt("q", "", "silent"),
        Opt("v", "v", "verbose"),
        Opt("z", "z", "zero-terminated"),
    ]
)

_TAIL = OptionSpec(
    [
        Opt("n", "n", "lines", arg=True),
        Opt("c", "c", "bytes", arg=True),
        Opt("q", "q", "quiet"),
        Opt("q", "", "silent"),
        Opt("v", "v", "verbose"),
        Opt("z", "z", "zero-terminated"),
        Opt("f", "f"),
        Opt("f", "", "follow", arg=True, optional=True),
        Opt("f", "F"),
        Opt("f", "s", "sleep-interval", arg=True),
        Opt("f", "", "pid", arg=True),
        Opt("f", "", "retry"),
        Opt("f", "", "max-unchanged-stats", arg=True),
    ]
)

_OBSOLETE = re.compile(r"-(\d+)([lcbkm]?)([qvfz]*)")


def _obsolete(args: list[str]) -> list[str]:
    """``head -5`` / ``tail -5c``: the old count-as-option form, rewritten."""
    if args and (m := _OBSOLETE.fullmatch(args[0])):
        unit = "-c" if m.group(2) in ("c", "b", "k", "m") else "-n"
        mult = {"b": "b", "k": "K", "m": "M"}.get(m.group(2), "")
        flags = [f"-{f}" for f in m.group(3)]
        return [unit, m.group(1) + mult, *flags, *args[1:]]
    return args


def _split_keep(data: bytes, sep: bytes) -> list[bytes]:
    """Records with their terminators (the last may have none)."""
    parts = data.split(sep)
    records = [p + sep for p in parts[:-1]]
    if parts[-1]:
        records.append(parts[-1])
    return records


@dataclass(slots=True)
class _Request:
    """What ``head``/``tail`` were asked for."""

    mode: str = "n"  # "n" lines or "c" bytes
    sign: str = ""  # "-" (all but), "+" (from), "" (count)
    count: int = 10
    verbose: bool = False
    sep: bytes = b"\n"


def _request(
    tool: str, spec: OptionSpec, args: list[str], stdin: str | None
) -> tuple[_Request, bytes] | CommandResult:
    req = _Request()
    try:
        opts, operands = spec.parse(_obsolete(args))
        for key, value in opts:
            if key in "nc":
                req.mode = key
                req.sign, req.count = _count(value, "lines" if key == "n" else "bytes")
            elif key in "vq":
                req.verbose = key == "v"
            elif key == "z":
                req.sep = b"\0"
    except UsageError as err:
        return usage_result(tool, err)
    rejected = reject_files(tool, operands)
    if rejected is not None:
        return rejected
    return req, to_bytes(stdin or "")


def _result(req: _Request, out: bytes) -> CommandResult:
    header = "==> standard input <==\n" if req.verbose else ""
    return CommandResult(header + from_bytes(out), "", 0)


def head(args: list[str], stdin: str | None) -> CommandResult:
    parsed = _request("head", _HEAD, args, stdin)
    if isinstance(parsed, CommandResult):
        return parsed
    req, data = parsed
    count = req.count
    if req.mode == "c":
        out = data[: max(len(data) - count, 0)] if req.sign == "-" else data[:count]
    else:
        records = _split_keep(data, req.sep)
        chosen = records[: max(len(records) - count, 0)] if req.sign == "-" else records[:count]
        out = b"".join(chosen)
    return _result(req, out)


def tail(args: list[str], stdin: str | None) -> CommandResult:
    args = list(args)
    if args and re.fullmatch(r"\+\d+[lcb]?", args[0]):
        plus = args[0]
        unit = "-c" if plus.endswith(("c", "b")) else "-n"
        args = [unit, "+" + plus[1:].rstrip("lcb"), *args[1:]]
    parsed = _request("tail", _TAIL, args, stdin)
    if isinstance(parsed, CommandResult):
        return parsed
    req, data = parsed
    count = req.count
    units: list[bytes] | bytes = data if req.mode == "c" else _split_keep(data, req.sep)
    if req.sign == "+":
        chosen = units[max(count - 1, 0) :]
    else:
        chosen = units[len(units) - count :] if count else units[:0]
    out = chosen if isinstance(chosen, bytes) else b"".join(chosen)
    return _result(req, out)
