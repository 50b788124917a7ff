"""WorkerConnection: the rules it enforces on the host, and the frames it will produce."""

from __future__ import annotations

from typing import Any

import pytest
from proto_fixtures import GRANTS, KEYS, SID, WorkerSide, deep

from worker_runtime.protocol.errors import (
    BadGrant,
    CallBudgetExhausted,
    ConnectionDead,
    DuplicateId,
    FormatMismatch,
    InputTooLarge,
    PayloadTooDeep,
    Refused,
    ToolNotServed,
    UnexpectedEof,
    UnexpectedMessage,
    UnknownTool,
)
from worker_runtime.protocol.host import HostConnection, ResultReceived
from worker_runtime.protocol.limits import MAX_ERROR_MESSAGE_BYTES, MAX_LINE_BYTES, RECONCILE_MEMORY
from worker_runtime.protocol.messages import (
    CancelledState,
    CancelResult,
    Chunk,
    Error,
    Failed,
    Invoke,
    JsonPayload,
    Open,
    Pong,
    Ready,
    Reconciled,
    Result,
    Running,
    Succeeded,
    TextPayload,
    ToolSpec,
    UnknownState,
    grant,
)
from worker_runtime.protocol.worker import (
    CancelReceived,
    CloseReceived,
    InvokeReceived,
    Opened,
    PingReceived,
    ReconcileReceived,
    WorkerConnection,
)


def test_ready_reports_each_granted_tool_as_described() -> None:
    upper = ToolSpec("text.upper", "text", False, "upper-cases")
    echo = ToolSpec("json.echo", "json", True, "echoes", {"type": "object"}, "Echo")
    side = WorkerSide(served={"text.upper": upper, "json.echo": echo})
    side.say(Open, grants=[GRANTS[1], GRANTS[0]], max_in_flight=1)
    (ready,) = side.read(side.worker.ready("impl", "1"))
    assert isinstance(ready, Ready) and ready.tools == [echo, upper]


# -- open ----------------------------------------------------------------------------------


def test_open_is_accepted_and_ready_lists_the_granted_tools() -> None:
    side = WorkerSide(served={"text.upper": "text", "json.echo": "json", "more": "text"})
    event = side.say(Open, grants=[GRANTS[0], GRANTS[1]], max_in_flight=3)
    assert event == Opened([GRANTS[0], GRANTS[1]], 3)
    (ready,) = side.read(side.worker.ready("impl", "1"))
    assert isinstance(ready, Ready)
    assert ready.tools == [ToolSpec("text.upper", "text"), ToolSpec("json.echo", "json")]
    with pytest.raises(Refused):
        side.worker.ready("impl", "1")


@pytest.mark.parametrize(
    ("grants", "error"),
    [
        ([grant("not.served")], ToolNotServed),
        ([grant("text.upper", format="json")], ToolNotServed),  # served, but as text
        ([grant("text.upper"), grant("text.upper")], BadGrant),
    ],
)
def test_open_refusals_are_fatal(grants: list[Any], error: type[Exception]) -> None:
    side = WorkerSide()
    with pytest.raises(error):
        side.say(Open, grants=grants, max_in_flight=1)
    assert side.worker.dead


def test_frames_before_open_and_a_second_open_are_fatal() -> None:
    with pytest.raises(UnexpectedMessage):
        WorkerSide().ping("n")
    side = WorkerSide().opened()
    with pytest.raises(UnexpectedMessage):
        side.say(Open, grants=GRANTS, max_in_flight=1)


# -- invoke rules (section 9: each is a violation, not an error frame) ----------------------


def _invoke(side: WorkerSide, tool: str, payload: Any, rid: str = "r1") -> Any:
    return side.say(
        Invoke,
        rid=rid,
        tool=tool,
        payload=payload,
        attempt=1,
        idempotency_key="k",
        deadline_ms=None,
    )


@pytest.mark.parametrize(
    ("tool", "payload", "error"),
    [
        ("nope", TextPayload("x"), UnknownTool),
        ("text.upper", TextPayload("x" * 65), InputTooLarge),
        ("text.upper", JsonPayload({"a": 1}), FormatMismatch),
        ("json.echo", TextPayload("{}"), FormatMismatch),
        ("json.echo", JsonPayload(deep(33)), PayloadTooDeep),
    ],
)
def test_invoke_violations(tool: str, payload: Any, error: type[Exception]) -> None:
    side = WorkerSide().opened()
    with pytest.raises(error):
        _invoke(side, tool, payload)
    assert side.worker.dead and side.worker.in_flight == ()


def test_invoke_duplicate_rid() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.read(side.worker.result("r1", "HI"))
    with pytest.raises(DuplicateId):
        side.invoke("r1", key="op-2")


def test_reconcile_does_not_spend_max_calls() -> None:
    side = WorkerSide().opened(max_in_flight=9)
    for i in range(10):
        side.reconcile(f"q{i}", "op")
        side.read(side.worker.reconciled(f"q{i}"))
    for i in range(5):
        side.invoke(f"r{i}", key=f"op-{i}")
    with pytest.raises(CallBudgetExhausted):
        side.invoke("r9")


def test_invoke_event_carries_the_call() -> None:
    side = WorkerSide().opened()
    event = side.say(
        Invoke,
        rid="r1",
        tool="json.echo",
        payload=JsonPayload({"x": [1]}),
        attempt=2,
        idempotency_key="op-9",
        deadline_ms=1200,
    )
    assert event == InvokeReceived("r1", "json.echo", {"x": [1]}, 2, "op-9", 1200)


# -- the cancellation matrix, worker side ----------------------------------------------


def test_result_after_a_cancel_comes_with_too_late_in_order() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    assert side.cancel("c2", "r1") == CancelReceived("c2", "r1", "text.upper", finished=False)
    result, too_late = side.read(side.worker.result("r1", "HI"))
    assert isinstance(result, Result) and result.rid == "r1"
    assert isinstance(too_late, CancelResult) and too_late.outcome == "too_late"
    assert (too_late.cid, too_late.rid, too_late.tool) == ("c2", "r1", "text.upper")


def test_error_after_a_cancel_comes_with_too_late_in_order() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.cancel("c2", "r1")
    error, too_late = side.read(side.worker.error("r1", "adapter_error", "boom"))
    assert isinstance(error, Error) and isinstance(too_late, CancelResult)


def test_acknowledged_is_the_only_frame_and_ends_the_call() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.cancel("c2", "r1")
    (ack,) = side.read(side.worker.acknowledge("r1"))
    assert isinstance(ack, CancelResult) and ack.outcome == "acknowledged"
    assert side.worker.in_flight == ()
    with pytest.raises(Refused):
        side.worker.result("r1", "late")


def test_acknowledge_needs_a_pending_cancel() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    with pytest.raises(Refused) as info:
        side.worker.acknowledge("r1")
    assert info.value.code == "not_cancelled"


def test_unsupported_then_the_result_alone() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.cancel("c2", "r1")
    (unsupported,) = side.read(side.worker.unsupported("r1"))
    assert isinstance(unsupported, CancelResult) and unsupported.outcome == "unsupported"
    with pytest.raises(Refused):
        side.worker.acknowledge("r1")
    (result,) = side.read(side.worker.result("r1", "HI"))
    assert isinstance(result, Result)


def test_a_cancel_for_a_finished_call_is_answered_too_late() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.read(side.worker.result("r1", "HI"))
    assert side.cancel("c2", "r1") == CancelReceived("c2", "r1", "text.upper", finished=True)
    (too_late,) = side.read(side.worker.too_late("c2"))
    assert isinstance(too_late, CancelResult) and too_late.outcome == "too_late"
    with pytest.raises(Refused):
        side.worker.too_late("c2")


@pytest.mark.parametrize("ending", ["acknowledged", "too_late", "unsupported"])
def test_a_cancel_after_an_earlier_cancel_of_a_finished_call_is_fatal(ending: str) -> None:
    from worker_runtime.protocol.errors import CancelRepeated

    side = WorkerSide().opened()
    side.invoke("r1")
    side.cancel("c2", "r1")
    if ending == "acknowledged":
        side.worker.acknowledge("r1")
    elif ending == "unsupported":
        side.worker.unsupported("r1")
        side.worker.result("r1", "HI")
    else:
        side.worker.result("r1", "HI")
    with pytest.raises(CancelRepeated):
        side.cancel("c3", "r1")


# -- chunks and results the worker will not produce ----------------------------------------


def test_chunks_stop_at_the_stream_limits() -> None:
    side = WorkerSide().opened()
    side.invoke("r1", tool="progress.count")
    assert side.worker.chunk("r1", "123456789") is None  # over max_chunk_bytes (8)
    frames = [side.worker.chunk("r1", t) for t in ("1234", "1234", "12345", "1234", "x")]
    assert frames[2] is None and frames[4] is None  # over the total (12), over max_chunks (3)
    sent = [m for f in frames if f is not None for m in side.read(f)]
    assert [(m.index, m.text) for m in sent if isinstance(m, Chunk)] == [
        (1, "1234"),
        (2, "1234"),
        (3, "1234"),
    ]


def test_no_chunk_without_a_stream_grant_or_after_the_end() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    assert side.worker.chunk("r1", "x") is None
    side.invoke("r2", tool="progress.count", key="op-2")
    side.read(side.worker.result("r2", "done"))
    assert side.worker.chunk("r2", "x") is None
    assert side.worker.chunk("r404", "x") is None


@pytest.mark.parametrize(
    ("tool", "value", "code"),
    [
        ("text.upper", "x" * 65, "output_too_large"),
        ("text.upper", {"a": 1}, "format_mismatch"),
        ("text.upper", None, "format_mismatch"),
        ("json.echo", "text", "format_mismatch"),
        ("json.echo", 3, "format_mismatch"),
        ("json.echo", deep(33), "payload_too_deep"),
    ],
)
def test_result_refused_over_the_grant_leaves_the_call_for_an_error(
    tool: str, value: Any, code: str
) -> None:
    side = WorkerSide().opened()
    if tool == "json.echo":
        _invoke(side, tool, JsonPayload([1]))
    else:
        side.invoke("r1")
    with pytest.raises(Refused) as info:
        side.worker.result("r1", value)
    assert info.value.code == code
    (error,) = side.read(side.worker.error("r1", "output_too_large", str(info.value)))
    assert isinstance(error, Error) and error.seq == 2  # nothing was sealed by the refusal


def test_result_that_would_not_fit_a_frame_is_refused() -> None:
    side = WorkerSide()
    side.say(
        Open, grants=[grant("text.upper", max_output_bytes=2 * MAX_LINE_BYTES)], max_in_flight=1
    )
    side.read(side.worker.ready("t", "0"))
    side.invoke("r1")
    with pytest.raises(Refused) as info:
        side.worker.result("r1", "x" * MAX_LINE_BYTES)
    assert info.value.code == "output_too_large"


def test_error_messages_are_clipped_and_codes_checked() -> None:
    side = WorkerSide().opened(max_in_flight=2)
    side.invoke("r1")
    side.invoke("r2", key="op-2")
    with pytest.raises(Refused):
        side.worker.error("r1", "Not A Code", "m")
    (error,) = side.read(side.worker.error("r1", "adapter_error", "é" * 5000))
    assert isinstance(error, Error) and len(error.message.encode()) <= MAX_ERROR_MESSAGE_BYTES
    (error,) = side.read(side.worker.error("r2", "adapter_error", ""))
    assert isinstance(error, Error) and error.message  # never empty


# -- reconcile, ping, close ----------------------------------------------------------------


def _reconciled(side: WorkerSide, rid: str, key: str, tool: str = "text.upper") -> Any:
    assert side.reconcile(rid, key, tool) == ReconcileReceived(rid, tool, key)
    (msg,) = side.read(side.worker.reconciled(rid))
    assert isinstance(msg, Reconciled) and (msg.rid, msg.tool, msg.operation_key) == (
        rid,
        tool,
        key,
    )
    return msg.status


def test_reconcile_reports_each_state() -> None:
    side = WorkerSide().opened(max_in_flight=4)
    side.invoke("r1", key="ok")
    assert _reconciled(side, "q1", "ok") == Running()
    side.read(side.worker.result("r1", "HI"))
    assert _reconciled(side, "q2", "ok") == Succeeded(TextPayload("HI"))
    side.invoke("r2", key="bad")
    side.read(side.worker.error("r2", "adapter_error", "it broke"))
    assert _reconciled(side, "q3", "bad") == Failed("it broke")
    side.invoke("r3", key="stop")
    side.cancel("c4", "r3")
    side.read(side.worker.acknowledge("r3"))
    assert _reconciled(side, "q4", "stop") == CancelledState()
    assert _reconciled(side, "q5", "never") == UnknownState()
    assert _reconciled(side, "q6", "ok", tool="json.echo") == UnknownState()  # other tool


def test_reconcile_remembers_at_least_the_last_1024_calls() -> None:
    grants = [grant("text.upper", max_calls=RECONCILE_MEMORY + 1)]
    side = WorkerSide().opened(grants=grants, max_in_flight=1)
    for i in range(RECONCILE_MEMORY + 1):
        side.invoke(f"r{i}", key=f"op-{i}")
        side.read(side.worker.result(f"r{i}", "X"))
    assert _reconciled(side, "q0", "op-0") == UnknownState()  # the oldest was forgotten
    assert _reconciled(side, "q1", "op-1") == Succeeded(TextPayload("X"))
    assert _reconciled(side, "q2", f"op-{RECONCILE_MEMORY}") == Succeeded(TextPayload("X"))


def test_reconcile_of_an_ungranted_tool_is_fatal() -> None:
    side = WorkerSide().opened()
    with pytest.raises(UnknownTool):
        side.reconcile("q1", "op", tool="nope")


def test_ping_is_answered_with_its_nonce() -> None:
    side = WorkerSide().opened()
    assert side.ping("hello world") == PingReceived("hello world")
    (pong,) = side.read(side.worker.pong("hello world"))
    assert isinstance(pong, Pong) and pong.nonce == "hello world"
    with pytest.raises(Refused):
        side.worker.pong("hello world")


def test_close_then_nothing_more() -> None:
    side = WorkerSide().opened()
    assert side.close() == CloseReceived()
    side.worker.receive_eof()  # a clean end
    with pytest.raises(UnexpectedMessage):
        side.ping("n")


def test_eof_before_close_is_fatal() -> None:
    side = WorkerSide().opened()
    with pytest.raises(UnexpectedEof):
        side.worker.receive_eof()
    with pytest.raises(ConnectionDead):
        side.worker.ready("x", "0")


# -- both real connections against each other ------------------------------------------


def test_a_full_session_between_the_two_connections() -> None:
    host = HostConnection(SID, KEYS, GRANTS, max_in_flight=3)
    worker = WorkerConnection(SID, KEYS, {g.tool: g.format for g in GRANTS})

    def to_host(data: bytes) -> list[Any]:
        return [host.receive(line) for line in data[:-1].split(b"\n")]

    assert isinstance(worker.receive(host.open()[:-1]), Opened)
    to_host(worker.ready("impl", "1"))
    r1, line = host.invoke("text.upper", "a", idempotency_key="k1")
    worker.receive(line[:-1])
    r2, line = host.invoke("progress.count", "2", idempotency_key="k2")
    worker.receive(line[:-1])
    r3, line = host.invoke("json.echo", {"x": 1}, idempotency_key="k3")
    worker.receive(line[:-1])
    assert set(host.in_flight) == {r1, r2, r3}
    chunk = worker.chunk(r2, "half")
    assert chunk is not None
    to_host(chunk)
    _cid, line = host.cancel(r2)
    worker.receive(line[:-1])
    assert to_host(worker.result(r3, {"x": 1})) == [ResultReceived(r3, JsonPayload({"x": 1}))]
    events = to_host(worker.result(r2, "done"))
    assert events == [None, ResultReceived(r2, TextPayload("done"), too_late=True)]
    assert to_host(worker.result(r1, "A")) == [ResultReceived(r1, TextPayload("A"))]
    assert host.in_flight == () and worker.in_flight == ()
    assert isinstance(worker.receive(host.close()[:-1]), CloseReceived)
    host.receive_eof()
    worker.receive_eof()
