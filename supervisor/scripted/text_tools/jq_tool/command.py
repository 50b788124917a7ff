"""``jq``: the jq 1.6 command over libjq (the ``jq`` package), reading stdin only.

This runs inside a jq engine child (``engine.py``), never in the host. One call: parse
the options, wrap and compile the filter (cached), feed libjq the context and the input
in one slurped text, then walk the tagged results the way jq 1.6's ``main.c`` does, per
input: print outputs, report an uncaught error as
``jq: error (at <stdin>:N): ...``, and keep the status of the *last* input (a jq 1.6
quirk: an error on an earlier input does not change the exit status).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jq as libjq

from supervisor.scripted.contract import CommandResult

from ..common import FS_DISABLED, check_size
from .inputs import canonical_numbers, error_position
from .options import USAGE, JqOptions, JqUsageError, parse_options
from .output import dump
from .program import (
    HALT_KEY,
    ProgramError,
    Shape,
    check,
    compile_wrapped,
    runtime_message,
    wrap,
)


class _ParseError(Exception):
    """Bad JSON in the input: jq's ``parse error: ...`` message."""


@dataclass(slots=True)
class _Run:
    """The output side of one jq call, filled while results arrive."""

    opts: JqOptions
    position: Any  # (index) -> str
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    size: int = 0
    err_size: int = 0
    ret: int = 0
    exact: bool = False
    current: int = 14
    index: int = 0

    def output(self, value: object) -> None:
        opts = self.opts
        if opts.raw_output and isinstance(value, str):
            text = dump(value, None, False, True) if opts.ascii_output else value
            self.current = 0
        else:
            self.current = 11 if value is None or value is False else 0
            text = dump(value, opts.indent, opts.sort_keys, opts.ascii_output)
        if not opts.join_output:
            text += "\n"
        self.size += len(text)
        check_size(self.size)
        self.out.append(text)

    def error(self, value: object) -> None:
        if isinstance(value, dict) and len(value) == 1 and HALT_KEY in value:
            self.halt(value[HALT_KEY])
            return
        if value is None:
            return  # jq 1.6: error(null) ends this input's results without a message
        at = self.position(self.index)
        if isinstance(value, str):
            self.message(f"jq: error (at {at}): {runtime_message(value)}\n")
        else:
            text = dump(value, None, False, False)
            self.message(f"jq: error (at {at}) (not a string): {text}\n")
        self.current = 5

    def message(self, text: str) -> None:
        """stderr is bounded like stdout (an error per input can print a whole value)."""
        self.err_size += len(text)
        check_size(self.err_size)
        self.err.append(text)

    def halt(self, detail: object) -> None:
        self.exact = True
        if not isinstance(detail, list) or len(detail) != 2:
            self.current = 0
            return
        message, code = detail
        self.current = int(code) if isinstance(code, int | float) else 5
        if isinstance(message, str):
            self.message(message)
        elif message is not None:
            self.message(dump(message, None, False, False) + "\n")

    def end_of_input(self) -> None:
        self.ret = self.current
        self.current = 14
        self.index += 1

    def status(self) -> int:
        if self.ret >= 10 and self.opts.exit_status:
            return self.ret - 10
        if self.ret >= 10 and not self.exact:
            return 0
        return self.ret

    def result(self) -> CommandResult:
        return CommandResult("".join(self.out), "".join(self.err), self.status())


def _encodable(text: str) -> str:
    """libjq wants UTF-8: a lone surrogate becomes U+FFFD, as jq does with bad bytes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def _raw_values(text: str, slurp: bool) -> list[str]:
    if slurp:
        return [text]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _results(program: Any, payload: str) -> Iterator[Any]:
    """The tagged results; a ValueError from the iterator is a parse error of the
    input (the driver catches every error of the filter itself)."""
    try:
        results = iter(program.input_text(payload, slurp=True))
    except UnicodeEncodeError:
        results = iter(program.input_text(_encodable(payload), slurp=True))
    while True:
        try:
            item = next(results)
        except StopIteration:
            return
        except ValueError as exc:
            message = str(exc)
            raise _ParseError(message.removeprefix("parse error: ")) from None
        yield item


_IDENTITY: Any = None


def _valid_prefix(text: str) -> tuple[list[Any], str]:
    """The values before a parse error, and jq's message for it (libjq parses)."""
    global _IDENTITY
    if _IDENTITY is None:
        _IDENTITY = libjq.compile(".")
    values: list[Any] = []
    results = iter(_IDENTITY.input_text(_encodable(text)))
    while True:
        try:
            values.append(next(results))
        except StopIteration:
            return values, ""
        except ValueError as exc:
            return values, str(exc).removeprefix("parse error: ")


def run_jq(args: list[str], stdin: str | None) -> CommandResult:
    """The whole jq command in this process: what the jq engine child runs (libjq
    holds the GIL for as long as a filter runs: hosts call ``jq_tool.jq`` instead)."""
    try:
        opts = parse_options(args)
    except JqUsageError as err:
        return CommandResult("", err.text(), err.status)
    if opts.help:
        return CommandResult(USAGE, "", 0)
    if opts.version:
        return CommandResult("jq-1.6\n", "", 0)
    files = [f for f in opts.files if f != "-"]
    if files:
        text = "".join(f"jq: error: Could not open file {f}: {FS_DISABLED}\n" for f in files)
        return CommandResult("", text, 2)
    program = opts.program if opts.program.strip() else "."
    text = stdin or ""
    renumber = False
    if not opts.raw_input:
        text, renumber = canonical_numbers(text)
    try:
        found = check(program)
        shape = Shape(
            null_input=opts.null_input,
            slurp_json=opts.slurp and not opts.raw_input,
            arg_names=tuple(sorted(opts.named)),
            renumber=renumber,
        )
        compiled = compile_wrapped(
            _encodable(wrap(program, shape, found)),
            _encodable(program),
            frozenset(found),
            shape.arg_names,
        )
    except ProgramError as err:
        return CommandResult("", err.message + "\n", err.status)
    try:
        return _execute(opts, compiled, text)
    except RecursionError:
        return CommandResult("", "jq: error: value nested too deeply\n", 5)


def _context(opts: JqOptions, parse_error: str | None = None) -> str:
    """The first slurped value: what ``$ARGS``, ``$ENV`` and ``--arg`` variables read,
    and the parse error ``inputs`` raises after the last good input."""
    ctx: dict[str, object] = {
        "named": opts.named,
        "args": {"positional": opts.positional, "named": opts.named},
        "env": {},
        "fname": None if opts.null_input else "<stdin>",
    }
    if parse_error is not None:
        ctx["perr"] = parse_error
    return json.dumps(ctx, ensure_ascii=False)


def _execute(opts: JqOptions, compiled: Any, text: str) -> CommandResult:
    ctx = _context(opts)
    if opts.raw_input:
        values = _raw_values(text, opts.slurp)
        payload = ctx + "\n" + "\n".join(json.dumps(v, ensure_ascii=False) for v in values)
        newlines = text.count("\n")

        def raw_position(index: int) -> str:
            if opts.slurp:
                return f"<stdin>:{newlines}"
            return f"<stdin>:{min(index + 1, newlines)}"

        position = raw_position
    else:
        payload = ctx + "\n" + text

        def json_position(index: int) -> str:
            if opts.slurp:
                return f"<stdin>:{text.count(chr(10))}"
            return f"<stdin>:{error_position(text, index)}"

        position = json_position
    if opts.null_input:

        def null_position(index: int) -> str:
            return "<unknown>"

        position = null_position
    run = _Run(opts, position)
    try:
        _consume(run, _results(compiled, payload))
    except _ParseError:
        return _after_parse_error(opts, compiled, text, position)
    return run.result()


def _consume(run: _Run, results: Iterator[Any]) -> None:
    for item in results:
        if type(item) is list and item:
            tag = item[0]
            if tag == 0 and len(item) == 2:
                run.output(item[1])
                continue
            if tag == 2 and len(item) == 1:
                run.end_of_input()
                continue
            if tag == 1 and len(item) == 2:
                run.error(item[1])
                continue
        run.output(item)  # pragma: no cover - only a filter that forges the driver's tags


def _after_parse_error(opts: JqOptions, compiled: Any, text: str, position: Any) -> CommandResult:
    """jq 1.6 processes the inputs before bad JSON, then prints ``parse error: ...``
    and exits 4 (with ``-s`` nothing is processed). With ``-n`` the filter runs anyway
    and only ``inputs`` meets the error, as an error of the filter."""
    values, message = _valid_prefix(text)
    run = _Run(opts, position)
    if opts.slurp and not opts.null_input:
        run.err.append(f"parse error: {message}\n")
        run.ret = 4
        return run.result()
    ctx = _context(opts, message if opts.null_input or opts.slurp else None)
    payload = ctx + "\n" + "\n".join(json.dumps(v, ensure_ascii=False) for v in values)
    if opts.null_input and opts.slurp:
        payload = ctx  # the slurped array never came
    # Values re-serialized by json.dumps always parse.
    with contextlib.suppress(_ParseError):
        _consume(run, _results(compiled, payload))
    if not opts.null_input:
        run.err.append(f"parse error: {message}\n")
        run.ret = 4
    return run.result()
