"""``sed`` (GNU sed 4.9) over stdin: the stream editor as a parser and an executor.

Options: ``-n``, ``-e`` (repeatable), ``-E``/``-r``, ``-s``, ``-u``, ``-z``, ``-l N``,
``--posix``, ``--debug``. ``-f`` and ``-i`` need files and are refused, as are file
operands (``sed: can't read F: filesystem access disabled``, exit 2), ``e`` and ``w`` to
a file other than ``/dev/stdout``/``/dev/stderr``; ``r``/``R`` read nothing (GNU's
behaviour for a file it cannot read).
"""

from __future__ import annotations

from supervisor.scripted.contract import CommandResult

from ...integers import clamped_count
from ..common import FS_DISABLED, Opt, OptionSpec, UsageError, usage_result
from .executor import run_script
from .script import SedError, parse_script

_SPEC = OptionSpec(
    [
        Opt("n", "n", "quiet"),
        Opt("n", "", "silent"),
        Opt("e", "e", "expression", arg=True),
        Opt("f", "f", "file", arg=True),
        Opt("E", "E", "regexp-extended"),
        Opt("E", "r"),
        Opt("i", "i", "in-place", arg=True, optional=True),
        Opt("s", "s", "separate"),
        Opt("u", "u", "unbuffered"),
        Opt("z", "z", "null-data"),
        Opt("l", "l", "line-length", arg=True),
        Opt("posix", "", "posix"),
        Opt("debug", "", "debug"),
        Opt("sandbox", "", "sandbox"),
        Opt("follow", "", "follow-symlinks"),
        Opt("b", "b", "binary"),
    ]
)


def sed(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, operands = _SPEC.parse(args)
    except UsageError as err:
        return usage_result("sed", err)
    quiet = ere = False
    scripts: list[str] = []
    sep = "\n"
    line_wrap = 70
    for key, value in opts:
        if key == "n":
            quiet = True
        elif key == "e":
            scripts.append(value)
        elif key == "f":
            return CommandResult("", f"sed: couldn't open file {value}: {FS_DISABLED}\n", 1)
        elif key == "E":
            ere = True
        elif key == "i":
            return CommandResult("", f"sed: -i: {FS_DISABLED}\n", 4)
        elif key == "z":
            sep = "\0"
        elif key == "l":
            if not value.isdigit():
                return CommandResult("", f"sed: invalid line length: {value}\n", 1)
            line_wrap = clamped_count(value) if value.isascii() else int(value)
    if not scripts:
        if not operands:
            return CommandResult(
                "",
                "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...\n",
                1,
            )
        scripts.append(operands[0])
        operands = operands[1:]
    script = "\n".join(scripts)
    if script.startswith("#n\n") or script == "#n":
        quiet = True
    try:
        commands = parse_script(script, ere)
    except SedError as err:
        return CommandResult("", f"sed: {err.message}\n", err.status)
    files = [f for f in operands if f != "-"]
    if files:
        text = "".join(f"sed: can't read {f}: {FS_DISABLED}\n" for f in files)
        if "-" not in operands:
            return CommandResult("", text, 2)
    try:
        out, errors, status = run_script(commands, stdin or "", quiet, sep, line_wrap)
    except SedError as exc:
        return CommandResult("", f"sed: {exc.message}\n", 4)
    if files:
        return CommandResult(out, text + errors, 2)
    return CommandResult(out, errors, status)
