"""Core shell builtins: echo, true/false/:, exit/return/break/continue, set, shift,
eval, let, type, command, builtin, env/printenv, trap, wait, getopts and a few no-ops.

A builtin is ``fn(sh, args) -> int`` (or an awaitable for the few that run code); it
writes to ``sh.out``/``sh.err`` and reads ``sh.stdin`` directly.

Differential cases: ``cases_builtins.txt``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ...errors import BreakLoop, ContinueLoop, ExitShell, ReturnFromFunction, ShellError
from ...integers import decimal64
from ...syntax.printer import format_function
from ...syntax.word_parser import decode_ansi_c
from ..arithmetic import ArithError, compile_arith
from ..jobs import wait_jobs
from ..options import (
    SET_LETTERS,
    SET_LISTED,
    SHOPT_NAMES,
    option_state,
    set_option,
    set_shopt,
    shopt_state,
)
from ..param_ops import format_declare, quote_single

if TYPE_CHECKING:
    from ..interpreter import Interpreter

KEYWORDS = frozenset(
    [
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "select",
        "while",
        "until",
        "do",
        "done",
        "in",
        "function",
        "time",
        "{",
        "}",
        "!",
        "[[",
        "]]",
        "coproc",
    ]
)


def echo(sh: Interpreter, args: list[str]) -> int:
    newline = True
    escapes = False
    i = 0
    while i < len(args):
        a = args[i]
        if len(a) < 2 or a[0] != "-" or any(c not in "neE" for c in a[1:]):
            break
        for c in a[1:]:
            if c == "n":
                newline = False
            elif c == "e":
                escapes = True
            else:
                escapes = False
        i += 1
    text = " ".join(args[i:]) if i else " ".join(args)
    if escapes and "\\" in text:
        cut = text.find("\\c")
        if cut >= 0:
            text = text[:cut]
            newline = False
        text = decode_ansi_c(text.replace("\\0", "\\"))
    sh.out.write(text + "\n" if newline else text)
    return 0


def true(sh: Interpreter, args: list[str]) -> int:
    return 0


def false(sh: Interpreter, args: list[str]) -> int:
    return 1


def _number(sh: Interpreter, name: str, text: str) -> int | None:
    value = decimal64(text)
    if value is None:
        sh.error(f"{name}: {text}: numeric argument required")
    return value


def exit_(sh: Interpreter, args: list[str]) -> int:
    status = sh.status
    if args:
        n = _number(sh, "exit", args[0])
        status = 2 if n is None else n & 255
    raise ExitShell(status)


def return_(sh: Interpreter, args: list[str]) -> int:
    if sh.func_depth == 0:
        sh.error("return: can only `return' from a function or sourced script")
        return 2
    status = sh.status
    if args:
        n = _number(sh, "return", args[0])
        status = 2 if n is None else n & 255
    raise ReturnFromFunction(status)


def _loop_control(sh: Interpreter, args: list[str], name: str) -> int:
    if sh.loop_depth == 0:
        if sh.silent_loops:
            return 0
        sh.error(f"{name}: only meaningful in a `for', `while', or `until' loop")
        return 0
    levels = 1
    if args:
        n = _number(sh, name, args[0])
        if n is None:
            raise ExitShell(128)
        if n < 1:
            sh.error(f"{name}: {args[0]}: loop count out of range")
            return 1
        levels = min(n, sh.loop_depth)
    if name == "break":
        raise BreakLoop(levels)
    raise ContinueLoop(levels)


def break_(sh: Interpreter, args: list[str]) -> int:
    return _loop_control(sh, args, "break")


def continue_(sh: Interpreter, args: list[str]) -> int:
    return _loop_control(sh, args, "continue")


def set_(sh: Interpreter, args: list[str]) -> int:
    if not args:
        for name in sorted(sh.vars):
            v = sh.vars[name]
            if v.value is None:
                continue
            line = format_declare(name, v).split(" ", 2)[2]
            sh.out.write(line + "\n")
        return 0
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            sh.positional = args[i + 1 :]
            return 0
        if a in ("-o", "+o"):
            on = a == "-o"
            if i + 1 >= len(args):
                _print_options(sh, on)
                return 0
            name = args[i + 1]
            if name not in SET_LISTED:
                sh.error(f"set: {name}: invalid option name")
                return 2
            set_option(sh, name, on)
            i += 2
            continue
        if len(a) > 1 and a[0] in "-+" and a != "-":
            on = a[0] == "-"
            for c in a[1:]:
                attr = SET_LETTERS.get(c)
                if c == "o":
                    i += 1
                    if i >= len(args):
                        _print_options(sh, on)
                        return 0
                    if args[i] not in SET_LISTED:
                        sh.error(f"set: {args[i]}: invalid option name")
                        return 2
                    set_option(sh, args[i], on)
                elif attr is not None:
                    setattr(sh, attr, on)
                elif c not in "hBHmbvnkPT":
                    sh.error(f"set: {a[0]}{c}: invalid option")
                    return 2
            i += 1
            continue
        sh.positional = args[i:]
        return 0
    return 0


def _print_options(sh: Interpreter, long_form: bool) -> None:
    for name in SET_LISTED:
        on = option_state(sh, name)
        if long_form:
            sh.out.write(f"{name:<15}\t{'on' if on else 'off'}\n")
        else:
            sh.out.write(f"set {'-' if on else '+'}o {name}\n")


def shift(sh: Interpreter, args: list[str]) -> int:
    n = 1
    if args:
        m = _number(sh, "shift", args[0])
        if m is None:
            return 1
        n = m
    if n < 0:
        sh.error(f"shift: {args[0]}: shift count out of range")
        return 1
    if n > len(sh.positional):
        return 1
    sh.positional = sh.positional[n:]
    return 0


def eval_(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    text = " ".join(args)
    if not text.strip():
        return 0
    return sh.run_string(text)


def let(sh: Interpreter, args: list[str]) -> int:
    if not args:
        sh.error("let: expression expected")
        return 1
    value = 0
    for a in args:
        try:
            value = compile_arith(a)(sh)
        except ArithError as exc:
            sh.error("let: " + exc.render(a))
            return 1
    return 0 if value else 1


def _describe(sh: Interpreter, name: str) -> str | None:
    if name in sh.functions:
        return "function"
    if name in KEYWORDS:
        return "keyword"
    if sh.ctx.resolve(name) is not None:
        return "builtin"
    return None


def type_(sh: Interpreter, args: list[str]) -> int:
    terse = False
    names: list[str] = []
    for a in args:
        if a.startswith("-") and len(a) > 1 and not names:
            terse = terse or "t" in a
            continue
        names.append(a)
    status = 0
    for name in names:
        kind = _describe(sh, name)
        if kind is None:
            if not terse:
                sh.error(f"type: {name}: not found")
            status = 1
        elif terse:
            sh.out.write(kind + "\n")
        elif kind == "function":
            sh.out.write(f"{name} is a function\n{function_text(sh, name)}\n")
        else:
            label = "shell keyword" if kind == "keyword" else "shell builtin"
            sh.out.write(f"{name} is a {label}\n")
    return status


def function_text(sh: Interpreter, name: str) -> str:
    return format_function(sh.functions[name])


def command(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    verbose = None
    while args and args[0].startswith("-") and len(args[0]) > 1:
        if args[0] == "--":
            args = args[1:]
            break
        if "v" in args[0]:
            verbose = "v"
        elif "V" in args[0]:
            verbose = "V"
        args = args[1:]
    if not args:
        return 0
    if verbose:
        status = 0
        for name in args:
            kind = _describe(sh, name)
            if kind is None:
                if verbose == "V":
                    sh.error(f"command: {name}: not found")
                status = 1
            elif verbose == "v":
                sh.out.write(name + "\n")
            else:
                label = {"function": "a function", "keyword": "a shell keyword"}.get(
                    kind, "a shell builtin"
                )
                sh.out.write(f"{name} is {label}\n")
        return status
    return _run_without_functions(sh, args)


async def _run_without_functions(sh: Interpreter, args: list[str]) -> int:
    saved = sh.functions
    fn = saved.get(args[0])
    if fn is None:
        return await sh.invoke(args)
    sh.functions = {k: v for k, v in saved.items() if k != args[0]}
    try:
        return await sh.invoke(args)
    finally:
        sh.functions = saved


def builtin(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    if not args:
        return 0
    impl = sh.ctx.builtins.get(args[0])
    if impl is None:
        sh.error(f"builtin: {args[0]}: not a shell builtin")
        return 1
    return sh.run_builtin(impl, args)


def env(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    assigns: dict[str, str] = {}
    i = 0
    while i < len(args) and "=" in args[i] and not args[i].startswith("="):
        k, _, v = args[i].partition("=")
        assigns[k] = v
        i += 1
    if i < len(args):
        return _env_run(sh, assigns, args[i:])
    exported = sh.exported()
    exported.update(assigns)
    for k in sorted(exported):
        sh.out.write(f"{k}={exported[k]}\n")
    return 0


async def _env_run(sh: Interpreter, assigns: dict[str, str], argv: list[str]) -> int:
    saved = {k: sh.vars.get(k) for k in assigns}
    try:
        for k, v in assigns.items():
            sh.vars.pop(k, None)
            sh.assign(k, v)
        return await sh.invoke(argv)
    finally:
        for k, old in saved.items():
            if old is None:
                sh.vars.pop(k, None)
            else:
                sh.vars[k] = old


def printenv(sh: Interpreter, args: list[str]) -> int:
    exported = sh.exported()
    if not args:
        for k in sorted(exported):
            sh.out.write(f"{k}={exported[k]}\n")
        return 0
    status = 0
    for name in args:
        if name in exported:
            sh.out.write(exported[name] + "\n")
        else:
            status = 1
    return status


def trap(sh: Interpreter, args: list[str]) -> int:
    if not args or args[0] == "-p":
        wanted = {_signal_name(a) for a in args[1:]}
        for sig, handler in sh.traps.items():
            if not wanted or sig in wanted:
                sh.out.write(f"trap -- {quote_single(handler)} {sig}\n")
        return 0
    if args[0] == "-l":
        sh.out.write(" 0) EXIT\n")
        return 0
    if args[0] == "--":
        args = args[1:]
        if not args:
            return 0
    handler, signals = args[0], args[1:]
    if not signals:
        signals, handler = [handler], "-"
    for sig in signals:
        name = _signal_name(sig)
        if handler == "-":
            sh.traps.pop(name, None)
        else:
            sh.traps[name] = handler
            if name == "ERR":
                sh.err_trap_depth = sh.func_depth
    return 0


def _signal_name(sig: str) -> str:
    name = sig.upper().removeprefix("SIG")
    return "EXIT" if name == "0" else name


def wait(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    return wait_jobs(sh, args)


def time_(sh: Interpreter, args: list[str]) -> Awaitable[int] | int:
    """``time [-p] command``: runs it and reports the wall time on stderr (CPU times are
    ``unavailable``, as in the peer). ``-o file`` is refused: no files."""
    posix = False
    while args and args[0].startswith("-") and len(args[0]) > 1:
        if args[0] in ("-o", "--output") or args[0].startswith("--output="):
            sh.err.write("time: output files disabled\n")
            return 1
        if args[0] == "--":
            args = args[1:]
            break
        posix = posix or args[0] == "-p"
        args = args[1:]
    return _timed(sh, args, posix)


async def _timed(sh: Interpreter, argv: list[str], posix: bool) -> int:
    start = time.monotonic()
    status = await sh.invoke(argv) if argv else 0
    elapsed = time.monotonic() - start
    if posix:
        sh.err.write(f"real {elapsed:.2f}\nuser unavailable\nsys unavailable\n")
    else:
        minutes, seconds = divmod(elapsed, 60)
        sh.err.write(
            f"\nreal\t{int(minutes)}m{seconds:.3f}s\nuser\tunavailable\nsys\tunavailable\n"
        )
    return status


def times(sh: Interpreter, args: list[str]) -> int:
    sh.out.write("0m0.000s 0m0.000s\n0m0.000s 0m0.000s\n")
    return 0


def noop(sh: Interpreter, args: list[str]) -> int:
    return 0


def shopt(sh: Interpreter, args: list[str]) -> int:
    """``shopt [-pqsuo] [name ...]``: extglob and nocasematch change matching, the rest
    are remembered; with ``-o`` the names are ``set -o`` options."""
    flags = ""
    names: list[str] = []
    for a in args:
        if not names and len(a) > 1 and a[0] == "-" and set(a[1:]) <= set("spquo"):
            flags += a[1:]
        elif not names and a == "--":
            continue
        else:
            names.append(a)
    mode = "s" if "s" in flags else "u" if "u" in flags else ""
    if "s" in flags and "u" in flags:
        sh.error("shopt: cannot set and unset shell options simultaneously")
        return 1
    known = SET_LISTED if "o" in flags else SHOPT_NAMES
    status = 0
    for name in names:
        if name not in known:
            what = "option name" if "o" in flags else "shell option name"
            sh.error(f"shopt: {name}: invalid {what}")
            status = 1
    if names and status:
        return status
    if mode and names:
        for name in names:
            if "o" in flags:
                set_option(sh, name, mode == "s")
            else:
                set_shopt(sh, name, mode == "s")
        return status
    state = option_state if "o" in flags else shopt_state
    listed = names or [n for n in known if not mode or state(sh, n) == (mode == "s")]
    for name in listed:
        on = state(sh, name)
        if names and not on:
            status = 1
        if "q" in flags:
            continue
        if "p" in flags:
            if "o" in flags:
                sh.out.write(f"set {'-' if on else '+'}o {name}\n")
            else:
                sh.out.write(f"shopt {'-s' if on else '-u'} {name}\n")
        else:
            sh.out.write(f"{name:<15}\t{'on' if on else 'off'}\n")
    return status


def caller(sh: Interpreter, args: list[str]) -> int:
    """``caller [n]``: where the current function (or the n-th caller) was called from,
    in the script file ``bash`` (``main`` is the top level)."""
    calls = sh.call_lines
    if not args:
        sh.out.write(f"{calls[-1]} bash\n" if calls else "0 NULL\n")
        return 0
    try:
        n = int(args[0])
    except ValueError:
        sh.error(f"caller: {args[0]}: invalid number")
        return 2
    if n < 0 or n >= len(calls):
        return 1
    names = sh.funcnames
    func = names[-2 - n] if n + 2 <= len(names) else "main"
    sh.out.write(f"{calls[-1 - n]} {func} bash\n")
    return 0


def alias(sh: Interpreter, args: list[str]) -> int:
    return 0


def getopts(sh: Interpreter, args: list[str]) -> int:
    if len(args) < 2:
        sh.error("getopts: usage: getopts optstring name [arg ...]")
        return 2
    spec, name = args[0], args[1]
    argv = args[2:] if len(args) > 2 else list(sh.positional)
    silent = spec.startswith(":")
    if silent:
        spec = spec[1:]
    optind = decimal64(sh.get("OPTIND") or "1") or 1
    if optind < 1:
        optind = 1
    if optind != sh.getopts_ind:
        sh.getopts_pos = 0
    pos = sh.getopts_pos
    sh.vars.pop("OPTARG", None)
    if optind > len(argv):
        return _getopts_done(sh, name, optind)
    arg = argv[optind - 1]
    if pos == 0:
        if arg == "--":
            return _getopts_done(sh, name, optind + 1)
        if not arg.startswith("-") or arg == "-":
            return _getopts_done(sh, name, optind)
        pos = 1
    opt = arg[pos]
    pos += 1
    if pos >= len(arg):
        optind += 1
        pos = 0
    idx = spec.find(opt)
    if idx < 0 or opt == ":":
        sh.assign(name, "?")
        if silent:
            sh.assign("OPTARG", opt)
        else:
            sh.error(f"illegal option -- {opt}")
        return _getopts_step(sh, optind, pos)
    if idx + 1 < len(spec) and spec[idx + 1] == ":":
        if pos:
            sh.assign("OPTARG", arg[pos:])
            optind += 1
            pos = 0
        elif optind <= len(argv):
            sh.assign("OPTARG", argv[optind - 1])
            optind += 1
        else:
            if silent:
                sh.assign(name, ":")
                sh.assign("OPTARG", opt)
            else:
                sh.assign(name, "?")
                sh.error(f"option requires an argument -- {opt}")
            return _getopts_step(sh, optind, pos)
    sh.assign(name, opt)
    return _getopts_step(sh, optind, pos)


def _getopts_step(sh: Interpreter, optind: int, pos: int) -> int:
    sh.assign("OPTIND", str(optind))
    sh.getopts_pos = pos
    sh.getopts_ind = optind
    return 0


def _getopts_done(sh: Interpreter, name: str, optind: int) -> int:
    sh.assign(name, "?")
    sh.assign("OPTIND", str(optind))
    sh.getopts_pos = 0
    sh.getopts_ind = optind
    return 1


def unsupported(message: str):  # type: ignore[no-untyped-def]
    def run(sh: Interpreter, args: list[str]) -> int:
        raise ShellError(message)

    return run


CORE_BUILTINS = {
    "echo": echo,
    "true": true,
    "false": false,
    ":": true,
    "exit": exit_,
    "return": return_,
    "break": break_,
    "continue": continue_,
    "set": set_,
    "shift": shift,
    "eval": eval_,
    "let": let,
    "type": type_,
    "command": command,
    "builtin": builtin,
    "env": env,
    "printenv": printenv,
    "trap": trap,
    "wait": wait,
    "times": times,
    "time": time_,
    "hash": noop,
    "alias": alias,
    "unalias": noop,
    "shopt": shopt,
    "caller": caller,
    "getopts": getopts,
}
