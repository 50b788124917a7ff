"""``printf`` (with ``-v``, ``%b``, ``%q``, ``*`` widths and format reuse).

Floating-point conversions round the way bash does: the argument is first rounded to an
x87 long double (64-bit mantissa), then printed exactly, so ``printf %.2f 2.345`` gives
``2.35`` like bash rather than Python's ``2.34``.

Differential cases: ``cases_builtins.txt``, ``cases_quoting.txt``.
"""

from __future__ import annotations

import decimal
import math
import re
import time
from fractions import Fraction
from typing import TYPE_CHECKING

from ...budget import spend
from ...integers import decimal64
from ...syntax.word_parser import decode_ansi_c
from ..param_ops import quote_printf

if TYPE_CHECKING:
    from ..interpreter import Interpreter

MAX_WIDTH = 10_000
_SPEC = re.compile(r"%([-+ #0']*)(\*|\d+)?(?:\.(\*|\d*))?(\([^)]*\)T|[diouxXfFeEgGaAcsbq%])")
_INT_TEXT = re.compile(r"\s*([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\s*\Z")
_DEC_CTX = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_EVEN)
_U64 = 2**64


class _Stop(Exception):
    """``\\c`` in a ``%b`` argument: stop all output."""


def _format_escapes(fmt: str) -> str:
    """Backslash escapes of the format string itself (``\\0NNN`` is not special here)."""
    if "\\" not in fmt:
        return fmt
    return decode_ansi_c(re.sub(r"\\([0-7]{1,3})", lambda m: f"\\{m.group(1)}", fmt))


class _Args:
    def __init__(self, sh: Interpreter, args: list[str]) -> None:
        self.sh = sh
        self.args = args
        self.i = 0
        self.failed = False

    def next(self) -> str | None:
        if self.i < len(self.args):
            self.i += 1
            return self.args[self.i - 1]
        return None

    def integer(self, unsigned: bool = False) -> int:
        """The next argument as ``strtoimax`` reads it (``strtoumax`` for ``unsigned``
        conversions): clamped to 64 bits with bash's warning."""
        a = self.next()
        if a is None or a == "":
            return 0
        if a[0] in "'\"" and len(a) > 1:
            return ord(a[1])
        m = _INT_TEXT.match(a)
        if m is None:
            lead = re.match(r"\s*[-+]?\d+", a)
            self.sh.error(f"printf: {a}: invalid number")
            self.failed = True
            return _clamped(lead.group(0)) if lead else 0
        sign, digits = m.group(1), m.group(2)
        if digits[:2] in ("0x", "0X"):
            value = int(digits[2:], 16)
        elif len(digits) > 1 and digits[0] == "0":
            value = int(digits, 8)
        else:
            digits = digits.lstrip("0") or "0"
            value = int(digits) if len(digits) <= 20 else _U64  # past 64 bits either way
        if unsigned:
            if value >= _U64:
                self.sh.error(f"printf: warning: {a}: Numerical result out of range")
                return _U64 - 1
            return -value if sign == "-" else value
        value = -value if sign == "-" else value
        if value > 2**63 - 1 or value < -(2**63):
            self.sh.error(f"printf: warning: {a}: Numerical result out of range")
            value = 2**63 - 1 if value > 0 else -(2**63)
        return value

    def number(self) -> decimal.Decimal | float:
        a = self.next()
        if a is None or a.strip() == "":
            return decimal.Decimal(0)
        if a[0] in "'\"" and len(a) > 1:
            return decimal.Decimal(ord(a[1]))
        text = a.strip()
        try:
            value = float(text) if text.lower().lstrip("+-") in ("inf", "infinity", "nan") else None
            if value is not None:
                return value
            if text.lower().startswith(("0x", "-0x", "+0x")):
                frac = Fraction(float.fromhex(text))
            else:
                short = _short_decimal(text)
                if isinstance(short, float):
                    return short
                frac = Fraction(short)
        except (ValueError, ZeroDivisionError):
            self.sh.error(f"printf: {a}: invalid number")
            self.failed = True
            return decimal.Decimal(0)
        return _long_double(frac)


_DECIMAL_TEXT = re.compile(r"([-+]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]+))?")


def _size(digits: str) -> int:
    """A width or precision written in the format (clamped to MAX_WIDTH by the caller)."""
    return int(digits) if len(digits) < 10 else 2**31


def _clamped(text: str) -> int:
    """A decimal's value clamped to 64 bits, as ``strtoimax`` gives it."""
    value = decimal64(text)
    if value is None:
        return -(2**63) if text.strip().startswith("-") else 2**63 - 1
    return value


def _short_decimal(text: str) -> str | float:
    """A decimal number with at most 60 significant digits and an exponent that a long
    double can hold: the same value to the precision printf shows, without building
    huge integers (inf or 0.0 past the range). Anything else is returned as it is."""
    m = _DECIMAL_TEXT.fullmatch(text)
    if m is None:
        return text
    sign, whole, frac, exp_text = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    digits = (whole + frac).lstrip("0")
    if not digits:
        return text if len(text) < 4000 else "0"
    exp_digits = (exp_text or "0").lstrip("+-").lstrip("0") or "0"
    if len(exp_digits) > 6:
        if (exp_text or "").startswith("-"):
            return "0"
        return -math.inf if sign == "-" else math.inf
    magnitude = int(exp_text or "0") - len(frac) + len(whole + frac) - 1  # of the first digit
    magnitude -= len(whole + frac) - len((whole + frac).lstrip("0"))
    if magnitude > 4932:
        return -math.inf if sign == "-" else math.inf
    if magnitude < -4960:
        return "0"
    if len(text) < 64:
        return text
    exponent = magnitude - 59
    return f"{sign}{digits[:60].ljust(60, '0')}e{exponent}"


def _long_double(f: Fraction) -> decimal.Decimal:
    """The exact value of ``f`` rounded to a 64-bit-mantissa binary float."""
    if f == 0:
        return decimal.Decimal(0)
    sign = -1 if f < 0 else 1
    f = abs(f)
    e = math.floor(math.log2(f.numerator) - math.log2(f.denominator))
    while Fraction(2) ** e > f:
        e -= 1
    while Fraction(2) ** (e + 1) <= f:
        e += 1
    scale = Fraction(2) ** (63 - e)
    m = round(f * scale)
    exact = Fraction(m) / scale
    d = _DEC_CTX.divide(decimal.Decimal(exact.numerator), decimal.Decimal(exact.denominator))
    return d if sign > 0 else -d


def _pad(text: str, flags: str, width: int | None) -> str:
    """Pad to ``width`` bytes, as bash's printf counts (``%-8s`` of ``né`` adds 5)."""
    if width is None:
        return text
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))
    if size >= width:
        return text
    fill = " " * (width - size)
    return text + fill if "-" in flags else fill + text


def _cut(text: str, prec: int) -> str:
    """The first ``prec`` bytes (a precision counts bytes; a cut character is kept as
    its raw bytes)."""
    if text.isascii():
        return text[:prec]
    return text.encode("utf-8", "surrogateescape")[:prec].decode("utf-8", "surrogateescape")


def _convert(spec: str, flags: str, width: int | None, prec: int | None, a: _Args) -> str:
    if spec in "di":
        v = a.integer()
        body = str(abs(v))
        if prec is not None:
            body = body.zfill(prec)
            if prec == 0 and v == 0:
                body = ""
        sign = "-" if v < 0 else ("+" if "+" in flags else (" " if " " in flags else ""))
        return _num_pad(sign, body, flags, width, prec)
    if spec in "ouxX":
        v = a.integer(unsigned=True)
        if v < 0:
            v += _U64
        body = {"o": f"{v:o}", "u": str(v), "x": f"{v:x}", "X": f"{v:X}"}[spec]
        if prec is not None:
            body = body.zfill(prec)
        prefix = ""
        if "#" in flags and v:
            prefix = {"o": "0" if not body.startswith("0") else "", "x": "0x", "X": "0X"}.get(
                spec, ""
            )
        return _num_pad(prefix, body, flags, width, prec)
    if spec in "fFeEgGaA":
        num = a.number()
        if isinstance(num, float):
            body = "inf" if math.isinf(num) else "nan"
            if spec.isupper():
                body = body.upper()
            sign = "-" if num < 0 else ("+" if "+" in flags else "")
            return _pad(sign + body, flags.replace("0", ""), width)
        return _float(spec, flags, width, prec, num)
    if spec[0] == "(":  # %(fmt)T: a time, like strftime
        arg = a.next()
        if arg is None or arg == "":
            stamp = -1  # no argument: now
        else:
            a.i -= 1
            stamp = a.integer()
        if stamp == -1:
            stamp = int(time.time())
        elif stamp == -2:
            stamp = int(a.sh.start_epoch)
        try:
            moment = time.localtime(stamp)
        except (OverflowError, OSError, ValueError):  # bash: a time localtime() refuses
            moment = time.localtime(0)  # is shown as the epoch
        text = time.strftime(spec[1:-2] or "%X", moment)
        if prec is not None:
            text = text[:prec]
        return _pad(text, flags, width)
    if spec == "c":
        s = a.next() or ""
        return _pad(s[:1], flags, width)
    if spec == "s":
        s = a.next() or ""
        if prec is not None:
            s = _cut(s, prec)
        return _pad(s, flags, width)
    if spec == "q":
        return _pad(quote_printf(a.next() or ""), flags, width)
    if spec == "b":
        s = a.next() or ""
        stop = False
        cut = s.find("\\c")
        if cut >= 0:
            s, stop = s[:cut], True
        s = decode_ansi_c(re.sub(r"\\0([0-7]{0,3})", lambda m: "\\" + (m.group(1) or "0"), s))
        if prec is not None:
            s = _cut(s, prec)
        out = _pad(s, flags, width)
        if stop:
            raise _Stop(out)
        return out
    return "%"


def _float(spec: str, flags: str, width: int | None, prec: int | None, v: decimal.Decimal) -> str:
    p = 6 if prec is None else prec
    kind = spec.lower() if spec in "aA" else spec
    if kind == "a":
        kind = "e"
    alt = "#" in flags
    with decimal.localcontext(_DEC_CTX):
        if v == 0:
            body = format(0.0, ("#" if alt else "") + f".{p}{kind}")
        elif kind in "gG":
            body = _general(abs(v), p, kind, alt)
        else:
            body = format(abs(v), ("#" if alt else "") + f".{p}{kind}")
    body = _c_exponent(body)
    sign = (
        "-"
        if v < 0 or (v == 0 and str(v).startswith("-"))
        else ("+" if "+" in flags else (" " if " " in flags else ""))
    )
    return _num_pad(sign, body, flags, width, None)


def _general(v: decimal.Decimal, p: int, kind: str, alt: bool) -> str:
    """C's ``%g``: ``%e`` or ``%f`` by the exponent, trailing zeros removed."""
    p = p or 1
    exp_form = format(v, f".{p - 1}e")
    x = int(exp_form.lower().split("e")[1])
    body = format(v, f".{p - 1 - x}f") if -4 <= x < p else exp_form
    if not alt:
        mant, e, tail = body.lower().partition("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        body = mant + (e + tail if e else "")
    return body.upper() if kind == "G" else body


def _c_exponent(body: str) -> str:
    """Python prints ``1e+3``-style exponents as C does already (``e+03``)."""
    m = re.match(r"(.*[eE][-+])(\d+)\Z", body)
    if m and len(m.group(2)) < 2:
        return m.group(1) + m.group(2).zfill(2)
    return body


def _num_pad(sign: str, body: str, flags: str, width: int | None, prec: int | None) -> str:
    text = sign + body
    if width is None or len(text) >= width:
        return text
    if "-" in flags:
        return text.ljust(width)
    if "0" in flags and prec is None:
        return sign + body.rjust(width - len(sign), "0")
    return text.rjust(width)


def format_printf(sh: Interpreter, fmt: str, args: list[str]) -> tuple[str, bool]:
    """Render; returns (text, ok). The format is reused while arguments remain."""
    fmt = _format_escapes(fmt)
    a = _Args(sh, args)
    out: list[str] = []
    try:
        while True:
            start_i = a.i
            pos = 0
            for m in _SPEC.finditer(fmt):
                spend()
                out.append(fmt[pos : m.start()])
                pos = m.end()
                flags, width_s, prec_s, spec = m.group(1), m.group(2), m.group(3), m.group(4)
                if spec == "%":
                    out.append("%")
                    continue
                width = a.integer() if width_s == "*" else (_size(width_s) if width_s else None)
                if width is not None and width < 0:
                    flags += "-"
                    width = -width
                prec: int | None = None
                if prec_s is not None:
                    prec = a.integer() if prec_s == "*" else _size(prec_s or "0")
                if width is not None and width > MAX_WIDTH:
                    width = MAX_WIDTH
                if prec is not None and prec > MAX_WIDTH:
                    prec = MAX_WIDTH
                out.append(_convert(spec, flags, width, prec, a))
            out.append(fmt[pos:])
            if a.i >= len(args) or a.i == start_i:
                break
    except _Stop as stop:
        out.append(str(stop))
    return "".join(out), not a.failed


def printf(sh: Interpreter, args: list[str]) -> int:
    var: str | None = None
    if args[:1] == ["-v"] and len(args) >= 2:
        var = args[1]
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        sh.error("printf: usage: printf [-v var] format [arguments]")
        return 2
    text, ok = format_printf(sh, args[0], args[1:])
    if var is not None:
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(.*)\])?\Z", var, re.DOTALL)
        if m is None:
            sh.error(f"printf: `{var}': not a valid identifier")
            return 2
        if m.group(2) is not None:
            key: int | str = m.group(2) if sh.is_assoc(m.group(1)) else sh.arith_expr(m.group(2))
            sh.assign_item(m.group(1), key, text)
        else:
            sh.assign(var, text)
    else:
        sh.out.write(text)
    return 0 if ok else 1
