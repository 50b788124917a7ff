"""A real worker subprocess on fds 3/4, driven through HostConnection by a test host."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_adapters import SECRET
from worker_harness import EXAMPLES, HOSTILE, WorkerProcess

from worker_runtime.protocol.host import (
    CancelAcknowledged,
    CancelUnsupported,
    ChunkReceived,
    ErrorReceived,
    PongReceived,
    ReconcileAnswered,
    ResultReceived,
)
from worker_runtime.protocol.messages import (
    JsonPayload,
    StreamLimits,
    Succeeded,
    TextPayload,
    UnknownState,
    grant,
)

BOTH = (EXAMPLES, HOSTILE)


def _result(event: Any) -> Any:
    assert isinstance(event, ResultReceived), event
    return event.payload.value


def _result_rid(event: Any) -> str:
    assert isinstance(event, ResultReceived), event
    return event.rid


def _error(event: Any) -> ErrorReceived:
    assert isinstance(event, ErrorReceived), event
    return event


def _close(w: WorkerProcess) -> None:
    w.send(w.conn.close())
    assert w.read_eof() == []
    w.conn.receive_eof()
    assert w.wait() == 0


def test_handshake_invoke_and_close_exits_0() -> None:
    grants = [grant("text.upper", max_calls=2), grant("json.echo", format="json")]
    with WorkerProcess(grants) as w:
        ready = w.handshake()
        assert [t.name for t in ready.tools] == ["text.upper", "json.echo"]
        assert ready.impl == "sandvisor-worker-python"
        w.invoke("text.upper", "héllo")
        assert _result(w.next_event()) == "HÉLLO"
        w.invoke("json.echo", {"a": [1, {"b": None}]})
        assert _result(w.next_event()) == {"a": [1, {"b": None}]}
        _close(w)


def test_chunks_stream_in_order_within_the_grant() -> None:
    stream = StreamLimits(max_chunks=3, max_chunk_bytes=16, max_total_bytes=64)
    with WorkerProcess([grant("progress.count", stream=stream)]) as w:
        w.handshake()
        rid = w.invoke("progress.count", "5")
        events = w.events(4)
        assert events[:3] == [ChunkReceived(rid, i, str(i)) for i in (1, 2, 3)]
        assert _result(events[3]) == "counted 5, streamed 3"  # ctx.emit said False twice
        assert w.conn.calls_used("progress.count") == 1
        _close(w)


def test_emit_returns_false_once_the_stream_limit_is_reached() -> None:
    stream = StreamLimits(max_chunks=4, max_chunk_bytes=16, max_total_bytes=64)
    with WorkerProcess([grant("emit.flood", stream=stream)], adapters=BOTH) as w:
        w.handshake()
        w.invoke("emit.flood", "50")
        *chunks, last = w.events(5)
        assert all(isinstance(c, ChunkReceived) for c in chunks)
        assert _result(last) == "accepted 4"
        _close(w)


def test_emit_without_a_stream_grant_sends_nothing() -> None:
    with WorkerProcess([grant("emit.flood")], adapters=BOTH) as w:
        w.handshake()
        w.invoke("emit.flood", "5")
        assert _result(w.next_event()) == "accepted 0"
        _close(w)


@pytest.mark.parametrize(
    ("tool", "code", "message", "retryable"),
    [
        ("fail.secret", "adapter_error", "adapter failed", False),
        ("fail.exposed", "adapter_error", "ValueError: visible detail", False),
        ("fail.invalid", "invalid_input", "the input is not acceptable", False),
        ("fail.unavailable", "unavailable", "try again later", True),
        ("fail.exit", "adapter_error", "adapter failed", False),
        ("fail.sloppy", "adapter_error", "_SloppyError: ", False),
        ("ack.uninvited", "adapter_error", "adapter raised Cancelled without a cancel", False),
        ("bad.output", "invalid_output", "result for a text grant must be str, not int", False),
    ],
)
def test_adapter_failures_are_error_frames_and_the_session_lives_on(
    tool: str, code: str, message: str, retryable: bool
) -> None:
    with WorkerProcess([grant(tool), grant("text.upper")], adapters=BOTH) as w:
        w.handshake()
        w.invoke(tool, "x")
        error = _error(w.next_event())
        assert (error.code, error.message, error.retryable) == (code, message, retryable)
        w.invoke("text.upper", "still alive")
        assert _result(w.next_event()) == "STILL ALIVE"
        _close(w)


def test_a_secret_in_an_exception_never_reaches_the_host_frames() -> None:
    with WorkerProcess([grant("fail.secret")], adapters=BOTH) as w:
        w.handshake()
        w.invoke("fail.secret", "x")
        line = w.read_line()
        assert line is not None and SECRET.encode() not in line
        assert _error(w.conn.receive(line)).message == "adapter failed"
        _close(w)
        assert SECRET in w.stderr_text()  # diagnostics keep it for the operator


def test_output_over_max_output_bytes_becomes_an_error_frame() -> None:
    with WorkerProcess([grant("big.output", max_output_bytes=100)], adapters=BOTH) as w:
        w.handshake()
        w.invoke("big.output", "101")
        error = _error(w.next_event())
        assert error.code == "output_too_large"
        _close(w)


def test_deadline_attempt_and_key_reach_the_context() -> None:
    with WorkerProcess([grant("context.echo", format="json")], adapters=BOTH) as w:
        w.handshake()
        rid = w.invoke("context.echo", {}, attempt=3, idempotency_key="op-42", deadline_ms=5000)
        out = _result(w.next_event())
        assert out["rid"] == rid and out["tool"] == "context.echo"
        assert (out["attempt"], out["idempotency_key"], out["cancelled"]) == (3, "op-42", False)
        assert 0 < out["remaining"] <= 5.0
        _close(w)


# -- cancellation ------------------------------------------------------------------------


def test_cancel_acknowledged_is_the_only_frame_for_the_call() -> None:
    with WorkerProcess([grant("sleep"), grant("text.upper")]) as w:
        w.handshake()
        rid = w.invoke("sleep", "30")
        cid = w.cancel(rid)
        assert w.next_event() == CancelAcknowledged(rid, cid)
        w.invoke("text.upper", "next")  # no stray result of rid can arrive in between
        assert _result(w.next_event()) == "NEXT"
        _close(w)


def test_cancel_of_a_stubborn_adapter_gives_result_then_too_late() -> None:
    with WorkerProcess([grant("stubborn.sleep")]) as w:
        w.handshake()
        rid = w.invoke("stubborn.sleep", "0.3")
        w.cancel(rid)
        first = w.read_line()
        assert first is not None and b'"type":"result"' in first
        assert w.conn.receive(first) is None  # held back until too_late
        event = w.next_event()
        assert isinstance(event, ResultReceived) and event.too_late and event.rid == rid
        _close(w)


def test_cancel_after_the_call_finished_is_answered_too_late() -> None:
    with WorkerProcess([grant("text.upper")]) as w:
        w.handshake()
        rid = w.invoke("text.upper", "quick")
        w.wait_for_output()  # the worker has answered; we have not read it yet
        w.cancel(rid)
        event = w.next_event()
        assert isinstance(event, ResultReceived) and event.too_late
        assert event.payload == TextPayload("QUICK")
        _close(w)


def test_cancel_of_an_uncancellable_adapter_is_unsupported_and_it_runs_on() -> None:
    with WorkerProcess([grant("uncancellable.sleep")]) as w:
        w.handshake()
        rid = w.invoke("uncancellable.sleep", "0.2")
        cid = w.cancel(rid)
        assert w.next_event() == CancelUnsupported(rid, cid)
        event = w.next_event()
        assert isinstance(event, ResultReceived) and not event.too_late
        _close(w)


def test_cancel_of_a_streaming_call_mid_stream() -> None:
    stream = StreamLimits(max_chunks=1000, max_chunk_bytes=16, max_total_bytes=10_000)
    with WorkerProcess([grant("progress.count", stream=stream)]) as w:
        w.handshake()
        rid = w.invoke("progress.count", "1000/0.01")
        assert isinstance(w.next_event(), ChunkReceived)
        cid = w.cancel(rid)
        while isinstance(event := w.next_event(), ChunkReceived):
            pass
        assert event == CancelAcknowledged(rid, cid)
        _close(w)


# -- several in flight, reconcile, ping ------------------------------------------------


def test_several_calls_in_flight_run_concurrently() -> None:
    grants = [grant("sleep", max_calls=2), grant("text.upper")]
    with WorkerProcess(grants, max_in_flight=3) as w:
        w.handshake()
        slow = w.invoke("sleep", "0.5")
        slower = w.invoke("sleep", "0.6")
        quick = w.invoke("text.upper", "q")
        rids = [_result_rid(e) for e in w.events(3)]
        # run one at a time, the quick call would have come last
        assert rids[0] == quick and set(rids) == {quick, slow, slower}
        _close(w)


def test_reconcile_reports_what_the_session_remembers() -> None:
    with WorkerProcess([grant("text.upper", max_calls=1)]) as w:
        w.handshake()
        w.invoke("text.upper", "a", idempotency_key="op-a")
        w.next_event()
        for key, status in (("op-a", Succeeded(TextPayload("A"))), ("op-z", UnknownState())):
            rid, line = w.conn.reconcile("text.upper", key)
            w.send(line)
            assert w.next_event() == ReconcileAnswered(rid, "text.upper", key, status)
        _close(w)


def test_ping_pong() -> None:
    with WorkerProcess([grant("text.upper")]) as w:
        w.handshake()
        nonce, line = w.conn.ping("are you there?")
        w.send(line)
        assert w.next_event() == PongReceived(nonce)
        _close(w)


# -- diagnostics cannot corrupt the protocol ---------------------------------------------


def test_adapters_flooding_stdout_and_stderr_do_not_corrupt_the_protocol() -> None:
    with WorkerProcess([grant("flood.output"), grant("text.upper")], adapters=BOTH) as w:
        w.handshake()
        w.invoke("flood.output", str(2 * 1024 * 1024))
        assert _result(w.next_event(timeout=60)) == "flooded"
        w.invoke("text.upper", "after")
        assert _result(w.next_event()) == "AFTER"
        _close(w)
        w.kill()
        assert w.stdout.total > 2 * 1024 * 1024 and w.stderr.total > 2 * 1024 * 1024


def test_json_payload_round_trip_through_a_real_worker() -> None:
    value = {"nested": [{"k": "v" * 100}] * 10, "unicode": "日本語"}
    with WorkerProcess([grant("json.echo", format="json")]) as w:
        w.handshake()
        w.invoke("json.echo", value)
        event = w.next_event()
        assert isinstance(event, ResultReceived) and event.payload == JsonPayload(value)
        _close(w)
