"""One JSON audit event per call: schema, the stream, callbacks, the log file, and the
link to the ledger's hash chain."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest
import trio
from sv_support import supervisor

from supervisor.workers.call_audit import AuditHub, CallEvent, encode_event
from supervisor.workers.outcome import Outcome

FIELDS = {
    "event", "v", "time", "op_id", "session_id", "rid", "idempotency_key", "tool", "attempt",
    "status", "error_code", "error", "kill_reason", "termination", "queued_ms", "run_ms",
    "total_ms", "bytes_in", "bytes_out", "chunks", "peak_memory", "ledger_seq", "ledger_hash",
}  # fmt: skip


async def test_one_event_per_call_in_every_sink(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    seen: list[CallEvent] = []
    async with supervisor(audit_log=log, on_audit=seen.append) as sup:
        stream = sup.audit_events()
        outs = [
            await sup.invoke("echo", "hello"),
            await sup.invoke("chunks", "3"),
            await sup.invoke("fail", "bad"),
            await sup.invoke("hang", "", deadline=0.2),
        ]
        streamed = [stream.receive_nowait() for _ in outs]
        with pytest.raises(anyio.WouldBlock):
            stream.receive_nowait()
        stream.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == len(seen) == len(streamed) == 4
    assert [e.status for e in seen] == ["completed", "completed", "failed", "indeterminate"]
    for line, event, out in zip(lines, seen, outs, strict=True):
        assert set(line) == FIELDS and line["event"] == "call" and line["v"] == 1
        assert msgspec.convert(line, CallEvent) == event
        assert (event.op_id, event.session_id, event.rid) == (out.op_id, out.session_id, out.rid)
        assert event.tool == out.tool and event.attempt == out.attempt
    assert seen[0].bytes_in == 5 and seen[0].bytes_out == 5 and seen[0].peak_memory
    assert seen[1].chunks == 3
    assert seen[2].error_code == "nope" and seen[2].error == "bad"
    assert seen[3].kill_reason == "deadline" and seen[3].termination == "timeout"
    assert seen[3].total_ms >= seen[3].run_ms >= 200


async def test_events_name_the_ledger_event_that_vouches_for_them() -> None:
    seen: list[CallEvent] = []
    async with supervisor(on_audit=seen.append) as sup:
        await sup.invoke("echo", "x")
        await sup.invoke("hang", "", deadline=0.2)
        chain = {e.seq: e for e in sup.ledger.audit()}
        for event in seen:
            assert event.ledger_seq is not None
            link = chain[event.ledger_seq]
            assert link.hash == event.ledger_hash and link.op_id == event.op_id
        assert [chain[e.ledger_seq].kind for e in seen if e.ledger_seq] == [
            "completed",
            "indeterminate",
        ]


async def test_cancelled_invokes_are_audited_too() -> None:
    seen: list[CallEvent] = []
    async with supervisor(on_audit=seen.append) as sup:
        with trio.move_on_after(0.2):
            await sup.invoke("sleep", "9")
    assert [e.status for e in seen] == ["cancelled"]


def test_a_slow_stream_drops_and_counts() -> None:
    hub = AuditHub()
    stream = hub.subscribe(capacity=2)
    event = CallEvent.of(Outcome(status="completed", tool="t"), time=0.0, ledger_head=None)
    for _ in range(5):
        hub.emit(event)
    assert stream.dropped == 3
    assert stream.receive_nowait() == event
    assert encode_event(event).endswith(b"\n")


def test_an_unwritable_log_is_reported(tmp_path: Path) -> None:
    hub = AuditHub(tmp_path / "a.jsonl")
    assert hub._fd is not None
    import os

    os.close(hub._fd)
    hub._fd = os.open("/dev/full", os.O_WRONLY)
    hub.emit(CallEvent.of(Outcome(status="failed", tool="t"), time=0.0, ledger_head=None))
    assert hub.failure is not None and "cannot be written" in hub.failure
    hub.close()


async def test_a_failed_audit_log_stops_new_calls(tmp_path: Path) -> None:
    import os

    from supervisor import SupervisorError

    async with supervisor(audit_log=tmp_path / "a.jsonl") as sup:
        hub = sup._audit
        assert hub._fd is not None
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, hub._fd)
        os.close(full)
        assert (await sup.invoke("echo", "x")).status == "completed"  # this one is lost
        with pytest.raises(SupervisorError, match="audit log"):
            await sup.invoke("echo", "y")


def test_the_hub_is_active_exactly_while_an_event_would_go_somewhere(tmp_path: Path) -> None:
    hub = AuditHub()
    assert not hub.active
    stream = hub.subscribe()
    assert hub.active
    stream.close()
    assert not hub.active
    remove = hub.add_callback(lambda event: None)
    assert hub.active
    remove()
    remove()  # harmless twice
    assert not hub.active
    logged = AuditHub(tmp_path / "audit.jsonl")
    assert logged.active
    logged.close()
    assert not logged.active
    hub = AuditHub(callbacks=(lambda event: None,))
    assert hub.active
