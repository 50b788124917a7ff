"""Per-session rules both sides enforce (spec sections 5, 7, 9), as plain state.

`SessionRules` holds the grants, the id set, the call budgets and the calls in flight.
Its ``check_*`` methods raise the specific `StateViolation` and mutate nothing; the
``admit_*`` methods mutate and are called only after every check passed. The host turns a
violation into a non-fatal `Refused` before sending; the worker treats it as fatal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from .errors import (
    BadGrant,
    CallBudgetExhausted,
    DuplicateId,
    IdCapacityExhausted,
    InputTooLarge,
    StreamViolation,
    TooManyInFlight,
    UnknownTool,
)
from .limits import MAX_SESSION_IDS
from .messages import Grant, Payload
from .payloads import check_payload, utf8_len

#: Cancel states of a call in flight.
NOT_CANCELLED = "none"
CANCEL_REQUESTED = "requested"
CANCEL_UNSUPPORTED = "unsupported"


class Call:
    """One rid in flight. Public attributes are for reading; the connection owns them."""

    __slots__ = (
        "cancel",
        "chunk_bytes",
        "chunks",
        "cid",
        "grant",
        "idempotency_key",
        "input_bytes",
        "rid",
        "tool",
    )

    def __init__(self, rid: str, grant: Grant, idempotency_key: str, input_bytes: int) -> None:
        self.rid = rid
        self.tool = grant.tool
        self.grant = grant
        self.idempotency_key = idempotency_key
        self.input_bytes = input_bytes
        self.chunks = 0
        self.chunk_bytes = 0
        self.cid: str | None = None
        self.cancel = NOT_CANCELLED

    def __repr__(self) -> str:
        return (
            f"Call(rid={self.rid!r}, tool={self.tool!r}, chunks={self.chunks}, "
            f"chunk_bytes={self.chunk_bytes}, cancel={self.cancel!r})"
        )


def index_grants(grants: Iterable[Grant]) -> dict[str, Grant]:
    """Grants by tool; a tool granted twice is refused."""
    by_tool: dict[str, Grant] = {}
    for grant in grants:
        if grant.tool in by_tool:
            raise BadGrant(f"tool {grant.tool!r} is granted twice")
        by_tool[grant.tool] = grant
    return by_tool


C = TypeVar("C", bound=Call)


class SessionRules(Generic[C]):
    """Grants, ids, budgets and calls in flight of one session (each side its call type)."""

    def __init__(self, grants: dict[str, Grant], max_in_flight: int) -> None:
        self.grants = grants
        self.max_in_flight = max_in_flight
        self.ids: set[str] = set()
        self.calls_used: dict[str, int] = dict.fromkeys(grants, 0)
        self.in_flight: dict[str, C] = {}

    # -- checks (no mutation) ----------------------------------------------------------

    def grant_for(self, tool: str) -> Grant:
        grant = self.grants.get(tool)
        if grant is None:
            raise UnknownTool(f"tool {tool!r} is not granted")
        return grant

    def check_fresh_id(self, new_id: str, extra_reserved: int = 0) -> None:
        """A new rid or cid: unused in this session, and room for it in the id budget."""
        if new_id in self.ids:
            raise DuplicateId(f"id {new_id!r} was already used in this session")
        if len(self.ids) + 1 + extra_reserved > MAX_SESSION_IDS:
            raise IdCapacityExhausted(f"the session's {MAX_SESSION_IDS} ids are used up")

    def check_invoke(
        self, rid: str, grant: Grant, payload: Payload, extra_reserved: int = 0
    ) -> int:
        """The rules of an `invoke` (section 9) after `grant_for` found its grant, in the
        spec's order; returns the input size."""
        size = check_payload(
            payload, grant.format, grant.max_input_bytes, InputTooLarge, "invoke input"
        )
        self.check_fresh_id(rid, extra_reserved)
        if self.calls_used[grant.tool] >= grant.max_calls:
            raise CallBudgetExhausted(f"tool {grant.tool!r} has used its {grant.max_calls} calls")
        if len(self.in_flight) >= self.max_in_flight:
            raise TooManyInFlight(f"already {self.max_in_flight} calls in flight")
        return size

    def check_chunk(self, call: Call, text: str) -> int:
        """A chunk within the call's stream grant; returns its size in bytes."""
        stream = call.grant.stream
        if stream is None:
            raise StreamViolation(f"tool {call.tool!r} has no stream grant")
        size = utf8_len(text)
        if call.chunks >= stream.max_chunks:
            raise StreamViolation(f"more than {stream.max_chunks} chunks for {call.rid!r}")
        if size > stream.max_chunk_bytes:
            raise StreamViolation(f"a chunk of {size} bytes exceeds {stream.max_chunk_bytes}")
        if call.chunk_bytes + size > stream.max_total_bytes:
            raise StreamViolation(f"chunks of {call.rid!r} exceed {stream.max_total_bytes} bytes")
        return size

    # -- admissions (mutation, after the checks passed) -------------------------------

    def admit_invoke(self, call: C) -> None:
        self.ids.add(call.rid)
        self.calls_used[call.tool] += 1
        self.in_flight[call.rid] = call

    def admit_chunk(self, call: C, size: int) -> int:
        call.chunks += 1
        call.chunk_bytes += size
        return call.chunks
