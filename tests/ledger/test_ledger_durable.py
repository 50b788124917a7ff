"""Durable mode: recovery after a restart, journal integrity, locking and failure."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from ledger_helpers import FakeClock, kinds

from supervisor.ledger import (
    AuditChainBroken,
    Cancelled,
    Completed,
    Denied,
    Failed,
    JournalCorrupt,
    JournalFailed,
    JournalLocked,
    Ledger,
    OperationIndeterminate,
    OperationState,
    ReconcileStatus,
    RetryClass,
    StreamPolicy,
    ToolPolicy,
    UnknownTool,
)
from supervisor.ledger.audit import event_hash

TEXT = ToolPolicy("text.remote", max_calls=20, max_attempts=2, deadline=60.0, stream=StreamPolicy())
JSON = ToolPolicy(
    "json.remote", format="json", max_calls=20, contract={"type": "object", "required": ["ok"]}
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite3"


@pytest.fixture
def open_ledger(path: Path, clock: FakeClock) -> Callable[..., Ledger]:
    def make(register: bool = True, **kwargs: Any) -> Ledger:
        ledger = Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall, **kwargs)
        if register:
            ledger.register_external_tool(TEXT)
            ledger.register_external_tool(JSON)
        return ledger

    return make


def populate(ledger: Ledger) -> dict[str, int]:
    """One operation in each state a crash can leave behind."""
    ops = {
        name: ledger.start("text.remote", name)
        for name in (
            "queued",
            "claimed",
            "retried",
            "cancel_requested",
            "indeterminate",
            "completed",
            "failed",
            "cancelled",
        )
    }
    ops["json_done"] = ledger.start("json.remote", {"q": 1})
    ops["denied"] = ledger.start("json.remote", {"q": 2})
    for name, op in ops.items():
        if name != "queued":
            ledger.claim(op)
    ledger.push_chunk(ops["retried"], "chunk")
    ledger.retry(ops["retried"], RetryClass.TRANSIENT)
    ledger.request_cancellation(ops["cancel_requested"])
    ledger.mark_indeterminate(ops["indeterminate"], "worker eof")
    ledger.complete(ops["completed"], "result")
    ledger.complete(ops["json_done"], {"ok": True, "n": [1, 2]})
    ledger.complete(ops["denied"], {"nope": 1})
    ledger.fail(ops["failed"], "adapter_error")
    ledger.cancel(ops["cancelled"])
    return ops


def test_recovery_keeps_queued_and_makes_claimed_indeterminate(
    open_ledger: Callable[..., Ledger],
) -> None:
    first = open_ledger()
    ops = populate(first)
    keys = {name: first.status(op).idempotency_key for name, op in ops.items()}
    first.close()

    second = open_ledger()
    pending = {info.id: info for info in second.pending()}
    assert set(pending) == {
        ops[n] for n in ("queued", "claimed", "retried", "cancel_requested", "indeterminate")
    }
    assert pending[ops["queued"]].state == OperationState.QUEUED
    assert not pending[ops["queued"]].indeterminate
    assert {info.id for info in second.indeterminate()} == set(pending) - {ops["queued"]}
    assert pending[ops["cancel_requested"]].state == OperationState.CANCELLATION_REQUESTED
    retried = pending[ops["retried"]]
    assert (retried.attempt, retried.chunks, retried.source_bytes) == (2, 1, 5)
    for op_id, info in pending.items():
        assert info.idempotency_key == keys[next(n for n, o in ops.items() if o == op_id)]
    recovered = [e.op_id for e in second.audit() if e.kind == "recovered_indeterminate"]
    assert sorted(recovered) == sorted(set(pending) - {ops["queued"]})

    # Nothing claimed is handed out again; the queued one is, with its original key.
    inv = second.claim_next()
    assert inv is not None and inv.id == ops["queued"]
    assert inv.idempotency_key == keys["queued"] and inv.value == "queued"
    assert second.claim_next() is None
    second.close()


def test_recovered_outcomes_stay_terminal_and_readable(open_ledger: Callable[..., Ledger]) -> None:
    first = open_ledger()
    ops = populate(first)
    first.close()
    second = open_ledger(register=False)
    assert second.outcome(ops["completed"]) == Completed("result")
    assert second.outcome(ops["json_done"]) == Completed({"ok": True, "n": [1, 2]})
    denied = second.outcome(ops["denied"])
    assert isinstance(denied, Denied) and "required" in denied.reason
    assert second.outcome(ops["failed"]) == Failed("adapter_error")
    assert second.outcome(ops["cancelled"]) == Cancelled("asserted")
    assert second.outcome(ops["queued"]) is None

    async def wait_for_it() -> None:
        assert await second.wait(ops["completed"]) == Completed("result")

    trio.run(wait_for_it)
    second.close()


def test_recovered_operations_resolve_by_reconcile_or_expiry(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    first = open_ledger()
    ops = populate(first)
    first.close()
    second = open_ledger()
    with pytest.raises(OperationIndeterminate):
        second.complete(ops["claimed"], "would be unsafe")
    with pytest.raises(OperationIndeterminate):
        second.retry(ops["retried"], RetryClass.TRANSIENT)
    assert second.reconcile(ops["claimed"], ReconcileStatus.succeeded("late but known")) == (
        Completed("late but known")
    )
    assert second.reconcile(ops["cancel_requested"], ReconcileStatus.cancelled()) == (
        Cancelled("reconciled")
    )
    assert second.reconcile(ops["retried"], ReconcileStatus.unknown()) is None
    clock.advance(60)
    assert sorted(second.expire_timed_out()) == sorted(
        [ops["queued"], ops["retried"], ops["indeterminate"]]
    )
    assert second.pending_count == 0
    second.close()


def test_deadlines_survive_as_wall_clock_instants(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    first = open_ledger()
    op = first.start("text.remote", "x")
    clock.advance(20)
    first.close()
    # A new process: its monotonic clock has nothing to do with the old one's.
    clock.now = 5.0
    clock.wall_offset += 1000.0 - 5.0 + 20  # wall time kept running: 20 s have passed
    second = open_ledger()
    info = second.status(op)
    assert info.remaining_deadline_ms == 40_000
    assert second.next_deadline() == pytest.approx(clock.now + 40)
    clock.advance(40)
    assert second.expire_timed_out() == [op]
    second.close()


def test_the_call_budget_and_ids_continue_after_a_restart(
    open_ledger: Callable[..., Ledger], path: Path, clock: FakeClock
) -> None:
    first = Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall)
    first.register_external_tool(ToolPolicy("t", max_calls=2))
    a = first.start("t", "a")
    first.cancel(a)
    key_a = first.status(a).idempotency_key
    first.close()
    second = Ledger(path=path, clock=clock.monotonic, wall_clock=clock.wall)
    second.register_external_tool(ToolPolicy("t", max_calls=2))
    b = second.start("t", "b")
    info = second.status(b)
    assert (b, info.call_index) == (a + 1, 2)
    assert info.idempotency_key.rsplit("-", 1)[0] != key_a.rsplit("-", 1)[0]
    from supervisor.ledger import CallBudgetExhausted

    with pytest.raises(CallBudgetExhausted):
        second.start("t", "c")
    second.close()


def test_recovered_operations_wait_for_their_tool_to_be_registered_again(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    first = open_ledger()
    ops = populate(first)
    first.close()
    second = open_ledger(register=False)
    assert second.claim_next() is None
    for call in (
        lambda: second.claim(ops["queued"]),
        lambda: second.cancel(ops["claimed"]),
        lambda: second.reconcile(ops["claimed"], ReconcileStatus.running()),
    ):
        with pytest.raises(UnknownTool, match="register it again"):
            call()
    second.register_external_tool(TEXT)
    # Redactors are code: set again after a restart, before this process claims anything.
    second.set_stream_redactor("text.remote", str.upper)
    inv = second.claim_next()
    assert inv is not None and inv.id == ops["queued"]
    assert second.push_chunk(inv.id, "shh").text == "SHH"
    clock.advance(60)
    assert len(second.expire_timed_out()) == 5  # expiry needs no registration
    second.close()


def test_a_journal_is_held_by_one_ledger_at_a_time(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    first = open_ledger()
    with pytest.raises(JournalLocked):
        Ledger(path=path)
    first.close()
    Ledger(path=path).close()


def test_the_journal_is_private_and_append_only(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    populate(ledger)
    ledger.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    conn = sqlite3.connect(path)
    for statement in (
        "UPDATE events SET detail='x'",
        "DELETE FROM events",
        "UPDATE operations SET input=x'00'",
        "DELETE FROM results",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    conn.close()


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a database at all" * 100)
    with pytest.raises(JournalCorrupt):
        Ledger(path=garbage)
    other = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorrupt, match="not a ledger journal"):
        Ledger(path=other)


def test_a_journal_of_another_version_is_refused(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    open_ledger().close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value='99' WHERE key='version'")
    conn.commit()
    conn.close()
    with pytest.raises(JournalCorrupt, match="version '99'"):
        Ledger(path=path)


# -- tampering (with the guard triggers dropped, as an attacker would) ------------------


def tamper(path: Path, *statements: str, params: tuple[Any, ...] = ()) -> None:
    conn = sqlite3.connect(path)
    for table in ("events", "operations", "results"):
        for verb in ("update", "delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    for statement in statements:
        conn.execute(statement, params) if "?" in statement else conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.fixture
def journal(open_ledger: Callable[..., Ledger]) -> dict[str, int]:
    ledger = open_ledger()
    ops = populate(ledger)
    ledger.close()
    return ops


def test_an_edited_event_is_found_on_open(journal: dict[str, int], path: Path) -> None:
    tamper(path, "UPDATE events SET detail='forged' WHERE seq=5")
    with pytest.raises(AuditChainBroken) as caught:
        Ledger(path=path)
    assert caught.value.seq == 5


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(
    journal: dict[str, int], path: Path
) -> None:
    conn = sqlite3.connect(path)
    row = conn.execute("SELECT * FROM events WHERE seq=5").fetchone()
    conn.close()
    fields = (*row[:9], "forged", row[10], row[11])
    tamper(
        path, "UPDATE events SET detail='forged', hash=? WHERE seq=5", params=(event_hash(fields),)
    )
    with pytest.raises(AuditChainBroken) as caught:
        Ledger(path=path)
    assert caught.value.seq == 6


def test_a_claimed_operation_cannot_be_requeued_by_deleting_its_claim(
    journal: dict[str, int], path: Path
) -> None:
    """Removing the claim event (an attempt to make the op re-dispatchable) breaks the chain."""
    tamper(path, f"DELETE FROM events WHERE kind='claimed' AND op_id={journal['claimed']}")
    with pytest.raises(AuditChainBroken):
        Ledger(path=path)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE operations SET input=CAST('rm -rf /' AS BLOB) WHERE op_id={queued}",
        "UPDATE operations SET max_attempts=99 WHERE op_id={claimed}",
        "UPDATE operations SET deadline_wall=deadline_wall+3600 WHERE op_id={claimed}",
        "UPDATE operations SET idempotency_key='sv-forged-1' WHERE op_id={queued}",
        "UPDATE results SET body=CAST('forged' AS BLOB) WHERE op_id={completed}",
        "DELETE FROM results WHERE op_id={failed}",
        "DELETE FROM operations WHERE op_id={queued}",
        "INSERT INTO operations SELECT op_id+100, tool, call_index, idempotency_key||'x', format,"
        " input, max_attempts, max_output_bytes, deadline_wall, stream FROM operations"
        " WHERE op_id={queued}",
    ],
)
def test_payloads_outside_the_chain_are_vouched_for_by_it(
    journal: dict[str, int], path: Path, statement: str
) -> None:
    tamper(path, statement.format(**journal))
    with pytest.raises(JournalCorrupt):
        Ledger(path=path)


def test_a_forged_transition_with_a_valid_hash_is_refused(
    journal: dict[str, int], path: Path
) -> None:
    """Even a correctly chained event must be a transition the ledger would make."""
    conn = sqlite3.connect(path)
    last = conn.execute("SELECT * FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    conn.close()
    op = journal["claimed"]
    fields = (last[0] + 1, last[1], op, "text.remote", 2, 1, "claimed", 0, 0, "", None, last[12])
    tamper(
        path,
        "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        params=(*fields, event_hash(fields)),
    )
    with pytest.raises(JournalCorrupt, match="claim of an operation that is claimed"):
        Ledger(path=path)


def test_a_truncated_tail_is_found_with_an_anchor(
    open_ledger: Callable[..., Ledger], path: Path
) -> None:
    ledger = open_ledger()
    op = ledger.start("text.remote", "x")
    ledger.claim(op)
    ledger.reconcile(op, ReconcileStatus.running())
    anchor = ledger.audit_head()
    ledger.close()
    tamper(path, f"DELETE FROM events WHERE seq={anchor[0]}")
    reopened = open_ledger()  # a consistent prefix: nothing in the file itself is wrong
    with pytest.raises(AuditChainBroken, match="anchor"):
        reopened.verify_audit_chain(anchor=anchor)
    reopened.close()


# -- failure ------------------------------------------------------------------------------


def test_a_failed_write_changes_nothing_and_stops_the_ledger(
    open_ledger: Callable[..., Ledger],
) -> None:
    ledger = open_ledger()
    op = ledger.start("text.remote", "x")
    before = (kinds(ledger), ledger.audit_head(), ledger.status(op).state)
    journal = ledger._journal
    assert journal is not None
    journal._conn.close()  # the disk is gone
    with pytest.raises(JournalFailed):
        ledger.claim(op)
    assert (kinds(ledger), ledger.audit_head(), ledger.status(op).state) == before
    with pytest.raises(JournalFailed, match="reopen the journal"):
        ledger.start("text.remote", "y")
    with pytest.raises(JournalFailed):
        ledger.cancel(op)


def test_a_closed_ledger_refuses_transitions(open_ledger: Callable[..., Ledger]) -> None:
    ledger = open_ledger()
    op = ledger.start("text.remote", "x")
    ledger.close()
    with pytest.raises(JournalFailed, match="closed"):
        ledger.claim(op)


# -- per-call deadlines and caller keys survive too -------------------------------------


def test_a_per_call_deadline_is_journaled_as_an_instant(
    open_ledger: Callable[..., Ledger], clock: FakeClock
) -> None:
    first = open_ledger()
    op = first.start("text.remote", "x", deadline=5.0)  # earlier than the policy's 60 s
    first.close()
    clock.advance(2)
    second = open_ledger()
    assert second.status(op).remaining_deadline_ms == 3000
    clock.advance(3)
    assert second.expire_timed_out() == [op]
    second.close()


def test_a_caller_key_may_be_reused_and_survives(open_ledger: Callable[..., Ledger]) -> None:
    first = open_ledger()
    done = first.start("text.remote", "x", idempotency_key="order-42.v1")
    first.claim(done)
    first.fail(done, "transient outage")
    again = first.start("text.remote", "x", idempotency_key="order-42.v1")
    first.claim(again)
    first.close()
    second = open_ledger()
    assert second.indeterminate()[0].idempotency_key == "order-42.v1"
    second.close()
