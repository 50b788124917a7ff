"""``base64``, as GNU coreutils: encode standard input (lines of 76 characters, ``-w``)
or decode it (``-d``; ``-i`` skips characters outside the alphabet). Invalid input is
decoded as far as it goes, then ``base64: invalid input``, exit 1, as GNU does.

Differential cases: ``cases_text_tools.txt``.
"""

from __future__ import annotations

import base64 as codec
import binascii
import re

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from .common import (
    Opt,
    OptionSpec,
    UsageError,
    check_size,
    from_bytes,
    reject_files,
    to_bytes,
    usage_result,
)

_SPEC = OptionSpec(
    [
        Opt("d", "d", "decode"),
        Opt("i", "i", "ignore-garbage"),
        Opt("w", "w", "wrap", arg=True),
    ]
)
_GARBAGE = re.compile(rb"[^A-Za-z0-9+/=]")
_NEWLINES = re.compile(rb"\n")


def base64(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
        wrap = 76
        for key, value in opts:
            if key == "w":
                if not value.isdigit():
                    raise UsageError(f"invalid wrap size: \u2018{value}\u2019", hint=False)
                wrap = int(value)
    except UsageError as err:
        return usage_result("base64", err)
    if len(operands) > 1:
        return usage_result("base64", UsageError(f"extra operand \u2018{operands[1]}\u2019"))
    rejected = reject_files("base64", operands)
    if rejected is not None:
        return rejected
    data = to_bytes(stdin or "")
    spend(len(data) // 64)
    keys = {k for k, _ in opts}
    if "d" in keys:
        return _decode(data, "i" in keys)
    text = codec.b64encode(data).decode("ascii")
    check_size(len(text) + len(text) // max(wrap, 1) + 1)
    if not wrap:
        return CommandResult(text, "", 0)  # -w 0: one line, no newline (as GNU)
    if text:
        text = "\n".join(text[k : k + wrap] for k in range(0, len(text), wrap)) + "\n"
    return CommandResult(text, "", 0)


def _decode(data: bytes, ignore_garbage: bool) -> CommandResult:
    data = (_GARBAGE if ignore_garbage else _NEWLINES).sub(b"", data)
    bad = _GARBAGE.search(data)
    valid = data if bad is None else data[: bad.start()]
    out, ok = _decode_groups(valid)
    if ok and bad is None:
        return CommandResult(from_bytes(out), "", 0)
    return CommandResult(from_bytes(out), "base64: invalid input\n", 1)


def _decode_groups(text: bytes) -> tuple[bytes, bool]:
    """``text`` (alphabet and ``=`` only) decoded group by group, as far as it is valid,
    and whether all of it was."""
    if len(text) % 4 == 0 and b"=" not in text[:-4]:
        try:
            return codec.b64decode(text, validate=True), True
        except binascii.Error:
            pass
    out: list[bytes] = []
    for k in range(0, len(text), 4):
        group = text[k : k + 4]
        data = group.split(b"=", 1)[0]
        if len(data) == 4:
            out.append(codec.b64decode(data))
            continue
        if len(data) >= 2:  # what a short or padded group holds
            out.append(codec.b64decode(data + b"=" * (4 - len(data))))
        if len(group) < 4 or len(data) < 2 or group[len(data) :].strip(b"=") != b"":
            return b"".join(out), False
    return b"".join(out), True
