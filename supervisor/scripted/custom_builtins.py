"""Raw-argv builtins of a ``ScriptedTool`` (bashkit's ``.builtin(name, builtin)``, and the
``custom_builtins`` callbacks of its Python ``Bash``): host code that gets the command's
words unparsed, for commands a schema of ``--key value`` flags cannot describe
(positionals, short options, ``--``).

A builtin is ``callback(ctx: BuiltinContext) -> str | BuiltinResult``, sync or async.
It runs in the same logic-only shell as the tools and reaches nothing the host does not
give it. Its failures cross the same boundary as a tool callback's: with
``sanitize_errors`` (the default) an exception becomes ``<name>: callback failed``, exit
1; ``ToolFailure`` chooses its own message and status.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from supervisor.scripted.contract import Command, CommandResult
from supervisor.tools.definition import ToolFailure

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BuiltinContext:
    """One invocation: the command's name, its words after the name, and the piped
    input (None when nothing is piped or redirected in)."""

    name: str
    argv: list[str] = field(default_factory=list)
    stdin: str | None = None


@dataclass(frozen=True, slots=True)
class BuiltinResult:
    """What a builtin reports when a string (its stdout, status 0) is not enough."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


BuiltinCallback = Callable[[BuiltinContext], "str | BuiltinResult | Awaitable[str | BuiltinResult]"]


def builtin_command(name: str, callback: BuiltinCallback, sanitize: bool) -> Command:
    """The shell command that runs ``callback`` (``(args, stdin) -> CommandResult``)."""

    def failed(exc: BaseException) -> CommandResult:
        if isinstance(exc, ToolFailure):
            return CommandResult("", exc.message, exc.exit_code)
        if sanitize:
            log.debug("builtin %s failed (sanitised)", name, exc_info=exc)
            return CommandResult("", f"{name}: callback failed\n", 1)
        return CommandResult("", str(exc) or type(exc).__name__, 1)

    def result(value: object) -> CommandResult:
        if type(value) is str:
            return CommandResult(value, "", 0)
        if isinstance(value, BuiltinResult) and _valid(value):
            return CommandResult(value.stdout, value.stderr, value.exit_code & 0xFF)
        if sanitize:
            return CommandResult("", f"{name}: callback failed\n", 1)
        kind = type(value).__name__
        return CommandResult("", f"{name}: builtin returned {kind}, expected str\n", 1)

    async def finish(pending: Awaitable[object]) -> CommandResult:
        try:
            return result(await pending)
        except Exception as exc:
            return failed(exc)

    def run(args: list[str], stdin: str | None) -> CommandResult | Awaitable[CommandResult]:
        try:
            value = callback(BuiltinContext(name, list(args), stdin))
        except Exception as exc:
            return failed(exc)
        if inspect.isawaitable(value):
            return finish(value)
        return result(value)

    run.__name__ = run.__qualname__ = name
    return run


def _valid(value: BuiltinResult) -> bool:
    return (
        isinstance(value.stdout, str)
        and isinstance(value.stderr, str)
        and isinstance(value.exit_code, int)
        and not isinstance(value.exit_code, bool)
    )
