"""The immutable record of one operation, as the journal stores it and the chain vouches.

A ``started`` event carries ``OpRecord.digest()``; a ``completed``/``failed`` event carries
``result_digest`` of its stored body. Recovery recomputes both, so an edited input, limit,
deadline or result is found even though those bytes live outside the events table.
"""

from __future__ import annotations

import hashlib

import msgspec

_encode = msgspec.json.Encoder().encode
_ROW_DOMAIN = b"sandvisor/ledger/operation/v1\n"
_RESULT_DOMAIN = b"sandvisor/ledger/result/v1\n"


class OpRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What ``start`` fixed for an operation's whole life. ``input`` is the payload's
    bytes (see ``payloads.encode``); ``deadline_wall`` is a wall-clock instant, because a
    restarted process cannot use another process's monotonic clock."""

    op_id: int
    tool: str
    call_index: int
    idempotency_key: str
    format: str
    input: bytes
    max_attempts: int
    max_output_bytes: int
    deadline_wall: float | None
    stream: tuple[int, int, int, int] | None

    def digest(self) -> str:
        return operation_digest(
            self.op_id,
            self.tool,
            self.call_index,
            self.idempotency_key,
            self.format,
            self.max_attempts,
            self.max_output_bytes,
            self.deadline_wall,
            self.stream,
            self.input,
        )


def operation_digest(
    op_id: int,
    tool: str,
    call_index: int,
    key: str,
    fmt: str,
    max_attempts: int,
    max_output_bytes: int,
    deadline_wall: float | None,
    stream: tuple[int, int, int, int] | None,
    data: bytes,
) -> str:
    """The digest a ``started`` event carries (``OpRecord.digest`` without the record)."""
    header = _encode(
        (op_id, tool, call_index, key, fmt, max_attempts, max_output_bytes, deadline_wall, stream)
    )
    return hashlib.sha256(_ROW_DOMAIN + header + b"\n" + data).hexdigest()


def result_digest(body: bytes) -> str:
    return hashlib.sha256(_RESULT_DOMAIN + body).hexdigest()
