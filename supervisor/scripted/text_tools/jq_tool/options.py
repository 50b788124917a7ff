"""The jq 1.6 command line: options anywhere, short flags clustered, the filter first.

Follows jq 1.6's ``main.c``: the first non-option argument is the filter (``.`` when
there is none, as jq does when stdin is not a terminal), later ones are files, or
positional values after ``--args``/``--jsonargs``. Output-format options apply in order
(``-c --tab`` prints with tabs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..common import FS_DISABLED

USAGE_HINT = (
    "Use jq --help for help with command-line options,\n"
    "or see the jq manpage, or online docs  at https://stedolan.github.io/jq\n"
)

USAGE = """Usage:\tjq [OPTIONS] FILTER [FILES...]
\tjq [OPTIONS] --args FILTER [STRINGS...]
\tjq [OPTIONS] --jsonargs FILTER [JSON_TEXTS...]

jq is a tool for processing JSON inputs, applying the given filter to
its JSON text inputs and producing the filter's results as JSON on
standard output (sandvisor: standard input only, no files or modules).

Some of the options include:
  -c               compact instead of pretty-printed output;
  -n               use `null` as the single input value;
  -e               set the exit status code based on the output;
  -s               read (slurp) all inputs into an array; apply filter to it;
  -r               output raw strings, not JSON texts;
  -j               like -r but no newline after each output;
  -a               output non-ASCII characters as escapes;
  -S               sort keys of objects on output;
  -R               read raw lines instead of JSON texts;
  --tab            use tabs for indentation;
  --indent n       use the given number of spaces (no more than 7) for indentation;
  --arg a v        set variable $a to value <v>;
  --argjson a v    set variable $a to JSON value <v>;
  --args           remaining arguments are string arguments, not files;
  --jsonargs       remaining arguments are JSON arguments, not files;
"""


class JqUsageError(Exception):
    """A command-line error: the message (without ``jq: ``) and the exit status."""

    def __init__(self, message: str, *, hint: bool = True, status: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.status = status

    def text(self) -> str:
        return f"jq: {self.message}\n" + (USAGE_HINT if self.hint else "")


@dataclass(slots=True)
class JqOptions:
    program: str = "."
    null_input: bool = False
    raw_input: bool = False
    slurp: bool = False
    raw_output: bool = False
    join_output: bool = False
    ascii_output: bool = False
    sort_keys: bool = False
    exit_status: bool = False
    #: None for compact output, an int for that many spaces, "\t" for tabs.
    indent: int | str | None = 2
    named: dict[str, object] = field(default_factory=dict)
    positional: list[object] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    help: bool = False
    version: bool = False


_SHORT = {
    "n": "null_input",
    "R": "raw_input",
    "s": "slurp",
    "r": "raw_output",
    "j": "join_output",
    "a": "ascii_output",
    "S": "sort_keys",
    "e": "exit_status",
    "C": "",
    "M": "",
    "h": "help",
}

_LONG = {
    "null-input": "null_input",
    "raw-input": "raw_input",
    "slurp": "slurp",
    "raw-output": "raw_output",
    "join-output": "join_output",
    "ascii-output": "ascii_output",
    "sort-keys": "sort_keys",
    "exit-status": "exit_status",
    "color-output": "",
    "monochrome-output": "",
    "unbuffered": "",
    "help": "help",
}


def _json_arg(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise JqUsageError(f"invalid JSON text passed to --{what}") from None


def parse_options(args: list[str]) -> JqOptions:
    opts = JqOptions()
    program: str | None = None
    from_file = False
    further: str | None = None  # "args" or "jsonargs" once given
    i = 0
    n = len(args)
    while i < n:
        text = args[i]
        i += 1
        if text.startswith("-") and len(text) > 1:
            if text.startswith("--"):
                name = text[2:]
                if name in _LONG:
                    attr = _LONG[name]
                    if attr:
                        setattr(opts, attr, True)
                    if name == "join-output":
                        opts.raw_output = True
                    continue
                if name == "compact-output":
                    opts.indent = None
                elif name == "tab":
                    opts.indent = "\t"
                elif name == "indent":
                    if i >= n:
                        raise JqUsageError("--indent takes one parameter")
                    opts.indent = _indent(args[i])
                    i += 1
                elif name in ("arg", "argjson", "slurpfile", "rawfile"):
                    if i + 1 >= n:
                        example = {"arg": "value", "argjson": "text"}.get(name, "filename")
                        raise JqUsageError(
                            f"--{name} takes two parameters (e.g. --{name} varname {example})"
                        )
                    key, value = args[i], args[i + 1]
                    i += 2
                    if name == "arg":
                        opts.named[key] = value
                    elif name == "argjson":
                        opts.named[key] = _json_arg(value, "argjson")
                    else:
                        raise JqUsageError(
                            f"Bad JSON in --{name} {key} {value}: Could not open {value}: "
                            f"{FS_DISABLED}",
                            hint=False,
                        )
                elif name in ("args", "jsonargs"):
                    further = name
                elif name == "from-file":
                    from_file = True
                elif name == "version":
                    opts.version = True
                elif name in ("seq", "stream", "run-tests", "debug-dump-disasm", "debug-trace"):
                    raise JqUsageError(f"--{name} is not supported", hint=False)
                else:
                    raise JqUsageError(f"Unknown option {text}")
                continue
            letters = text[1:]
            for pos, letter in enumerate(letters):
                if letter in _SHORT:
                    attr = _SHORT[letter]
                    if attr:
                        setattr(opts, attr, True)
                    if letter == "j":
                        opts.raw_output = True
                elif letter == "c":
                    opts.indent = None
                elif letter == "f":
                    from_file = True
                elif letter == "L":
                    # A module directory: modules are rejected anyway; skip its value.
                    if pos == len(letters) - 1:
                        i += 1
                    break
                else:
                    raise JqUsageError(f"Unknown option {text}")
            continue
        if program is None:
            program = text
        elif further == "args":
            opts.positional.append(text)
        elif further == "jsonargs":
            opts.positional.append(_json_arg(text, "jsonargs"))
        else:
            opts.files.append(text)
    if from_file:
        target = program if program is not None else ""
        raise JqUsageError(f"Could not open {target}: {FS_DISABLED}", hint=False)
    if program is not None:
        opts.program = program
    return opts


def _indent(text: str) -> int | str | None:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < -1 or value > 7:
        raise JqUsageError("--indent takes a number between -1 and 7")
    if value == -1:
        return "\t"
    return value or None


_READS_INPUT = re.compile(r"\binputs?\b")


def reads_stdin(args: list[str]) -> bool:
    """Does jq read standard input with these arguments? Not with ``-n`` (unless the
    filter calls ``input``/``inputs``), nor for a usage error, ``--help`` or ``--version``."""
    try:
        opts = parse_options(args)
    except JqUsageError:
        return False
    if opts.help or opts.version:
        return False
    return not opts.null_input or _READS_INPUT.search(opts.program) is not None
