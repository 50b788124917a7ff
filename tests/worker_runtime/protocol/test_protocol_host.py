"""HostConnection: what it refuses to send, what it accepts, and the cancellation matrix."""

from __future__ import annotations

from typing import Any

import pytest
from proto_fixtures import GRANTS, KEYS, SID, HostSide, deep

from worker_runtime.protocol.errors import (
    BadToolSpec,
    ConnectionDead,
    FormatMismatch,
    ProtocolError,
    Refused,
    StreamViolation,
    ToolNotServed,
    UnexpectedEof,
    UnexpectedMessage,
    UnknownRequest,
)
from worker_runtime.protocol.host import (
    CancelAcknowledged,
    CancelUnsupported,
    ChunkReceived,
    ErrorReceived,
    HostConnection,
    PongReceived,
    ReconcileAnswered,
    ResultReceived,
    WorkerReady,
)
from worker_runtime.protocol.limits import MAX_SESSION_IDS
from worker_runtime.protocol.messages import (
    CancelResult,
    Chunk,
    Error,
    Failed,
    Invoke,
    JsonPayload,
    Pong,
    Ready,
    Reconcile,
    Reconciled,
    Result,
    Succeeded,
    TextPayload,
    ToolSpec,
    grant,
)

# -- the cancellation matrix (reference-splash.md section 4, protocol.md section 7) --------

RESULT = "result"
ERROR = "error"
ACK = "acknowledged"
TOO_LATE = "too_late"
UNSUPPORTED = "unsupported"

#: state -> frame -> expected: an event type, None (held back), or a ProtocolError.
MATRIX: dict[str, dict[str, Any]] = {
    "no_cancel": {
        RESULT: ResultReceived,
        ERROR: ErrorReceived,
        ACK: ProtocolError,
        TOO_LATE: ProtocolError,
        UNSUPPORTED: ProtocolError,
    },
    "cancel_sent": {
        RESULT: None,
        ERROR: None,
        ACK: CancelAcknowledged,
        TOO_LATE: ProtocolError,
        UNSUPPORTED: CancelUnsupported,
    },
    "result_held": {
        RESULT: ProtocolError,
        ERROR: ProtocolError,
        ACK: ProtocolError,
        TOO_LATE: ResultReceived,
        UNSUPPORTED: ProtocolError,
    },
    "acknowledged": {
        RESULT: ProtocolError,
        ERROR: ProtocolError,
        ACK: ProtocolError,
        TOO_LATE: ProtocolError,
        UNSUPPORTED: ProtocolError,
    },
    "unsupported": {
        RESULT: ResultReceived,
        ERROR: ErrorReceived,
        ACK: ProtocolError,
        TOO_LATE: ProtocolError,
        UNSUPPORTED: ProtocolError,
    },
}


def _in_state(state: str) -> tuple[HostSide, str, str | None]:
    side = HostSide().opened()
    rid = side.invoke()
    cid = None
    if state != "no_cancel":
        cid = side.cancel(rid)
    if state == "result_held":
        assert side.say(Result, rid=rid, payload=TextPayload("X")) is None
    elif state == "acknowledged":
        assert isinstance(
            side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome=ACK),
            CancelAcknowledged,
        )
    elif state == "unsupported":
        event = side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome=UNSUPPORTED)
        assert isinstance(event, CancelUnsupported)
    return side, rid, cid


def _frame(side: HostSide, frame: str, rid: str, cid: str | None) -> Any:
    if frame == RESULT:
        return side.say(Result, rid=rid, payload=TextPayload("X"))
    if frame == ERROR:
        return side.say(Error, rid=rid, code="adapter_error", message="m", retryable=False)
    return side.say(CancelResult, cid=cid or "c9", rid=rid, tool="text.upper", outcome=frame)


@pytest.mark.parametrize(("state", "frame"), [(s, f) for s, row in MATRIX.items() for f in row])
def test_cancellation_matrix_on_the_host(state: str, frame: str) -> None:
    side, rid, cid = _in_state(state)
    expected = MATRIX[state][frame]
    if expected is ProtocolError:
        with pytest.raises(ProtocolError):
            _frame(side, frame, rid, cid)
        assert side.host.dead
        return
    event = _frame(side, frame, rid, cid)
    if expected is None:
        assert event is None
        assert side.host.holds_terminal(rid) and rid in side.host.in_flight
        return
    assert isinstance(event, expected)
    terminal = expected in (ResultReceived, ErrorReceived, CancelAcknowledged)
    assert (rid in side.host.in_flight) is not terminal


@pytest.mark.parametrize("frame", [RESULT, ERROR])
def test_a_held_terminal_frame_is_reported_after_too_late(frame: str) -> None:
    side, rid, cid = _in_state("cancel_sent")
    assert _frame(side, frame, rid, cid) is None
    event = side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome=TOO_LATE)
    assert isinstance(event, ResultReceived if frame == RESULT else ErrorReceived)
    assert event.too_late and event.rid == rid
    assert side.host.in_flight == ()


def test_unsupported_keeps_the_call_in_flight_and_forbids_a_second_cancel() -> None:
    side, rid, _ = _in_state("unsupported")
    assert side.host.in_flight == (rid,)
    with pytest.raises(Refused) as info:
        side.host.cancel(rid)
    assert info.value.code == "cancel_repeated"
    event = side.say(Result, rid=rid, payload=TextPayload("X"))
    assert isinstance(event, ResultReceived) and not event.too_late


def test_chunks_between_cancel_and_outcome_are_accepted() -> None:
    side = HostSide().opened()
    rid = side.invoke("progress.count", "3")
    side.cancel(rid)
    assert isinstance(side.say(Chunk, rid=rid, index=1, text="1"), ChunkReceived)


def test_a_poisoned_buffered_result_is_never_reported() -> None:
    side, rid, cid = _in_state("cancel_sent")
    assert side.say(Result, rid=rid, payload=TextPayload("X")) is None
    with pytest.raises(UnexpectedEof):
        side.host.receive_eof()  # the worker died before too_late
    with pytest.raises(ConnectionDead):
        side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome=TOO_LATE)


# -- refusals: nothing sealed, nothing changed ---------------------------------------------


def _refused(side: HostSide, code: str, call: Any) -> None:
    before = (side.host.ids_used, side.host.in_flight)
    with pytest.raises(Refused) as info:
        call()
    assert info.value.code == code
    assert (side.host.ids_used, side.host.in_flight) == before
    assert not side.host.dead
    _, line = side.host.ping()  # the next frame still carries the next sequence number
    side.read(line)


@pytest.mark.parametrize(
    ("code", "tool", "value"),
    [
        ("unknown_tool", "nope", "x"),
        ("input_too_large", "text.upper", "x" * 65),
        ("input_too_large", "text.upper", "é" * 33),  # 66 UTF-8 bytes
        ("format_mismatch", "text.upper", {"a": 1}),
        ("format_mismatch", "json.echo", "text"),
        ("format_mismatch", "json.echo", 5),
        ("format_mismatch", "json.echo", {"a": object()}),
        ("format_mismatch", "text.upper", "\ud800"),
        ("payload_too_deep", "json.echo", deep(33)),
    ],
)
def test_invoke_refuses_what_the_worker_must_reject(code: str, tool: str, value: Any) -> None:
    side = HostSide().opened()
    _refused(side, code, lambda: side.host.invoke(tool, value, idempotency_key="k"))


@pytest.mark.parametrize(
    ("code", "kw"),
    [
        ("bad_id", {"idempotency_key": "Not Valid"}),
        ("bad_attempt", {"idempotency_key": "k", "attempt": 0}),
        ("bad_attempt", {"idempotency_key": "k", "attempt": True}),
        ("bad_deadline", {"idempotency_key": "k", "deadline_ms": -1}),
        ("bad_deadline", {"idempotency_key": "k", "deadline_ms": 1.5}),
    ],
)
def test_invoke_refuses_bad_fields(code: str, kw: dict[str, Any]) -> None:
    side = HostSide().opened()
    _refused(side, code, lambda: side.host.invoke("text.upper", "x", **kw))


def test_invoke_refuses_beyond_max_calls() -> None:
    side = HostSide(max_in_flight=8).opened()
    for _ in range(3):
        rid = side.invoke("json.echo", [1])
        side.say(Result, rid=rid, payload=JsonPayload([1]))
    _refused(
        side,
        "call_budget_exhausted",
        lambda: side.host.invoke("json.echo", [], idempotency_key="k"),
    )


def test_invoke_refuses_beyond_max_in_flight() -> None:
    side = HostSide(max_in_flight=2).opened()
    side.invoke()
    side.invoke()
    _refused(
        side, "too_many_in_flight", lambda: side.host.invoke("text.upper", "x", idempotency_key="k")
    )


def test_invoke_keeps_an_id_free_for_each_uncancelled_call() -> None:
    side = HostSide(grants=[grant("t", max_calls=10)], max_in_flight=4).opened()
    while side.host.ids_used < MAX_SESSION_IDS - 3:  # reconciles spend ids, pings do not
        rid, line = side.host.reconcile("t", "k")
        side.read(line)
        side.say(Reconciled, rid=rid, tool="t", operation_key="k", status=Failed("x"))
    rid = side.invoke("t", "x")  # leaves 2: its own cancel id, and one more
    _refused(side, "id_capacity_exhausted", lambda: side.host.invoke("t", "y", idempotency_key="k"))
    side.cancel(rid)  # the reserved id is there
    assert side.host.ids_used == MAX_SESSION_IDS - 1


def test_cancel_refusals() -> None:
    side = HostSide().opened()
    _refused(side, "not_in_flight", lambda: side.host.cancel("r1"))
    rid = side.invoke()
    side.cancel(rid)
    _refused(side, "cancel_repeated", lambda: side.host.cancel(rid))


def test_close_refused_while_in_flight_and_everything_refused_after_close() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    _refused(side, "close_while_in_flight", side.host.close)
    side.say(Result, rid=rid, payload=TextPayload("X"))
    side.read(side.host.close())
    assert side.host.closing
    for call in (
        lambda: side.host.invoke("text.upper", "x", idempotency_key="k"),
        lambda: side.host.ping(),
        lambda: side.host.reconcile("text.upper", "k"),
        side.host.close,
    ):
        with pytest.raises(Refused) as info:
            call()
        assert info.value.code == "closing"


def test_sends_before_open_are_refused_and_open_is_sent_once() -> None:
    host = HostConnection(SID, KEYS, GRANTS)
    with pytest.raises(Refused) as info:
        host.ping()
    assert info.value.code == "not_open"
    host.open()
    with pytest.raises(Refused):
        host.open()


@pytest.mark.parametrize("nonce", ["", "x" * 65])
def test_ping_refuses_a_bad_nonce(nonce: str) -> None:
    side = HostSide().opened()
    _refused(side, "bad_nonce", lambda: side.host.ping(nonce))


def test_ping_refuses_a_pending_nonce() -> None:
    side = HostSide().opened()
    side.read(side.host.ping("n")[1])
    _refused(side, "duplicate_nonce", lambda: side.host.ping("n"))


def test_reconcile_refusals() -> None:
    side = HostSide().opened()
    _refused(side, "unknown_tool", lambda: side.host.reconcile("nope", "k"))
    _refused(side, "bad_id", lambda: side.host.reconcile("text.upper", "K"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": "Bad"},
        {"grants": [grant("t"), grant("t")]},
        {"grants": [grant("t", max_calls=0)]},
        {"grants": [grant("Bad")]},
        {"max_in_flight": 0},
    ],
)
def test_construction_refuses_invalid_arguments(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"session_id": SID, "keys": KEYS, "grants": GRANTS, "max_in_flight": 1}
    args.update(kwargs)
    with pytest.raises(ValueError):
        HostConnection(**args)


def test_a_dead_connection_refuses_every_send() -> None:
    side = HostSide().opened()
    with pytest.raises(UnknownRequest):
        side.say(Result, rid="r1", payload=TextPayload("x"))
    for call in (side.host.ping, side.host.close, lambda: side.host.cancel("r1")):
        with pytest.raises(ConnectionDead):
            call()
    assert isinstance(side.host.failure, UnknownRequest)


# -- what the host accepts -----------------------------------------------------------------


def test_invoke_frame_carries_every_field() -> None:
    side = HostSide().opened()
    rid, line = side.host.invoke(
        "json.echo", {"q": [1]}, idempotency_key="op-7", attempt=3, deadline_ms=250
    )
    msg = side.read(line)
    assert isinstance(msg, Invoke)
    assert (msg.rid, msg.tool, msg.payload, msg.attempt, msg.idempotency_key, msg.deadline_ms) == (
        rid,
        "json.echo",
        JsonPayload({"q": [1]}),
        3,
        "op-7",
        250,
    )


def test_minted_ids_are_unique_per_session() -> None:
    side = HostSide(max_in_flight=2).opened()
    ids = [side.invoke()]
    rid, line = side.host.reconcile("text.upper", "k")
    side.read(line)
    ids += [rid, side.cancel(ids[0])]
    nonce, line = side.host.ping()
    side.read(line)
    ids.append(nonce)
    assert len(set(ids)) == 4


def test_ready_must_serve_every_granted_tool() -> None:
    side = HostSide()
    side.host.open()
    with pytest.raises(ToolNotServed):
        side.say(Ready, tools=side.described(["text.upper"]), impl="x", version="0")


def test_ready_may_list_more_tools_and_comes_once() -> None:
    side = HostSide()
    side.host.open()
    tools = side.described([*side.host.grants, "extra"])
    event = side.say(Ready, tools=tools, impl="x", version="0")
    assert side.host.ready == event
    assert isinstance(event, WorkerReady) and event.tools == tools
    with pytest.raises(UnexpectedMessage):
        side.say(Ready, tools=side.described(list(side.host.grants)), impl="x", version="0")


def test_ready_before_open_is_refused() -> None:
    side = HostSide()
    with pytest.raises(UnexpectedMessage):
        side.say(Ready, tools=side.described(list(side.host.grants)), impl="x", version="0")


def test_ready_describes_each_tool_in_its_granted_format() -> None:
    side = HostSide()
    side.host.open()
    tools = side.described(list(side.host.grants))
    wrong = [
        ToolSpec(t.name, "text" if t.format == "json" else "json") if i == 0 else t
        for i, t in enumerate(tools)
    ]
    with pytest.raises(ToolNotServed, match="granted as"):
        side.say(Ready, tools=wrong, impl="x", version="0")


@pytest.mark.parametrize(
    "spec",
    [
        ToolSpec("extra", "text", schema={"type": "object"}),  # a schema on a text tool
        ToolSpec("extra", "json", schema={"a": "b" * 70_000}),  # over 64 KiB
    ],
)
def test_ready_with_a_bad_tool_description_is_fatal(spec: ToolSpec) -> None:
    side = HostSide()
    side.host.open()
    tools = [*side.described(list(side.host.grants)), spec]
    with pytest.raises(BadToolSpec):
        side.say(Ready, tools=tools, impl="x", version="0")


def test_chunks_are_counted_per_call_within_the_stream_grant() -> None:
    side = HostSide().opened()
    rid = side.invoke("progress.count", "3")
    side.say(Chunk, rid=rid, index=1, text="12345")
    side.say(Chunk, rid=rid, index=2, text="ab")
    call = side.host.calls[rid]
    assert (call.chunks, call.chunk_bytes) == (2, 7)


@pytest.mark.parametrize(
    ("chunks", "error"),
    [
        ([(2, "x")], UnexpectedMessage),  # index must start at 1
        ([(1, "x"), (1, "y")], UnexpectedMessage),  # and be consecutive
        ([(1, "123456789")], StreamViolation),  # over max_chunk_bytes (8)
        ([(1, "1234"), (2, "1234"), (3, "12345")], StreamViolation),  # over the total (12)
        ([(1, "a"), (2, "b"), (3, "c"), (4, "d")], StreamViolation),  # over max_chunks (3)
    ],
)
def test_chunk_rules(chunks: list[tuple[int, str]], error: type[Exception]) -> None:
    side = HostSide().opened()
    rid = side.invoke("progress.count", "3")
    *ok, bad = chunks
    for index, text in ok:
        side.say(Chunk, rid=rid, index=index, text=text)
    with pytest.raises(error):
        side.say(Chunk, rid=rid, index=bad[0], text=bad[1])


def test_chunk_after_a_held_terminal_frame_is_fatal() -> None:
    side = HostSide().opened()
    rid = side.invoke("progress.count", "3")
    side.cancel(rid)
    side.say(Result, rid=rid, payload=TextPayload("done"))
    with pytest.raises(UnexpectedMessage):
        side.say(Chunk, rid=rid, index=1, text="late")


def test_reconcile_answers_are_bound_to_the_request() -> None:
    side = HostSide().opened()
    rid, line = side.host.reconcile("text.upper", "op-1")
    assert isinstance(side.read(line), Reconcile)
    event = side.say(
        Reconciled,
        rid=rid,
        tool="text.upper",
        operation_key="op-1",
        status=Succeeded(TextPayload("X")),
    )
    assert isinstance(event, ReconcileAnswered) and event.status == Succeeded(TextPayload("X"))
    assert side.host.pending_reconciles == ()


@pytest.mark.parametrize(
    "fields",
    [
        {"tool": "json.echo"},
        {"operation_key": "op-2"},
        {"rid": "q99"},
        {"status": Succeeded(JsonPayload([1]))},
        {"status": Succeeded(TextPayload("x" * 65))},
        {"status": Failed("")},
    ],
)
def test_reconcile_answer_mismatches_are_fatal(fields: dict[str, Any]) -> None:
    side = HostSide().opened()
    rid, _ = side.host.reconcile("text.upper", "op-1")
    answer: dict[str, Any] = {
        "rid": rid,
        "tool": "text.upper",
        "operation_key": "op-1",
        "status": Failed("x"),
    }
    answer.update(fields)
    with pytest.raises(ProtocolError):
        side.say(Reconciled, **answer)


def test_pong_must_answer_a_ping() -> None:
    side = HostSide().opened()
    nonce, _ = side.host.ping()
    assert side.say(Pong, nonce=nonce) == PongReceived(nonce)
    with pytest.raises(UnexpectedMessage):
        side.say(Pong, nonce=nonce)


def test_eof_is_clean_only_after_close_with_nothing_pending() -> None:
    side = HostSide().opened()
    side.read(side.host.close())
    side.host.receive_eof()
    assert not side.host.dead

    side = HostSide().opened()
    side.read(side.host.ping("n")[1])
    side.read(side.host.close())
    with pytest.raises(UnexpectedEof):
        side.host.receive_eof()

    side = HostSide().opened()
    with pytest.raises(UnexpectedEof):
        side.host.receive_eof()


def test_format_of_the_result_must_match_the_grant() -> None:
    side = HostSide().opened()
    rid = side.invoke("json.echo", [1])
    with pytest.raises(FormatMismatch):
        side.say(Result, rid=rid, payload=TextPayload("[1]"))
