"""Local calls of scripts in the ledger: one pending bound with the operations, one
``local_call`` event each in the hash chain, counters kept across restarts and compaction.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import msgspec
import pytest
from ledger_helpers import FakeClock

from supervisor.ledger import (
    AuditKind,
    JournalCorrupt,
    Ledger,
    LedgerError,
    PendingLimitReached,
    PolicyError,
    ToolPolicy,
)
from supervisor.ledger.audit import event_hash

DIGEST = hashlib.sha256(b"call").hexdigest()


def local(ledger: Ledger, tool: str = "lookup", outcome: str = "exit 0") -> int:
    ledger.begin_local()
    event = ledger.end_local(tool, bytes_in=3, bytes_out=5, digest=DIGEST, outcome=outcome)
    return event.call_index


def test_local_calls_and_operations_share_the_pending_bound() -> None:
    ledger = Ledger(max_pending=2)
    ledger.register_external_tool(ToolPolicy("ext", max_calls=10))
    ledger.begin_local()
    op = ledger.start("ext", "x")
    assert ledger.local_in_flight == 1 and ledger.pending_count == 1
    with pytest.raises(PendingLimitReached, match=r"2 operations .*\(1 of them local"):
        ledger.start("ext", "y")
    with pytest.raises(PendingLimitReached):
        ledger.begin_local()
    ledger.end_local("lookup", bytes_in=0, bytes_out=0, digest=DIGEST, outcome="exit 0")
    assert ledger.local_in_flight == 0
    ledger.begin_local()  # the slot is free again
    ledger.claim(op)
    ledger.complete(op, "ok")
    ledger.start("ext", "z")  # and the operation's
    with pytest.raises(PendingLimitReached):
        ledger.start("ext", "w")


def test_a_local_call_is_one_event_in_the_chain(ledger: Ledger) -> None:
    ledger.register_external_tool(ToolPolicy("ext", max_calls=10))
    op = ledger.start("ext", "x")
    assert [local(ledger), local(ledger, "other"), local(ledger, outcome="exit 2")] == [1, 1, 2]
    ledger.claim(op)
    ledger.complete(op, "ok")
    events = [e for e in ledger.audit() if e.kind == AuditKind.LOCAL_CALL]
    assert [(e.op_id, e.tool, e.call_index, e.detail) for e in events] == [
        (0, "lookup", 1, "exit 0"),
        (0, "other", 1, "exit 0"),
        (0, "lookup", 2, "exit 2"),
    ]
    assert {(e.bytes_in, e.bytes_out, e.digest, e.attempt) for e in events} == {(3, 5, DIGEST, 0)}
    assert ledger.verify_audit_chain() == len(ledger.audit()) == 6


def test_end_local_is_checked(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="without a begin_local"):
        ledger.end_local("t", bytes_in=0, bytes_out=0, digest=DIGEST, outcome="exit 0")
    for bad in (
        {"tool": ""},
        {"digest": "xyz"},
        {"bytes_in": -1},
        {"outcome": ""},
    ):
        ledger.begin_local()
        fields = {"tool": "t", "bytes_in": 0, "bytes_out": 0, "digest": DIGEST, "outcome": "x"}
        fields.update(bad)  # type: ignore[arg-type]
        tool = fields.pop("tool")
        with pytest.raises(PolicyError):
            ledger.end_local(tool, **fields)  # type: ignore[arg-type]
        assert ledger.local_in_flight == 0  # the slot is released all the same
    assert ledger.audit() == ()


def test_local_counters_survive_a_restart_and_compaction(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "ledger.sqlite3"

    def reopen() -> Ledger:
        ledger = Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall)
        ledger.register_external_tool(ToolPolicy("ext", max_calls=10))
        return ledger

    with reopen() as ledger:
        assert [local(ledger), local(ledger)] == [1, 2]
        op = ledger.start("ext", "x")
        ledger.claim(op)
        ledger.complete(op, "ok")
    with reopen() as ledger:
        assert local(ledger) == 3
        pending = ledger.start("ext", "y")
        local(ledger)
        report = ledger.compact()
        assert report.operations_removed == 1 and report.events_removed == 6
    with reopen() as ledger:  # the journal holds what came after the checkpoint
        assert [e.kind for e in ledger.audit()] == [AuditKind.STARTED, AuditKind.LOCAL_CALL]
        assert local(ledger) == 5
        assert ledger.status(pending).state == "queued"
        ledger.verify_audit_chain()
        ledger.cancel(pending)
        ledger.compact()
    with reopen() as ledger:
        assert local(ledger) == 6
        ledger.verify_audit_chain()


def test_a_local_call_out_of_sequence_fails_recovery(tmp_path: Path, clock: FakeClock) -> None:
    """Even re-hashed (the chain holds), a call index the ledger would not have given is
    refused on reopening."""
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall) as ledger:
        local(ledger)
        last = ledger.audit()[-1]
    forged = msgspec.structs.replace(last, call_index=7)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(
        "UPDATE events SET call_index=7, hash=? WHERE seq=?",
        (event_hash(forged.fields()), last.seq),
    )
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorrupt, match="a local call the ledger would not have recorded"):
        Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall)
