"""``seq`` (GNU coreutils): a sequence of numbers, at most 100,000 lines.

Integers are exact at any size (as GNU's fast path); other values use ``Decimal`` so that
``seq 0 0.1 0.3`` ends at 0.3 the way GNU's rounding check makes it. The line limit is
bashkit's (reference-bashkit.md 4.3): past it the output is truncated, with an error.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from supervisor.scripted.contract import CommandResult

from ..budget import spend
from ..integers import MAX_BIG_DIGITS
from . import cformat
from .common import MAX_OUTPUT_BYTES, Opt, OptionSpec, UsageError, check_size, usage_result

MAX_LINES = 100_000

_SPEC = OptionSpec(
    [
        Opt("f", "f", "format", arg=True),
        Opt("s", "s", "separator", arg=True),
        Opt("w", "w", "equal-width"),
    ],
    permute=False,
)

_NEGATIVE_NUMBER = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


def _number(text: str) -> Decimal:
    """strtold's view of an operand: decimal, exponent, hex, inf."""
    stripped = text.strip()
    try:
        if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", stripped):
            return Decimal(int(stripped, 16))
        value = Decimal(stripped)
    except (InvalidOperation, ValueError):
        raise UsageError(f"invalid floating point argument: ‘{text}’", status=1) from None
    if value.is_nan():
        raise UsageError(f"invalid ‘not-a-number’ argument: ‘{text}’", status=1)
    if value.is_finite() and value and abs(value.adjusted()) > MAX_BIG_DIGITS:
        raise UsageError(
            f"number too large: ‘{text}’ (more than {MAX_BIG_DIGITS} digits)", status=1, hint=False
        )
    return value


def _precision(text: str) -> int:
    """Digits after the point, less the exponent: GNU's output precision."""
    stripped = text.strip().lower()
    if stripped.startswith(("0x", "+0x", "-0x")) or "inf" in stripped:
        return 0
    mantissa, _, exponent = stripped.partition("e")
    frac = mantissa.partition(".")[2]
    shift = int(exponent) if exponent and len(exponent) < 12 else 0  # bounded by _number
    return min(max(len(frac) - shift, 0), MAX_BIG_DIGITS)


def _is_integer_text(text: str) -> bool:
    return re.fullmatch(r"\s*[+-]?\d+\s*", text) is not None


def _check_format(fmt: str) -> cformat.Spec:
    parts = cformat.parse(fmt)
    specs = [p for p in parts if isinstance(p, cformat.Spec)]
    if not specs:
        raise UsageError(f"format ‘{fmt}’ has no % directive", status=1, hint=False)
    if len(specs) > 1:
        raise UsageError(f"format ‘{fmt}’ has too many % directives", status=1, hint=False)
    spec = specs[0]
    if spec.conv not in "eEfFgGaA":
        raise UsageError(f"format ‘{fmt}’ has unknown %{spec.conv} directive", status=1, hint=False)
    return spec


def seq(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args, is_operand=lambda a: bool(_NEGATIVE_NUMBER.match(a)))
        fmt: str | None = None
        sep = "\n"
        equal_width = False
        for key, value in opts:
            if key == "f":
                fmt = value
            elif key == "s":
                sep = value
            else:
                equal_width = True
        if not operands:
            raise UsageError("missing operand")
        if len(operands) > 3:
            raise UsageError(f"extra operand ‘{operands[3]}’")
        if fmt is not None and equal_width:
            raise UsageError("format string may not be specified when printing equal width strings")
        texts = ["1", "1", *operands] if len(operands) == 1 else operands
        if len(texts) == 2:
            texts = [texts[0], "1", texts[1]]
        first, step, last = (_number(t) for t in texts)
        if step == 0:
            raise UsageError(f"invalid Zero increment value: ‘{texts[1]}’", status=1)
        spec = _check_format(fmt) if fmt is not None else None
    except UsageError as err:
        return usage_result("seq", err)
    if spec is None and all(_is_integer_text(t) for t in texts):
        lines, truncated = _integers(int(first), int(step), int(last), equal_width)
        # an integer range's longest line is at one of its ends
        longest = max(len(lines[0]), len(lines[-1])) if lines else 0
        size = len(lines) * (len(sep) + longest)
    else:
        lines, truncated = _decimals(first, step, last, texts, fmt, equal_width)
        size = len(sep) * len(lines) + sum(map(len, lines))
    if size > MAX_OUTPUT_BYTES:  # the bound: the exact size before it is built
        check_size(len(sep) * max(len(lines) - 1, 0) + sum(map(len, lines)))
    out = sep.join(lines) + "\n" if lines else ""
    if truncated:
        return CommandResult(out, f"seq: line limit ({MAX_LINES}) exceeded; output truncated\n", 1)
    return CommandResult(out, "", 0)


def _integers(first: int, step: int, last: int, equal_width: bool) -> tuple[list[str], bool]:
    stop = last + (1 if step > 0 else -1)
    values = range(first, stop, step)
    truncated = len(values) > MAX_LINES
    values = values[:MAX_LINES]
    check_size(len(values) * (max(len(str(first)), len(str(last))) + 1) // 2)
    if equal_width:
        width = max(len(str(first)), len(str(last)))
        return [f"{v:0{width}d}" for v in values], truncated
    return [str(v) for v in values], truncated


def _decimals(
    first: Decimal,
    step: Decimal,
    last: Decimal,
    texts: list[str],
    fmt: str | None,
    equal_width: bool,
) -> tuple[list[str], bool]:
    precision = max(_precision(texts[0]), _precision(texts[1]))
    parts = cformat.parse(fmt) if fmt is not None else None

    def render(value: Decimal) -> str:
        if parts is None:
            if value.is_infinite():
                return "-inf" if value < 0 else "inf"
            return f"{value:.{precision}f}"
        return "".join(
            p if isinstance(p, str) else cformat.format_number(p, float(value)) for p in parts
        )

    lines: list[str] = []
    i = 0
    while True:
        value = first + i * step if not first.is_infinite() else first
        if (step > 0 and value > last) or (step < 0 and value < last):
            break
        if len(lines) >= MAX_LINES:
            return _pad(lines, render(first), render(last), equal_width), True
        lines.append(render(value))
        if not i & 63:
            spend(256)  # for 64 lines at once
        i += 1
    return _pad(lines, render(first), render(last), equal_width), False


def _pad(lines: list[str], first: str, last: str, equal_width: bool) -> list[str]:
    if not equal_width:
        return lines
    width = max(len(first), len(last))
    out = []
    for line in lines:
        if len(line) < width:
            sign = "-" if line.startswith("-") else ""
            line = sign + line[len(sign) :].rjust(width - len(sign), "0")
        out.append(line)
    return out
