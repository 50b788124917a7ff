"""The audit chain: hashes, links, the ring, subscribers, one terminal event per op."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import pytest
from ledger_helpers import FakeClock

from supervisor.ledger import (
    AuditChainBroken,
    AuditEvent,
    AuditKind,
    Ledger,
    RetryClass,
    StreamPolicy,
    ToolPolicy,
)
from supervisor.ledger.audit import GENESIS_HASH, TERMINAL_KINDS, verify_chain


def busy(ledger: Ledger, clock: FakeClock) -> list[int]:
    """A little of everything: five operations through five different endings."""
    ops = [ledger.start("text.echo", f"v{n}") for n in range(5)]
    for op in ops:
        ledger.claim(op)
    ledger.push_chunk(ops[0], "progress")
    ledger.retry(ops[0], RetryClass.TRANSIENT)
    ledger.complete(ops[0], "done")
    ledger.fail(ops[1], "broken")
    ledger.request_cancellation(ops[2])
    ledger.confirm_cancellation(ops[2])
    ledger.mark_indeterminate(ops[3], "eof")
    clock.advance(10)
    ledger.expire_timed_out()
    return ops


def test_events_chain_from_genesis(ledger: Ledger, clock: FakeClock) -> None:
    busy(ledger, clock)
    events = ledger.audit()
    assert events[0].prev_hash == GENESIS_HASH
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))
    assert verify_chain(events) == (len(events), events[-1].hash)
    assert ledger.verify_audit_chain() == len(events)
    assert ledger.audit_head() == (events[-1].seq, events[-1].hash)


def test_events_record_what_happened(ledger: Ledger, clock: FakeClock, mode: str) -> None:
    ops = busy(ledger, clock)
    started = ledger.audit()[0]
    assert (
        started.kind,
        started.op_id,
        started.tool,
        started.call_index,
        started.attempt,
        started.bytes_in,
    ) == ("started", ops[0], "text.echo", 1, 0, 2)
    assert started.detail == ledger.status(ops[0]).idempotency_key
    assert started.time == clock.wall() - 10
    completed = next(e for e in ledger.audit() if e.kind == "completed")
    assert (completed.attempt, completed.bytes_out) == (2, 4)
    # A digest vouches for a journaled payload, so only a durable ledger has them.
    assert (completed.digest is not None) == (started.digest is not None) == (mode == "durable")


def test_exactly_one_terminal_event_per_finished_operation(
    ledger: Ledger, clock: FakeClock
) -> None:
    ops = busy(ledger, clock)
    terminal = [e.op_id for e in ledger.audit() if e.kind in TERMINAL_KINDS]
    assert sorted(terminal) == ops
    assert [str(e.kind) for e in ledger.audit() if e.kind in TERMINAL_KINDS] == [
        "completed",
        "failed",
        "cancelled",
        "timed_out",
        "timed_out",
    ]


@pytest.mark.parametrize("field", ["detail", "op_id", "kind", "bytes_out", "time", "digest"])
def test_any_edit_breaks_the_chain(ledger: Ledger, clock: FakeClock, field: str) -> None:
    busy(ledger, clock)
    events = list(ledger.audit())
    value: Any = {
        "detail": "forged",
        "op_id": 99,
        "kind": "completed",
        "bytes_out": 1,
        "time": 0.0,
        "digest": "0" * 64,
    }[field]
    events[3] = msgspec.structs.replace(events[3], **{field: value})
    with pytest.raises(AuditChainBroken) as caught:
        verify_chain(events)
    assert caught.value.seq == 4


def test_a_recomputed_edit_breaks_the_next_link(ledger: Ledger, clock: FakeClock) -> None:
    from supervisor.ledger.audit import event_hash

    busy(ledger, clock)
    events = list(ledger.audit())
    forged = msgspec.structs.replace(events[3], detail="forged")
    events[3] = msgspec.structs.replace(forged, hash=event_hash(forged.fields()))
    with pytest.raises(AuditChainBroken) as caught:
        verify_chain(events)
    assert caught.value.seq == 5


def test_removed_or_reordered_events_break_the_chain(ledger: Ledger, clock: FakeClock) -> None:
    busy(ledger, clock)
    events = list(ledger.audit())
    with pytest.raises(AuditChainBroken):
        verify_chain(events[:2] + events[3:])
    with pytest.raises(AuditChainBroken):
        verify_chain([events[1], events[0], *events[2:]])


def test_an_anchor_pins_the_chain(ledger: Ledger, clock: FakeClock) -> None:
    busy(ledger, clock)
    seq, head = ledger.audit_head()
    assert ledger.verify_audit_chain(anchor=(seq, head)) == seq
    with pytest.raises(AuditChainBroken):
        ledger.verify_audit_chain(anchor=(seq, "f" * 64))
    with pytest.raises(AuditChainBroken):
        ledger.verify_audit_chain(anchor=(seq + 1, head))


def test_the_ring_is_bounded_and_keeps_the_newest(clock: FakeClock) -> None:
    ledger = Ledger(audit_capacity=4, clock=clock.monotonic, wall_clock=clock.wall)
    ledger.register_external_tool(ToolPolicy("t", max_calls=10))
    for _ in range(3):
        ledger.complete(ledger.claim(ledger.start("t", "x")).id, "y")
    events = ledger.audit()
    assert [e.seq for e in events] == [6, 7, 8, 9]
    assert ledger.verify_audit_chain() == 4


def test_an_unread_chain_is_the_same_chain(clock: FakeClock) -> None:
    """Events nobody reads are chained when somebody does: the same events, the same
    hashes, as a ledger whose every event was heard at once (a subscriber makes it so),
    whether the trail is read after each event, past the ring, or never until the end."""

    def run(ledger: Ledger, read_every: int) -> list[AuditEvent]:
        ledger.register_external_tool(ToolPolicy("t", max_calls=10_000))
        for n in range(1, 3000):
            op = ledger.claim(ledger.start("t", str(n))).id
            ledger.complete(op, "y")
            if n % read_every == 0:
                assert ledger.audit_head() == (ledger.audit()[-1].seq, ledger.audit()[-1].hash)
        return list(ledger.audit())

    def new_ledger() -> Ledger:  # the same nonce: the same idempotency keys
        return Ledger(
            audit_capacity=64,
            clock=clock.monotonic,
            wall_clock=clock.wall,
            session_nonce=b"n" * 32,
        )

    heard_ledger = new_ledger()
    heard: list[AuditEvent] = []
    heard_ledger.subscribe_audit(heard.append)
    reference = run(heard_ledger, 10_000)
    assert reference == heard[-64:] and len(heard) == 3 * 2999
    for read_every in (1, 7, 1000, 10_000):
        ledger = new_ledger()
        assert run(ledger, read_every) == reference
        assert ledger.audit_head() == heard_ledger.audit_head()
        assert ledger.verify_audit_chain() == 64
    # a subscriber that comes midway hears what follows, chained after what it did not
    ledger = new_ledger()
    ledger.register_external_tool(ToolPolicy("t", max_calls=10))
    ledger.start("t", "1")
    late: list[AuditEvent] = []
    ledger.subscribe_audit(late.append)
    ledger.claim(1)
    assert [(e.seq, e.prev_hash) for e in late] == [(2, ledger.audit()[0].hash)]
    assert ledger.verify_audit_chain() == 2


def test_subscribers_see_every_event_once_in_order(ledger: Ledger, clock: FakeClock) -> None:
    seen: list[AuditEvent] = []
    unsubscribe = ledger.subscribe_audit(seen.append)
    busy(ledger, clock)
    assert seen == list(ledger.audit())
    unsubscribe()
    unsubscribe()  # harmless twice
    ledger.start("text.echo", "quiet")
    assert len(seen) == len(ledger.audit()) - 1


def test_a_batch_publishes_when_it_commits(ledger: Ledger) -> None:
    seen: list[str] = []
    ledger.subscribe_audit(lambda event: seen.append(str(event.kind)))
    with ledger.batch():
        op = ledger.start("text.echo", "x")
        ledger.claim(op)
        with ledger.batch():
            ledger.complete(op, "y")
        assert seen == []
    assert seen == ["started", "claimed", "completed"]


def test_a_batch_that_raises_still_commits_what_it_did(ledger: Ledger) -> None:
    with pytest.raises(RuntimeError), ledger.batch():
        op = ledger.start("text.echo", "x")
        raise RuntimeError("host bug")
    assert ledger.status(op).state == "queued"


def test_terminal_kinds_are_the_five_outcomes() -> None:
    assert {str(k) for k in TERMINAL_KINDS} == {
        "completed",
        "denied",
        "failed",
        "cancelled",
        "timed_out",
    }
    assert set(AuditKind) > TERMINAL_KINDS


def test_stream_denials_are_audited_with_their_reason(ledger_factory: Any) -> None:
    ledger: Ledger = ledger_factory()
    ledger.register_external_tool(ToolPolicy("t", stream=StreamPolicy(1, 4, 4, 4)))
    op = ledger.start("t", "x")
    ledger.claim(op)
    from supervisor.ledger import StreamLimitExceeded

    with pytest.raises(StreamLimitExceeded):
        ledger.push_chunk(op, "12345")
    denied = ledger.audit()[-1]
    assert (denied.kind, denied.bytes_in, denied.detail) == ("stream_denied", 5, "max_chunk_bytes")
