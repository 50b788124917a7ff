"""``Operation``: one operation's mutable lifecycle state, shared by the ledger and recovery.

A plain slotted class rather than a Struct: the ledger changes it in place on the hot path.
``deadline_at`` is on the ledger's (monotonic) clock; ``value`` is the input, dropped once
the operation is resolved.
"""

from __future__ import annotations

from typing import Any

from supervisor.ledger.policy import StreamPolicy
from supervisor.ledger.records import OpRecord
from supervisor.ledger.types import LedgerOutcome, OperationState

QUEUED = OperationState.QUEUED


class Operation:
    __slots__ = (
        "attempt",
        "call_index",
        "chunks",
        "deadline_at",
        "emitted_bytes",
        "format",
        "id",
        "indeterminate",
        "key",
        "max_attempts",
        "max_output_bytes",
        "outcome",
        "source_bytes",
        "state",
        "stream",
        "tool",
        "value",
    )

    def __init__(
        self,
        op_id: int,
        tool: str,
        call_index: int,
        key: str,
        fmt: Any,
        value: Any,
        max_attempts: int,
        max_output_bytes: int,
        deadline_at: float | None,
        stream: StreamPolicy | None,
    ) -> None:
        self.id = op_id
        self.tool = tool
        self.call_index = call_index
        self.key = key
        self.format = fmt
        self.value = value
        self.max_attempts = max_attempts
        self.max_output_bytes = max_output_bytes
        self.deadline_at = deadline_at
        self.stream = stream
        self.state = QUEUED
        self.attempt = 0
        self.indeterminate = False
        self.chunks = 0
        self.source_bytes = 0
        self.emitted_bytes = 0
        self.outcome: LedgerOutcome | None = None

    @classmethod
    def from_record(cls, record: OpRecord) -> Operation:
        """As ``start`` made it; the caller supplies ``value`` and ``deadline_at``."""
        stream = None if record.stream is None else StreamPolicy(*record.stream)
        return cls(
            record.op_id,
            record.tool,
            record.call_index,
            record.idempotency_key,
            record.format,
            None,
            record.max_attempts,
            record.max_output_bytes,
            None,
            stream,
        )
