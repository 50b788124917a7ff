"""reference-splash.md section 12, the fail-closed checklist: one test per applicable item.

Each test drives a real connection (host or worker side) with a raw peer and checks the
specific error; after a fatal error the connection accepts nothing more.
"""

from __future__ import annotations

import pytest
from proto_fixtures import KEYS, SESSION_KEY, SID, HostSide, WorkerSide, forge

from worker_runtime.protocol.errors import (
    BadSequence,
    BadTag,
    BadVersion,
    CallBudgetExhausted,
    CancelMismatch,
    CancelOutOfOrder,
    CancelRepeated,
    CloseWhileInFlight,
    ConnectionDead,
    DuplicateId,
    FormatMismatch,
    IdCapacityExhausted,
    LineTooLong,
    MalformedBody,
    OutputTooLarge,
    PayloadTooDeep,
    ProtocolError,
    Refused,
    TagMismatch,
    TooManyInFlight,
    TruncatedLine,
    UnexpectedMessage,
    UnknownRequest,
    WrongSession,
)
from worker_runtime.protocol.framing import LineReader, Opener, Sealer
from worker_runtime.protocol.keys import derive_keys
from worker_runtime.protocol.limits import MAX_LINE_BYTES, MAX_SESSION_IDS
from worker_runtime.protocol.messages import (
    CancelResult,
    Chunk,
    HostMessage,
    JsonPayload,
    Ping,
    Pong,
    Result,
    TextPayload,
)


def _opener() -> Opener[HostMessage]:
    return Opener(KEYS.host, SID, HostMessage)


def _valid_line(seq_sealer: Sealer | None = None) -> bytes:
    return (seq_sealer or Sealer(KEYS.host, SID)).seal(Ping, nonce="n")[:-1]


def _assert_dead(side: HostSide | WorkerSide) -> None:
    conn = side.host if isinstance(side, HostSide) else side.worker
    assert conn.dead
    with pytest.raises(ConnectionDead):
        conn.receive(_valid_line())


# -- frames ------------------------------------------------------------------------------


def test_tag_mismatch_from_a_tampered_message() -> None:
    line = _valid_line().replace(b'"nonce":"n"', b'"nonce":"m"')
    with pytest.raises(TagMismatch):
        _opener().open(line)


def test_tag_mismatch_from_a_tampered_sequence() -> None:
    line = _valid_line().replace(b'"seq":1', b'"seq":2')
    opener = _opener()
    opener.open(_valid_line())  # now expects 2: the tampered 2 must fail on the tag, not seq
    with pytest.raises(TagMismatch):
        opener.open(line)


def test_tag_mismatch_from_a_wrong_key() -> None:
    other = derive_keys(bytes(range(2, 34)))
    opener = _opener()
    with pytest.raises(TagMismatch):
        opener.open(Sealer(other.host, SID).seal(Ping, nonce="n")[:-1])
    assert opener.open(_valid_line()).seq == 1  # no state advanced: the right frame opens


def test_tag_mismatch_from_a_wrong_session_id_inside_the_mac() -> None:
    line = _valid_line().replace(b'"sid":"sv-test"', b'"sid":"sv-tesu"')
    with pytest.raises(TagMismatch):
        _opener().open(line)


def test_reflected_frame_fails_the_tag() -> None:
    own = Sealer(KEYS.worker, SID).seal(Pong, nonce="n")[:-1]
    side = WorkerSide().opened()
    with pytest.raises(TagMismatch):  # a worker frame fed back to the worker
        side.worker.receive(own)
    host_side = HostSide()
    with pytest.raises(TagMismatch):  # a host frame fed back to the host
        host_side.host.receive(host_side.host.open()[:-1])


def test_replay_of_a_previously_accepted_frame() -> None:
    opener = _opener()
    line = _valid_line()
    opener.open(line)
    with pytest.raises(BadSequence, match="sequence 1, expected 2"):
        opener.open(line)


@pytest.mark.parametrize("seq", [0, 2, 3, 2**63])
def test_skipped_reordered_duplicated_or_zero_sequence(seq: int) -> None:
    body = f'{{"type":"ping","v":1,"sid":"{SID}","seq":{seq},"nonce":"n"}}'.encode()
    with pytest.raises(BadSequence):
        _opener().open(forge(KEYS.host, body))


def test_session_id_differs_from_the_session() -> None:
    line = Sealer(KEYS.host, "sv-other").seal(Ping, nonce="n")[:-1]
    with pytest.raises(WrongSession):
        _opener().open(line)


@pytest.mark.parametrize("version", [0, 2, 5])
def test_protocol_version_other_than_1(version: int) -> None:
    body = f'{{"type":"ping","v":{version},"sid":"{SID}","seq":1,"nonce":"n"}}'.encode()
    with pytest.raises(BadVersion):
        _opener().open(forge(KEYS.host, body))


@pytest.mark.parametrize(
    "tag", [b"ab" * 31, b"ab" * 33, b"AB" * 32, b"g" * 64, b"0x" + b"0" * 62, b" " * 64]
)
def test_malformed_tag_wrong_length_uppercase_or_non_hex(tag: bytes) -> None:
    body = _valid_line().partition(b" ")[2]
    with pytest.raises(BadTag):
        _opener().open(tag + b" " + body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1,"nonce":"n"',  # malformed JSON
        b'{"type":"explode","v":1,"sid":"sv-test","seq":1}',  # unknown type
        b'{"type":"result","v":1,"sid":"sv-test","seq":1}',  # a worker kind, to the worker
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1}',  # missing field
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1,"nonce":"n","x":1}',  # unknown field
        b'{"type":"ping","v":"1","sid":"sv-test","seq":1,"nonce":"n"}',  # wrong type
        b'{"type":"ping","v":true,"sid":"sv-test","seq":1,"nonce":"n"}',  # bool is not int
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1.0,"nonce":"n"}',  # float is not int
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1,"nonce":""}',  # nonce too short
        b'{"type":"cancel","v":1,"sid":"sv-test","seq":1,"cid":"C1","rid":"r1","tool":"t"}',
        b'{"type":"cancel","v":1,"sid":"sv-test","seq":1,"cid":"c 1","rid":"r1","tool":"t"}',
        b"[" * 200_000 + b"]" * 200_000,  # nesting deep enough to exhaust a recursive decoder
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1,"nonce":"\xff"}',  # not UTF-8
        b'{"type":"ping","v":1,"sid":"sv-test","seq":1,"nonce":"\\ud800"}',  # lone surrogate
    ],
)
def test_malformed_json_unknown_type_missing_fields_or_bad_id_grammar(body: bytes) -> None:
    opener = _opener()
    with pytest.raises(MalformedBody):
        opener.open(forge(KEYS.host, body))
    assert opener.next_seq == 1


def test_line_over_the_limit_is_refused_before_decoding() -> None:
    reader = LineReader()
    reader.feed(b"{" * (MAX_LINE_BYTES + 1))
    with pytest.raises(LineTooLong):
        reader.next_line()
    with pytest.raises(LineTooLong):
        _opener().open(forge(KEYS.host, b" " * MAX_LINE_BYTES))


def test_eof_mid_line() -> None:
    reader = LineReader()
    reader.feed(_valid_line())
    reader.feed_eof()
    with pytest.raises(TruncatedLine):
        reader.next_line()


# -- host side: what the worker may say ------------------------------------------------


def test_unsolicited_worker_frame_while_nothing_is_in_flight() -> None:
    side = HostSide().opened()
    with pytest.raises(UnknownRequest):
        side.say(Result, rid="r1", payload=TextPayload("x"))
    _assert_dead(side)


def test_worker_frame_before_ready() -> None:
    side = HostSide()
    side.host.open()
    with pytest.raises(UnexpectedMessage):
        side.say(Pong, nonce="n")


def test_result_whose_rid_differs_from_the_active_request() -> None:
    side = HostSide().opened()
    side.invoke()
    with pytest.raises(UnknownRequest):
        side.say(Result, rid="r99", payload=TextPayload("x"))


def test_duplicate_result() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    side.say(Result, rid=rid, payload=TextPayload("x"))
    with pytest.raises(UnknownRequest):
        side.say(Result, rid=rid, payload=TextPayload("x"))


def test_result_after_acknowledged() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    cid = side.cancel(rid)
    side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome="acknowledged")
    with pytest.raises(UnknownRequest):
        side.say(Result, rid=rid, payload=TextPayload("x"))


def test_output_larger_than_max_output_bytes() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    with pytest.raises(OutputTooLarge):
        side.say(Result, rid=rid, payload=TextPayload("x" * 65))


def test_result_format_mismatch() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    with pytest.raises(FormatMismatch):
        side.say(Result, rid=rid, payload=JsonPayload({"a": 1}))


def test_result_json_deeper_than_32_levels() -> None:
    side = HostSide().opened()
    rid = side.invoke("json.echo", {"a": 1})
    deep: list[object] = []
    for _ in range(32):
        deep = [deep]
    with pytest.raises(PayloadTooDeep):
        side.say(Result, rid=rid, payload=JsonPayload(deep))


def test_cancel_result_without_a_pending_cancel() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    with pytest.raises(CancelMismatch):
        side.say(CancelResult, cid="c9", rid=rid, tool="text.upper", outcome="acknowledged")


@pytest.mark.parametrize("field", ["rid", "tool"])
def test_cancel_result_binding_field_mismatch(field: str) -> None:
    side = HostSide(max_in_flight=2).opened()
    rid = side.invoke()
    side.invoke()
    cid = side.cancel(rid)
    fields = {"cid": cid, "rid": rid, "tool": "text.upper", "outcome": "acknowledged"}
    fields[field] = {"rid": "r2", "tool": "json.echo"}[field]
    with pytest.raises(CancelMismatch):
        side.say(CancelResult, **fields)


def test_acknowledged_after_a_result() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    cid = side.cancel(rid)
    assert side.say(Result, rid=rid, payload=TextPayload("X")) is None  # held back
    with pytest.raises(CancelOutOfOrder):
        side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome="acknowledged")


def test_too_late_before_a_result() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    cid = side.cancel(rid)
    with pytest.raises(CancelOutOfOrder):
        side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome="too_late")


def test_unsupported_after_a_result() -> None:
    side = HostSide().opened()
    rid = side.invoke()
    cid = side.cancel(rid)
    side.say(Result, rid=rid, payload=TextPayload("X"))
    with pytest.raises(CancelOutOfOrder):
        side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome="unsupported")


@pytest.mark.parametrize("first", ["unsupported", "acknowledged"])
def test_second_disposition_for_the_same_cancellation_id(first: str) -> None:
    side = HostSide().opened()
    rid = side.invoke()
    cid = side.cancel(rid)
    side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome=first)
    with pytest.raises(ProtocolError):
        side.say(CancelResult, cid=cid, rid=rid, tool="text.upper", outcome="unsupported")


def test_chunk_without_a_stream_grant() -> None:
    from worker_runtime.protocol.errors import StreamViolation

    side = HostSide().opened()
    rid = side.invoke()
    with pytest.raises(StreamViolation):
        side.say(Chunk, rid=rid, index=1, text="x")


# -- worker side: what the host may say ------------------------------------------------


def test_cancellation_id_equal_to_the_request_id() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    with pytest.raises(DuplicateId):
        side.cancel("r1", "r1")
    _assert_dead(side)


def test_cancellation_id_reused_from_an_earlier_id() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.reconcile("q2", "op-1")
    with pytest.raises(DuplicateId):
        side.cancel("q2", "r1")


def test_second_cancel_for_the_same_target() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    side.cancel("c2", "r1")
    with pytest.raises(CancelRepeated):
        side.cancel("c3", "r1")


def test_cancel_for_a_different_tool() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    with pytest.raises(CancelMismatch):
        side.cancel("c2", "r1", tool="json.echo")


def test_cancel_with_no_active_or_completed_target() -> None:
    side = WorkerSide().opened()
    with pytest.raises(UnknownRequest):
        side.cancel("c1", "r1")


def test_close_while_an_invoke_is_active() -> None:
    side = WorkerSide().opened()
    side.invoke("r1")
    with pytest.raises(CloseWhileInFlight):
        side.close()


def test_a_second_invoke_beyond_max_in_flight() -> None:
    side = WorkerSide().opened(max_in_flight=1)
    side.invoke("r1")
    with pytest.raises(TooManyInFlight):
        side.invoke("r2", key="op-2")


def test_call_budget_exhausted() -> None:
    side = WorkerSide().opened(max_in_flight=8)
    for i in range(5):  # text.upper grants 5 calls
        side.invoke(f"r{i}", key=f"op-{i}")
    with pytest.raises(CallBudgetExhausted):
        side.invoke("r9", key="op-9")


def test_session_id_capacity_exhausted_checked_before_mutation() -> None:
    side = WorkerSide().opened()
    for i in range(MAX_SESSION_IDS):
        side.reconcile(f"q{i}", "op")
        side.read(side.worker.reconciled(f"q{i}"))
    with pytest.raises(DuplicateId):  # a duplicate is reported before the capacity
        side.reconcile("q0", "op")
    side = WorkerSide().opened()
    for i in range(MAX_SESSION_IDS):
        side.reconcile(f"q{i}", "op")
    with pytest.raises(IdCapacityExhausted):
        side.invoke("r1")
    assert side.worker.in_flight == ()  # nothing was admitted


def test_host_refuses_rather_than_sends_what_the_worker_must_reject() -> None:
    side = HostSide(max_in_flight=1).opened()
    side.invoke()
    with pytest.raises(Refused) as info:
        side.host.invoke("text.upper", "again", idempotency_key="op-2")
    assert info.value.code == "too_many_in_flight"
    assert not side.host.dead


def test_bootstrap_defects_are_each_refused() -> None:
    from worker_runtime.protocol.bootstrap import parse_bootstrap
    from worker_runtime.protocol.errors import (
        BadLength,
        BadMagic,
        BadSessionId,
        TruncatedBootstrap,
        WeakKey,
    )

    good = b"SVBOOT01\x02s1" + SESSION_KEY
    cases = {
        BadMagic: b"SVBOOT00" + good[8:],
        BadLength: b"SVBOOT01\x00" + SESSION_KEY,
        BadSessionId: b"SVBOOT01\x02S1" + SESSION_KEY,
        WeakKey: b"SVBOOT01\x02s1" + bytes(32),
        TruncatedBootstrap: good[:-1],
    }
    for error, data in cases.items():
        with pytest.raises(error):
            parse_bootstrap(data)


def test_message_text_outside_1_to_4096_bytes() -> None:
    from worker_runtime.protocol.errors import BadMessageText
    from worker_runtime.protocol.messages import Error

    for message in ("", "é" * 2049):
        side = HostSide().opened()
        rid = side.invoke()
        with pytest.raises(BadMessageText):
            side.say(Error, rid=rid, code="adapter_error", message=message, retryable=False)
