"""What every (sub)shell and background job of one execution shares: the command table,
the limits and their counters, the deadlines.

Differential cases: ``cases_errors.txt``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..contract import CommandTable, ExecutionLimits
from ..errors import LimitExceeded, RequestTimeout

if TYPE_CHECKING:
    from .jobs import JobTable

BUILTIN, TABLE = 1, 2


def duration_debug(seconds: float) -> str:
    """Rust's ``Duration`` Debug format: ``500ms``, ``30s``, ``1.5s``."""
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms == int(ms) else f"{ms:.3f}".rstrip("0") + "ms"
    return f"{seconds:g}s"


_UNHIDDEN: dict[tuple[int, frozenset[str]], tuple[Mapping[str, Any], dict[str, Any]]] = {}


def _unhidden(
    builtins: Mapping[str, Any], overrides: frozenset[str], commands: Mapping[str, Any]
) -> dict[str, Any]:
    """The builtins a command of the table does not override (a tool, ``help``,
    ``discover``, a custom builtin), remembered per builtins table and overridden set; a
    plain dict (``BUILTINS`` is a read-only proxy, whose ``get`` calls the dict's ``get``
    by name)."""
    hidden = frozenset(name for name in overrides if name in builtins and name in commands)
    key = (id(builtins), hidden)
    found = _UNHIDDEN.get(key)
    if found is not None and found[0] is builtins:
        return found[1]
    view = {name: b for name, b in builtins.items() if name not in hidden}
    if len(_UNHIDDEN) >= 64:
        _UNHIDDEN.clear()
    _UNHIDDEN[key] = (builtins, view)
    return view


class ExecContext:
    """What every (sub)shell and background job of one execution shares."""

    __slots__ = (
        "builtins",
        "command_count",
        "commands",
        "deadline",
        "grace",
        "jobs",
        "limits",
        "max_commands",
        "request_deadline",
        "stop_at",
        "timeout_seconds",
        "total_loops",
        "unhidden",
    )

    def __init__(
        self,
        commands: CommandTable,
        overrides: frozenset[str],
        limits: ExecutionLimits,
        deadline: float | None,
        request_deadline: float | None,
        builtins: Mapping[str, Any],
        grace: float = 0.0,
    ) -> None:
        self.commands = commands
        #: the shell builtins (``builtins.table.BUILTINS``), also the ones a tool hides
        self.builtins = builtins
        self.limits = limits
        self.deadline = deadline
        self.request_deadline = request_deadline
        self.timeout_seconds = limits.timeout_seconds
        self.grace = grace
        candidates = [t for t in (deadline, request_deadline) if t is not None]
        self.stop_at = min(candidates) if candidates else float("inf")
        self.command_count = 0
        self.max_commands = limits.max_commands
        self.total_loops = 0
        self.jobs: JobTable | None = None
        #: the builtins no command of the table overrides (looked up first), remembered
        #: across executions: nothing is merged per execution
        self.unhidden = _unhidden(builtins, overrides, commands)

    def resolve(self, name: str) -> tuple[int, Any] | None:
        """(``BUILTIN`` or ``TABLE``, the implementation) of a command, or None."""
        builtin = self.unhidden.get(name)
        if builtin is not None:
            return BUILTIN, builtin
        command = self.commands.get(name)
        return None if command is None else (TABLE, command)

    def names(self) -> set[str]:
        """Every command's name (for a hint after ``command not found``)."""
        return {*self.unhidden, *self.commands}

    def late_command(self) -> None:
        """An awaited command ended after the execution deadline (a tool callback timed
        out on it and failed its command): the script may go on for the grace, as
        bashkit's does, and is stopped then. Everything else stops at the deadline."""
        if self.deadline is None or time.monotonic() < self.deadline:
            return
        later = self.deadline + self.grace
        if self.request_deadline is not None:
            later = min(later, self.request_deadline)
        self.stop_at = max(self.stop_at, later)

    def check_time(self) -> None:
        """Raise when a deadline has passed (long computations call this now and then)."""
        if time.monotonic() >= self.stop_at:
            self.out_of_time()

    def expire(self) -> None:
        """Raise what the first deadline will raise when it comes (``budget.expire``)."""
        if self.request_deadline is not None and (
            self.deadline is None or self.request_deadline <= self.deadline
        ):
            raise RequestTimeout()
        raise LimitExceeded(f"execution timeout ({duration_debug(self.timeout_seconds)})")

    def out_of_time(self) -> None:
        now = time.monotonic()
        if self.request_deadline is not None and now >= self.request_deadline:
            raise RequestTimeout()
        if self.deadline is not None and now >= self.deadline:
            raise LimitExceeded(f"execution timeout ({duration_debug(self.timeout_seconds)})")
