"""``tr`` (GNU coreutils): translate, delete and squeeze bytes.

GNU tr works on bytes, not characters (a multi-byte character in a set is several
bytes); this one does too, with ``bytes.translate`` doing the work.
"""

from __future__ import annotations

import re

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import count_value
from .common import Opt, OptionSpec, UsageError, from_bytes, to_bytes, usage_result

_SPEC = OptionSpec(
    [
        Opt("c", "c", "complement"),
        Opt("c", "C"),
        Opt("d", "d", "delete"),
        Opt("s", "s", "squeeze-repeats"),
        Opt("t", "t", "truncate-set1"),
    ]
)

_CLASSES: dict[str, bytes] = {
    "alpha": bytes(b for b in range(128) if chr(b).isalpha()),
    "digit": b"0123456789",
    "alnum": bytes(b for b in range(128) if chr(b).isalnum()),
    "upper": bytes(range(65, 91)),
    "lower": bytes(range(97, 123)),
    "space": b" \t\n\v\f\r",
    "blank": b" \t",
    "punct": bytes(b for b in range(33, 127) if not chr(b).isalnum()),
    "print": bytes(range(32, 127)),
    "graph": bytes(range(33, 127)),
    "cntrl": bytes([*range(32), 127]),
    "xdigit": b"0123456789ABCDEFabcdef",
}

_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}


class _Set:
    """A parsed SET: its bytes in order, and a ``[c*]`` fill position (SET2 only)."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.fill: tuple[int, int] | None = None  # (index, byte)


def _unescape(data: bytes, i: int) -> tuple[int, int]:
    """One possibly backslash-escaped byte at ``i``: (value, next index)."""
    b = data[i]
    if b != 0x5C or i + 1 >= len(data):
        return b, i + 1
    nxt = chr(data[i + 1])
    if nxt in "01234567":
        j = i + 1
        value = 0
        while j < len(data) and j < i + 4 and chr(data[j]) in "01234567":
            value = value * 8 + data[j] - 48
            j += 1
        if value > 255:
            return value >> 3, j - 1
        return value, j
    return _ESCAPES.get(nxt, data[i + 1]), i + 2


#: A set longer than this is refused: string2 beyond string1's length changes nothing,
#: so a repeat count is cut to it, and string1 cannot grow past it from a short argument.
MAX_SET = 1 << 20


def _repeat_count(digits: bytes, text: str) -> int:
    """``[c*n]``'s n (octal with a leading 0): past 64 bits is GNU's error; a count past
    what any string1 can use is cut to ``MAX_SET``."""
    value = count_value(digits.decode())
    if value is None:
        raise UsageError(
            f"invalid repeat count ‘{digits.decode()}’ in [c*n] construct", status=1, hint=False
        )
    if digits.startswith(b"0"):
        value = int(digits, 8) if len(digits) <= 22 else 1 << 64
    return min(value, MAX_SET)


def _check_items(items: list[int]) -> None:
    spend(len(items) // 64)
    if len(items) > MAX_SET:
        raise UsageError(f"set too large (more than {MAX_SET} characters)", status=1, hint=False)


def _parse_set(text: str, second: bool) -> _Set:
    data = to_bytes(text)
    result = _Set()
    i = 0
    n = len(data)
    while i < n:
        if data[i] == 0x5B and i + 1 < n:  # "["
            m = re.match(rb"\[:([a-z]+):\]", data[i:])
            if m:
                name = m.group(1).decode()
                if name not in _CLASSES:
                    raise UsageError(f"invalid character class ‘{name}’", status=1, hint=False)
                if second and name not in ("upper", "lower"):
                    raise UsageError(
                        "when translating, the only character classes that may appear in\n"
                        "string2 are 'upper' and 'lower'",
                        status=1,
                        hint=False,
                    )
                result.items.extend(_CLASSES[name])
                i += m.end()
                continue
            m = re.match(rb"\[=(.)=\]", data[i:], re.DOTALL)
            if m:
                result.items.append(m.group(1)[0])
                i += m.end()
                continue
            if second:
                char, j = _unescape(data, i + 1)
                m = re.match(rb"\*(\d*)\]", data[j:])
                if m:
                    digits = m.group(1)
                    if digits:
                        count = _repeat_count(digits, text)
                        if count:
                            result.items.extend([char] * count)
                            _check_items(result.items)
                            i = j + m.end()
                            continue
                    if result.fill is not None:
                        raise UsageError(
                            "only one [c*] repeat construct may appear in string2",
                            status=1,
                            hint=False,
                        )
                    result.fill = (len(result.items), char)
                    i = j + m.end()
                    continue
        low, j = _unescape(data, i)
        if j + 1 < n and data[j] == 0x2D:  # "a-z"
            high, k = _unescape(data, j + 1)
            if high < low:
                raise UsageError(
                    f"range-endpoints of '{chr(low)}-{chr(high)}' are in reverse "
                    "collating sequence order",
                    status=1,
                    hint=False,
                )
            result.items.extend(range(low, high + 1))
            _check_items(result.items)
            i = k
            continue
        result.items.append(low)
        i = j
    return result


def _byte_class(values: set[int] | list[int]) -> bytes:
    return b"[" + b"".join(b"\\x%02x" % v for v in sorted(set(values))) + b"]"


def tr(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
        flags = {key for key, _ in opts}
        complement, delete, squeeze, truncate = (f in flags for f in "cdst")
        translating = not delete and len(operands) >= 2
        need = 2 if (delete and squeeze) or (not delete and not squeeze) else 1
        if not operands:
            raise UsageError("missing operand")
        if len(operands) < need:
            more = (
                "\nTwo strings must be given when translating."
                if not delete
                else "\nTwo strings must be given when both deleting and squeezing repeats."
            )
            raise UsageError(f"missing operand after ‘{operands[-1]}’{more}")
        if len(operands) > need and not (squeeze and not delete and len(operands) == 2):
            hint = (
                "\nOnly one string may be given when deleting without squeezing repeats."
                if delete
                else ""
            )
            raise UsageError(f"extra operand ‘{operands[need]}’{hint}")
        set1 = _parse_set(operands[0], False)
        set2 = _parse_set(operands[1], translating) if len(operands) > 1 else None
    except UsageError as err:
        return usage_result("tr", err)

    data = to_bytes(stdin or "")
    members1 = list(dict.fromkeys(set1.items))
    if complement:
        inside = set(members1)
        members1 = [b for b in range(256) if b not in inside]
    if delete:
        data = data.translate(None, bytes(members1))
        if squeeze and set2 is not None:
            data = _squeeze(data, set2.items)
        return CommandResult(from_bytes(data), "", 0)
    if translating and set2 is not None:
        try:
            table = _translation(set1, set2, members1, complement, truncate)
        except UsageError as err:
            return usage_result("tr", err)
        data = data.translate(table)
        if squeeze:
            data = _squeeze(data, _expanded(set2, len(members1)))
        return CommandResult(from_bytes(data), "", 0)
    data = _squeeze(data, members1)
    return CommandResult(from_bytes(data), "", 0)


def _expanded(set2: _Set, length: int) -> list[int]:
    items = list(set2.items)
    if set2.fill is not None:
        at, char = set2.fill
        items[at:at] = [char] * max(length - len(items), 0)
    return items


def _translation(
    set1: _Set, set2: _Set, members1: list[int], complement: bool, truncate: bool
) -> bytes:
    """Position i of SET1 maps to position i of SET2, which is padded with its last byte
    (or cut, with ``-t``); ``[:lower:]``/``[:upper:]`` line up letter by letter."""
    sources = members1 if complement else set1.items
    targets = _expanded(set2, len(sources))
    table = bytearray(range(256))
    if not targets:
        if sources and not truncate:
            raise UsageError("when not truncating set1, string2 must be non-empty", status=1)
        return bytes(table)
    if truncate:
        sources = sources[: len(targets)]
    elif len(targets) < len(sources):
        targets = targets + [targets[-1]] * (len(sources) - len(targets))
    for src, dst in zip(sources, targets, strict=False):
        table[src] = dst
    return bytes(table)


def _squeeze(data: bytes, members: list[int]) -> bytes:
    if not members:
        return data
    # possessive: a run of 8 MB is one match without a backtracking frame per byte
    # (the greedy \1+ took 600 MB and seconds in one C call)
    pattern = re.compile(b"(" + _byte_class(members) + b")\\1++")
    return pattern.sub(rb"\1", data)
