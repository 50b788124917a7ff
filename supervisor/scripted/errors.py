"""Exceptions that carry control flow and failures through the interpreter.

Two families: *control* (break, continue, return, exit) unwinds to the construct that
handles it; *failures* either end the current command (``ShellError``), end the script
like bash does for fatal expansion errors (``FatalShellError``), abandon the command line
(``DiscardLine``), or abort the whole
execution with an ``error`` field (``AbortExecution``: limits, process substitution).
"""

from __future__ import annotations


class ShellSyntaxError(Exception):
    """A syntax error found while parsing; ``line``/``column`` are 1-based."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column

    def render(self) -> str:
        if self.line:
            return f"parse error at line {self.line}, column {self.column}: {self.message}"
        return f"parse error: {self.message}"


class ParseLimitError(Exception):
    """Input size, nesting depth or parser work beyond ``ExecutionLimits``."""


# ----------------------------------------------------------------------- control flow


class ControlFlow(Exception):
    """Base of break/continue/return/exit: not errors, just unwinding."""


class BreakLoop(ControlFlow):
    def __init__(self, levels: int) -> None:
        self.levels = levels


class ContinueLoop(ControlFlow):
    def __init__(self, levels: int) -> None:
        self.levels = levels


class ReturnFromFunction(ControlFlow):
    def __init__(self, status: int) -> None:
        self.status = status


class ExitShell(ControlFlow):
    """``exit``, ``set -e`` and fatal errors: ends the (sub)shell with ``status``."""

    def __init__(self, status: int) -> None:
        self.status = status


# --------------------------------------------------------------------------- failures


class ShellError(Exception):
    """An error that fails the current command with ``status`` (message already set)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class FatalShellError(ShellError):
    """An expansion error after which a non-interactive bash exits (``${x:?}``,
    ``set -u``, bad substitution, arithmetic errors in ``$(( ))``), with status 1 as a
    script file does (``bash -c`` alone exits 127 for ``${x:?}`` and ``set -u``)."""


class DiscardLine(FatalShellError):
    """An error after which bash abandons the command line it is running (bash's
    ``DISCARD``): an arithmetic error in ``$(( ))``, a bad substitution, an assignment to
    a readonly variable or with a bad subscript. At the top level of a script the rest of
    that line's command (functions and loops it is inside included) is skipped, ``$?`` is
    1 and the script goes on, also under ``set -e``; ``eval`` returns 1; a subshell ends
    with 1, like ``FatalShellError``."""


def unbound(name: str) -> FatalShellError:
    return FatalShellError(f"{name}: unbound variable", 1)


class AbortExecution(Exception):
    """Ends the whole execution: stdout is discarded and ``error`` is set."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LimitExceeded(AbortExecution):
    """A resource limit: ``resource limit exceeded: <what>``."""

    def __init__(self, what: str) -> None:
        super().__init__(f"resource limit exceeded: {what}")


class RequestTimeout(Exception):
    """The per-request wall deadline (``timeout_ms``) passed: exit 124."""
