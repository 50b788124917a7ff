"""Invocation traces: which tool, help and discover commands a request ran.

A trace is telemetry for the host (evaluation, auditing), never seen by the script. It
is bounded like bashkit's: at most 256 entries (the oldest dropped) and at most 1024
bytes per argument (cut on a UTF-8 boundary), so a script cannot grow host memory
through it. Each request gets its own trace, so tenants sharing one registry never see
each other's entries.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

MAX_TRACE_ENTRIES = 256
MAX_TRACE_ARG_BYTES = 1024
#: A string of at most this many characters is within the byte cap (UTF-8 uses at most
#: 4 bytes per character), so most arguments are never encoded.
_SAFE_CHARS = MAX_TRACE_ARG_BYTES // 4


class InvocationKind(enum.StrEnum):
    TOOL = "tool"
    HELP = "help"
    DISCOVER = "discover"


@dataclass(slots=True)
class TraceEntry:
    """One recorded invocation: ``args`` is the argv without the command name."""

    name: str
    kind: InvocationKind
    args: list[str]
    exit_code: int

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": str(self.kind),
            "args": list(self.args),
            "exit_code": self.exit_code,
        }


@dataclass(slots=True)
class ExecutionTrace:
    """The invocations of one execution, in the order they finished."""

    invocations: list[TraceEntry] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"invocations": [entry.to_dict() for entry in self.invocations]}


def truncate_arg(arg: str) -> str:
    """``arg`` cut to at most 1024 UTF-8 bytes without splitting a character."""
    if len(arg) <= _SAFE_CHARS:
        return arg
    encoded = arg.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_TRACE_ARG_BYTES:
        return arg
    return encoded[:MAX_TRACE_ARG_BYTES].decode("utf-8", "ignore")


class InvocationTrace:
    """A bounded, thread-safe log of invocations; ``take()`` returns and clears it."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: deque[tuple[str, InvocationKind, list[str], int]] = deque(
            maxlen=MAX_TRACE_ENTRIES
        )

    def record(self, name: str, kind: InvocationKind, args: list[str], exit_code: int) -> None:
        if args and max(map(len, args)) > _SAFE_CHARS:
            kept = [truncate_arg(a) for a in args]
        else:
            kept = list(args)
        # deque.append and popleft are atomic: no lock on the hot path. Entries are kept
        # as tuples and become TraceEntry objects only when taken.
        self._entries.append((name, kind, kept, exit_code))

    def take(self) -> list[TraceEntry]:
        taken: list[TraceEntry] = []
        pop = self._entries.popleft
        while True:  # popleft is atomic: an entry recorded meanwhile is never lost
            try:
                taken.append(TraceEntry(*pop()))
            except IndexError:
                return taken

    def __len__(self) -> int:
        return len(self._entries)
