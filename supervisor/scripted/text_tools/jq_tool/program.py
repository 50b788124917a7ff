"""The jq program as libjq runs it: the user's filter wrapped, checked and compiled once.

The user's filter runs inside a small driver (``wrap``):

* every input is one element of a slurped array whose first element is the context
  (``--arg`` values, ``$ARGS``, ``$ENV``), so a filter compiled once serves every call
  whatever its arguments: a loop of ``jq --arg id "$i" ...`` compiles one program;
* every output is tagged ``[0, v]``, an uncaught error ``[1, e]`` (caught by the driver,
  because the ``jq`` package's iterator cannot continue after an error) and the end of
  each input ``[2]``, which is what jq 1.6's per-input exit status needs.

Definitions are prepended only when the filter mentions them: jq 1.6 builtins that
libjq 1.8 lacks or changed (``leaf_paths``, ``ltrimstr`` on non-strings...), ``halt``
and ``halt_error`` (turned into tagged errors), ``inputs``, and the host-facing ones
made harmless (``$ENV``/``env`` are ``{}``, ``debug``/``stderr`` print nothing,
``get_search_list``/``modulemeta`` know no modules). Module directives are refused: they
would read files.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import jq

from ..common import FS_DISABLED

HALT_KEY = "__sandvisor_halt__"

_COMPAT: dict[str, str] = {
    "ltrimstr": 'def ltrimstr($x): if type == "string" and ($x|type) == "string" and '
    "startswith($x) then .[($x|length):] else . end;",
    "rtrimstr": 'def rtrimstr($x): if type == "string" and ($x|type) == "string" and '
    "endswith($x) and ($x|length) > 0 then .[:length - ($x|length)] else . end;",
    "leaf_paths": "def leaf_paths: paths(scalars);",
    "recurse_down": "def recurse_down: recurse;",
    "scalars_or_empty": "def scalars_or_empty: select(. == null or . == true or "
    '. == false or type == "number" or type == "string" or '
    '((type=="array" or type=="object") and length==0));',
    "pow10": "def pow10: pow(10; .);",
    "halt_error": f'def halt_error($code): error({{"{HALT_KEY}": [., $code]}}); '
    "def halt_error: halt_error(5);",
    "halt": f'def halt: error({{"{HALT_KEY}": null}});',
    "debug": "def debug: .; def debug(msg): .;",
    "stderr": "def stderr: .;",
    "input_filename": "def input_filename: $__sv.fname;",
    "limit": "def limit($n; f): if $n > 0 then label $__sv_out | foreach f as $item "
    "(0; . + 1; $item, if . >= $n then break $__sv_out else empty end) elif $n == 0 "
    "then empty else f end;",
    "get_search_list": "def get_search_list: [];",
    "get_jq_origin": "def get_jq_origin: null;",
    "get_prog_origin": "def get_prog_origin: null;",
    "modulemeta": 'def modulemeta: error("modulemeta is not supported: filesystem access '
    'disabled");',
}

_WORDS = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT = re.compile(r"#[^\n]*")
_MODULE = re.compile(r"(?<![.\w$])(?:import|include)\s*\"")


class ProgramError(Exception):
    """The filter cannot run: the message (jq 1.6 style) and the exit status."""

    def __init__(self, message: str, status: int = 3) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True, slots=True)
class Shape:
    """Everything about a call that changes the wrapped program's text."""

    null_input: bool
    slurp_json: bool
    arg_names: tuple[str, ...]
    #: Input numbers must become plain doubles (``. + 0``) so that ``tostring`` prints
    #: them as jq 1.6 did, not as the literal libjq kept.
    renumber: bool = False


def words(program: str) -> set[str]:
    return set(_WORDS.findall(_COMMENT.sub("", program)))


def check(program: str) -> set[str]:
    """The words of ``program``; refuses module directives and ``input``."""
    found = words(program)
    if ("import" in found or "include" in found) and _MODULE.search(program):
        raise ProgramError(
            f"jq: error: modules are not supported: {FS_DISABLED}\njq: 1 compile error"
        )
    if "input" in found:
        raise ProgramError(
            "jq: error: input/0 is not supported (use inputs, or -s)\njq: 1 compile error"
        )
    return found


def wrap(program: str, shape: Shape, found: set[str]) -> str:
    """The driver around the user's filter (see the module docstring). Everything before
    the filter stays on its first line, so line numbers in messages are the user's."""
    head = [".[0] as $__sv | ", definitions(found)]
    for name in shape.arg_names:
        if _IDENT.fullmatch(name) and name not in ("__sv", "__sv_in"):
            head.append(f'$__sv.named["{name}"] as ${name} | ')
    head.append("$__sv.args as $ARGS | $__sv.env as $ENV | def env: $ENV; ")
    inputs = "[.[1:]]" if shape.slurp_json else ".[1:]"
    if shape.renumber:
        inputs = f"({inputs} | (.. | numbers) |= . + 0)"
    head.append(f"{inputs} as $__sv_in | ")
    body = f"(try (({program}\n) | [0, .]) catch [1, .]), [2]"
    uses_inputs = "inputs" in found
    if shape.null_input:
        head.append("def inputs: $__sv_in[], ($__sv.perr // empty | error(.)); null | ")
        return "".join(head) + body
    if uses_inputs:
        head.append(
            "if ($__sv_in|length) == 0 then empty else "
            "$__sv_in[1:] as $__sv_rest | "
            "def inputs: $__sv_rest[], ($__sv.perr // empty | error(.)); $__sv_in[0] | "
        )
        return "".join(head) + body + " end"
    head.append("$__sv_in[] | ")
    return "".join(head) + body


def definitions(found: set[str]) -> str:
    """The compatibility definitions the filter needs (on one line, no newline)."""
    return "".join(text for name, text in _COMPAT.items() if name in found)


@functools.lru_cache(maxsize=128)
def compile_wrapped(text: str, program: str, found: frozenset[str], names: tuple[str, ...]) -> Any:
    """The compiled program (a bounded LRU: scripts call the same filters in loops)."""
    try:
        return jq.compile(text)
    except ValueError as exc:
        message = str(exc)
    # Report the error as the filter alone has it (not inside the driver's parentheses).
    bound = {name: None for name in names if _IDENT.fullmatch(name)}
    bound.update({"ARGS": None, "__sv": None, "__sv_in": None})
    try:
        jq.compile(definitions(set(found)) + program, args=bound)
    except ValueError as exc:
        message = str(exc)
    raise ProgramError(compile_error(message, program))


_LOCATION = re.compile(r"^(jq: error: .*) at <top-level>, line (\d+)(?:, column \d+)?:$")


def compile_error(raw: str, program: str) -> str:
    """libjq 1.8's compile error in jq 1.6's layout: the message, then the program line
    the error is on (1.8 adds a column, the source line indented and carets)."""
    lines = raw.splitlines()
    out: list[str] = []
    source = program.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _LOCATION.match(line)
        if m:
            message = m.group(1).replace("unexpected end of file", "unexpected $end")
            number = int(m.group(2))
            out.append(f"{message} at <top-level>, line {number}:")
            out.append(source[number - 1] if 0 < number <= len(source) else "")
            i += 1
            # Skip 1.8's indented source line and caret line.
            while i < len(lines) and lines[i].startswith("    "):
                i += 1
            continue
        if line.strip():
            out.append(line)
        i += 1
    if not out or not out[-1].startswith("jq: ") or "compile error" not in out[-1]:
        out.append("jq: 1 compile error")
    return "\n".join(out)


_INDEX_STRING = re.compile(r'^(Cannot index \S+ with string) \((".*")\)$', re.DOTALL)
_INDEX_OTHER = re.compile(r"^(Cannot index \S+ with \S+) \(.*\)$", re.DOTALL)
_TONUMBER = re.compile(r'^string \("(.*)"\) cannot be parsed as a number$', re.DOTALL)


def runtime_message(message: str) -> str:
    """libjq 1.8's runtime error wording, in jq 1.6's where they differ."""
    m = _INDEX_STRING.match(message)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    m = _INDEX_OTHER.match(message)
    if m:
        return m.group(1)
    m = _TONUMBER.match(message)
    if m:
        text = m.group(1)
        return (
            f"Invalid numeric literal at EOF at line 1, column {len(text)} (while parsing '{text}')"
        )
    return message
