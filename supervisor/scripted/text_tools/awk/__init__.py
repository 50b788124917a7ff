"""``awk`` (gawk 5 compatible) over stdin: lexer, parser, closure compiler, runtime.

Options: ``-F fs``, ``-v var=value``, ``-e``/``--source`` program text, ``--`` and the
harmless gawk switches. File operands, ``-f``, ``-i``/``-l`` and every redirection or
pipe other than ``/dev/stdout``/``/dev/stderr`` are refused (gawk's ``--sandbox``
wording); ``var=value`` operands are assignments, as in awk.
"""

from __future__ import annotations

from functools import lru_cache

from supervisor.scripted.contract import CommandResult

from ..common import FS_DISABLED, OutputLimitError
from .compiler import Compiler
from .lexer import AwkSyntaxError, unescape_string
from .parser import Program, parse
from .runtime import AwkFatal, ExitProgram, NextFile, NextRecord, Runtime
from .values import StrNum, truthy

_VALUE_OPTIONS = {"-F": "F", "-v": "v", "-f": "f", "-e": "e", "-i": "i", "-l": "l", "-E": "f"}
_LONG_VALUE_OPTIONS = {
    "--field-separator": "F",
    "--assign": "v",
    "--file": "f",
    "--source": "e",
    "--include": "i",
    "--load": "l",
    "--exec": "f",
}
_FLAG_LETTERS = set("bcCdDghLnNoOpPrsStMVY")


class _Usage(Exception):
    pass


def _parse_args(args: list[str]) -> tuple[list[tuple[str, str]], str | None, list[str]]:
    opts: list[tuple[str, str]] = []
    i = 0
    n = len(args)
    sources: list[str] = []
    while i < n:
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in _LONG_VALUE_OPTIONS:
                if not eq:
                    i += 1
                    if i >= n:
                        raise _Usage(f"option `{name}' requires an argument")
                    value = args[i]
                key = _LONG_VALUE_OPTIONS[name]
                if key == "e":
                    sources.append(value)
                else:
                    opts.append((key, value))
            elif name in ("--version", "--help"):
                opts.append((name, ""))
            # other long switches (--sandbox, --posix, --lint...) change nothing here
            i += 1
            continue
        flag = arg[:2]
        if flag in _VALUE_OPTIONS:
            value = arg[2:]
            if not value:
                i += 1
                if i >= n:
                    raise _Usage(f"option requires an argument -- {flag[1]}")
                value = args[i]
            key = _VALUE_OPTIONS[flag]
            if key == "e":
                sources.append(value)
            else:
                opts.append((key, value))
            i += 1
            continue
        if all(ch in _FLAG_LETTERS for ch in arg[1:]):
            if "V" in arg:
                opts.append(("--version", ""))
            i += 1
            continue
        raise _Usage(f"invalid option -- '{arg[1]}'")
    rest = list(args[i:])
    program: str | None = "\n".join(sources) if sources else None
    return opts, program, rest


def _field_separator(value: str) -> str:
    # gawk takes "-Ft" literally (POSIX's tab special case applies only with --posix).
    return unescape_string(value)


def _assign(rt: Runtime, text: str) -> bool:
    name, eq, value = text.partition("=")
    if (
        not eq
        or not name
        or not (name[0].isalpha() or name[0] == "_")
        or not all(ch.isalnum() or ch == "_" for ch in name)
    ):
        return False
    rt.set_special(name, StrNum(unescape_string(value)))
    return True


def awk(args: list[str], stdin: str | None) -> CommandResult:
    try:
        opts, program_text, operands = _parse_args(args)
    except _Usage as exc:
        usage = "Usage: awk [POSIX or GNU style options] -f progfile [--] file ...\n"
        return CommandResult("", f"awk: {exc}\n{usage}", 2)
    for key, value in opts:
        if key == "--version":
            return CommandResult("GNU Awk 5.2.1 (sandvisor)\n", "", 0)
        if key == "--help":
            return CommandResult("Usage: awk [POSIX or GNU style options] 'program' [--]\n", "", 0)
        if key == "f":
            return CommandResult(
                "", f"awk: fatal: can't open source file `{value}' for reading: {FS_DISABLED}\n", 2
            )
        if key in ("i", "l"):
            return CommandResult("", f"awk: fatal: can't open `{value}': {FS_DISABLED}\n", 2)
    if program_text is None:
        if not operands:
            return CommandResult(
                "", "Usage: awk [POSIX or GNU style options] -f progfile [--] file ...\n", 2
            )
        program_text = operands.pop(0)
    try:
        program = parse(program_text)
    except AwkSyntaxError as err:
        return CommandResult("", _syntax_message(program_text, err), 1)
    rt = Runtime(stdin or "")
    rt.pace(len(program_text))
    for key, value in opts:
        if key == "F":
            rt.vars["FS"] = _field_separator(value)
        elif key == "v" and not _assign(rt, value):
            return CommandResult(
                "", f"awk: fatal: `{value}' argument to `-v' not in `var=value' form\n", 2
            )
    files = []
    assignments = []
    for operand in operands:
        if "=" in operand and _looks_like_assignment(operand):
            assignments.append(operand)
        elif operand != "-":
            files.append(operand)
    if files:
        message = f"awk: fatal: cannot open file `{files[0]}' for reading: {FS_DISABLED}\n"
        return CommandResult("", message, 2)
    return _run(program, rt, assignments)


def reads_stdin(args: list[str]) -> bool:
    """Does awk read standard input? Not for a program of ``BEGIN`` actions alone (no
    rules, no ``END``) that never calls ``getline``, nor for a usage or syntax error."""
    try:
        opts, program_text, operands = _parse_args(args)
    except _Usage:
        return False
    if any(key in ("--version", "--help", "f") for key, _ in opts):
        return False
    if program_text is None:
        if not operands:
            return False
        program_text = operands[0]
    return _program_reads(program_text)


@lru_cache(maxsize=256)
def _program_reads(program_text: str) -> bool:
    if "getline" in program_text:
        return True
    try:
        program = parse(program_text)
    except AwkSyntaxError:
        return False
    return bool(program.rules or program.end)


def _looks_like_assignment(text: str) -> bool:
    name = text.partition("=")[0]
    return (
        bool(name)
        and (name[0].isalpha() or name[0] == "_")
        and all(ch.isalnum() or ch == "_" for ch in name)
    )


def _syntax_message(source: str, err: AwkSyntaxError) -> str:
    lines = source.split("\n")
    line = lines[err.line - 1] if 0 < err.line <= len(lines) else ""
    prefix = f"awk: cmd. line:{err.line}: "
    if err.message == "syntax error":
        return f"{prefix}{line}\n{prefix}{' ' * err.column}^ syntax error\n"
    return f"{prefix}{line}\n{prefix}{' ' * err.column}^ {err.message}\n"


def _run(program: Program, rt: Runtime, assignments: list[str]) -> CommandResult:
    status = 0
    try:
        compiler = Compiler(program, rt)
        compiler.compile_functions()
        begin = [compiler.stmt(node) for node in program.begin]
        rules = [
            (
                compiler.expr(pattern) if pattern is not None else None,
                compiler.expr(end) if end is not None else None,
                compiler.stmt(action) if action is not None else None,
            )
            for pattern, end, action in program.rules
        ]
        end_actions = [compiler.stmt(node) for node in program.end]
    except AwkFatal as exc:
        return CommandResult("", f"awk: cmd. line:1: fatal: {exc}\n", 2)
    except AwkSyntaxError as err:
        return CommandResult("", f"awk: cmd. line:1: error: {err.message}\n", 1)
    except RecursionError:
        return CommandResult("", "awk: cmd. line:1: fatal: program nested too deeply\n", 2)
    try:
        exited = False
        try:
            for action in begin:
                action(None)
            for assignment in assignments:
                _assign(rt, assignment)
            if rules or end_actions:
                _main_loop(rt, rules)
        except ExitProgram as ex:
            exited = True
            if ex.status is not None:
                status = ex.status
        del exited
        try:
            for action in end_actions:
                action(None)
        except ExitProgram as ex:
            if ex.status is not None:
                status = ex.status
    except AwkFatal as exc:
        return CommandResult("".join(rt.out), "".join(rt.err) + _fatal(rt, str(exc)), 2)
    except RecursionError:
        message = _fatal(rt, "function call nesting too deep")
        return CommandResult("".join(rt.out), "".join(rt.err) + message, 2)
    except OutputLimitError:
        raise
    return CommandResult("".join(rt.out), "".join(rt.err), status & 0xFF)


def _fatal(rt: Runtime, message: str) -> str:
    nr = rt.vars.get("FNR", 0.0)
    where = f"(FILENAME=- FNR={int(nr)}) " if isinstance(nr, float) and nr else ""
    return f"awk: cmd. line:1: {where}fatal: {message}\n"


def _main_loop(rt: Runtime, rules: list) -> None:  # type: ignore[type-arg]
    active = [False] * len(rules)
    read = rt.read_record
    set_record = rt.set_record
    if len(rules) == 1 and rules[0][0] is None and rules[0][2] is not None:
        # The common shape "{ action }": no pattern to test.
        action = rules[0][2]
        while (text := read()) is not None:
            set_record(text)
            try:
                action(None)
            except NextRecord:
                continue
            except NextFile:
                return
        return
    while True:
        text = read()
        if text is None:
            return
        set_record(text)
        try:
            for index, (pattern, end, action) in enumerate(rules):
                if pattern is None:
                    matched = True
                elif end is None:
                    matched = truthy(pattern(None))
                elif active[index]:
                    matched = True
                    if truthy(end(None)):
                        active[index] = False
                elif truthy(pattern(None)):
                    matched = True
                    active[index] = not truthy(end(None))
                else:
                    matched = False
                if matched:
                    if action is None:
                        rt.write(rt.get_record() + str(rt.vars["ORS"]))
                    else:
                        action(None)
        except NextRecord:
            continue
        except NextFile:
            return
