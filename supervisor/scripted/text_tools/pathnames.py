"""``basename`` and ``dirname``, as GNU coreutils: string operations on their operands
(no file is looked at, so nothing is refused), reading no input.

Differential cases: ``cases_text_tools.txt``.
"""

from __future__ import annotations

from supervisor.scripted.contract import CommandResult

from .common import Opt, OptionSpec, UsageError, usage_result

_BASENAME = OptionSpec(
    [
        Opt("a", "a", "multiple"),
        Opt("s", "s", "suffix", arg=True),
        Opt("z", "z", "zero"),
    ]
)
_DIRNAME = OptionSpec([Opt("z", "z", "zero")])


def base_name(path: str, suffix: str = "") -> str:
    """The last component of ``path`` (``/`` for a path of slashes only), without
    ``suffix`` unless that is all of it."""
    stripped = path.rstrip("/")
    if not stripped:
        return "/" if path else ""
    name = stripped.rsplit("/", 1)[-1]
    if suffix and name != suffix and name.endswith(suffix):
        name = name[: -len(suffix)]
    return name


def dir_name(path: str) -> str:
    """``path`` without its last component (POSIX dirname; ``.`` when it has no slash)."""
    stripped = path.rstrip("/")
    if not stripped:
        return "/" if path else "."
    if "/" not in stripped:
        return "."
    head = stripped.rsplit("/", 1)[0].rstrip("/")
    return head or "/"


def basename(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _BASENAME.parse(args)
    except UsageError as err:
        return usage_result("basename", err)
    multiple = any(k in "as" for k, _ in opts)
    suffix = next((v for k, v in reversed(opts) if k == "s"), "")
    end = "\0" if any(k == "z" for k, _ in opts) else "\n"
    if not operands:
        return usage_result("basename", UsageError("missing operand"))
    if not multiple:
        if len(operands) > 2:
            return usage_result("basename", UsageError(f"extra operand \u2018{operands[2]}\u2019"))
        suffix = operands[1] if len(operands) == 2 else suffix
        operands = operands[:1]
    return CommandResult("".join(base_name(p, suffix) + end for p in operands), "", 0)


def dirname(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _DIRNAME.parse(args)
    except UsageError as err:
        return usage_result("dirname", err)
    if not operands:
        return usage_result("dirname", UsageError("missing operand"))
    end = "\0" if opts else "\n"
    return CommandResult("".join(dir_name(p) + end for p in operands), "", 0)
