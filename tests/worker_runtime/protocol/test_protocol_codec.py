"""The codec: ids, keys (both implementations), bootstrap, frames, the line reader, payloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from proto_fixtures import KEYS, SESSION_KEY, SID, forge

import supervisor.workers.session_keys as host_keys
import worker_runtime.protocol.keys as worker_keys
from worker_runtime.protocol.bootstrap import encode_bootstrap, parse_bootstrap, read_bootstrap
from worker_runtime.protocol.errors import (
    BadLength,
    BadMagic,
    BadSequence,
    BadSessionId,
    BadTag,
    BadVersion,
    LineTooLong,
    MalformedBody,
    MalformedFrame,
    ProtocolError,
    Refused,
    TagMismatch,
    TruncatedBootstrap,
    TruncatedLine,
    WeakKey,
    WrongSession,
)
from worker_runtime.protocol.framing import LineReader, Opener, Sealer
from worker_runtime.protocol.limits import MAX_LINE_BYTES, is_id
from worker_runtime.protocol.messages import (
    Cancel,
    CancelledState,
    CancelResult,
    Chunk,
    Close,
    Error,
    Failed,
    HostMessage,
    Invoke,
    JsonPayload,
    Open,
    Ping,
    Pong,
    Ready,
    Reconcile,
    Reconciled,
    Result,
    Running,
    StreamLimits,
    Succeeded,
    TextPayload,
    ToolSpec,
    UnknownState,
    WorkerMessage,
    grant,
)
from worker_runtime.protocol.payloads import json_depth_exceeds, payload_size

VECTORS = json.loads((Path(__file__).parent / "vectors.json").read_text())

# -- ids -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a", "r1", "text.upper", "a-b_c.d", "0" * 128, "sv-" + "f" * 32])
def test_id_grammar_accepts(value: str) -> None:
    assert is_id(value)


@pytest.mark.parametrize(
    "value", ["", "A", "a b", "a\n", "é", "a/b", "0" * 129, "r1\x00", None, 1, b"r1"]
)
def test_id_grammar_refuses(value: object) -> None:
    assert not is_id(value)


# -- keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS["hkdf"], ids=lambda v: v["name"])
@pytest.mark.parametrize("impl", [worker_keys.hkdf_sha256, host_keys.hkdf_sha256])
def test_hkdf_vectors_agree_across_implementations(vector: dict[str, Any], impl: Any) -> None:
    out = impl(
        bytes.fromhex(vector["ikm"]),
        bytes.fromhex(vector["info"]),
        salt=bytes.fromhex(vector["salt"]),
        length=vector["length"],
    )
    assert out.hex() == vector["okm"]


def test_directional_keys_agree_between_stdlib_and_cryptography() -> None:
    for _ in range(20):
        key = host_keys.new_session_key()
        assert worker_keys.derive_keys(key) == host_keys.derive_keys(key)
    keys = worker_keys.derive_keys(SESSION_KEY)
    assert keys.host != keys.worker


@pytest.mark.parametrize("derive", [worker_keys.derive_keys, host_keys.derive_keys])
@pytest.mark.parametrize("key", [bytes(32), b"\x01" * 31, b"\x01" * 33, b""])
def test_weak_or_short_keys_are_refused(derive: Any, key: bytes) -> None:
    with pytest.raises(WeakKey):
        derive(key)


def test_new_session_ids_and_keys_are_fresh_and_well_formed() -> None:
    ids = {host_keys.new_session_id() for _ in range(100)}
    keys = {host_keys.new_session_key() for _ in range(100)}
    assert len(ids) == 100 and len(keys) == 100
    assert all(is_id(i) for i in ids)
    assert all(len(k) == 32 and any(k) for k in keys)


@pytest.mark.parametrize("frame", VECTORS["frames"], ids=lambda v: v["name"])
def test_frame_vectors_seal_and_open_exactly(frame: dict[str, Any]) -> None:
    keys = worker_keys.derive_keys(bytes.fromhex(frame["session_key"]))
    key = keys.host if frame["sender"] == "host" else keys.worker
    kinds = HostMessage if frame["sender"] == "host" else WorkerMessage
    line = frame["line"].encode()
    msg: Any = Opener(key, frame["session_id"], kinds).open(line)
    kind = type(msg)
    fields = {f: getattr(msg, f) for f in msg.__struct_fields__ if f not in ("v", "sid", "seq")}
    assert Sealer(key, frame["session_id"]).seal(kind, **fields) == line + b"\n"


# -- bootstrap -----------------------------------------------------------------------------


def test_bootstrap_round_trip_keeps_the_bytes_of_the_first_frame() -> None:
    first_frame = b"0123 first frame bytes\n"
    boot, rest = parse_bootstrap(encode_bootstrap(SID, SESSION_KEY) + first_frame)
    assert boot == (SID, SESSION_KEY)
    assert rest == first_frame


def test_bootstrap_reads_exactly_and_consumes_nothing_more() -> None:
    stream = encode_bootstrap("s" * 128, SESSION_KEY) + b"FRAME"
    consumed = 0

    def read_exact(n: int) -> bytes:
        nonlocal consumed
        chunk = stream[consumed : consumed + n]
        consumed += len(chunk)
        return chunk

    assert read_bootstrap(read_exact).session_id == "s" * 128
    assert stream[consumed:] == b"FRAME"


def _boot(magic: bytes = b"SVBOOT01", length: int | None = None, sid: bytes = b"s1") -> bytes:
    return magic + bytes([len(sid) if length is None else length]) + sid + SESSION_KEY


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (_boot(magic=b"SVBOOT02"), BadMagic),
        (_boot(magic=b"SPLPBOOT"), BadMagic),
        (_boot(length=0, sid=b""), BadLength),
        (_boot(length=129, sid=b"a" * 129), BadLength),
        (_boot(sid=b"Bad"), BadSessionId),
        (_boot(sid=b"bad id"), BadSessionId),
        (_boot(sid=b"\xff\xfe"), BadSessionId),
        (b"SVBOOT01\x02s1" + bytes(32), WeakKey),
    ],
)
def test_bootstrap_defects_are_refused(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_bootstrap(data)


def test_bootstrap_truncated_anywhere_is_refused() -> None:
    data = encode_bootstrap(SID, SESSION_KEY)
    for cut in range(len(data)):
        with pytest.raises(TruncatedBootstrap):
            parse_bootstrap(data[:cut])


def test_encode_bootstrap_refuses_what_a_worker_refuses() -> None:
    with pytest.raises(BadSessionId):
        encode_bootstrap("Not valid", SESSION_KEY)
    with pytest.raises(WeakKey):
        encode_bootstrap(SID, bytes(32))


# -- frames: every kind round-trips ------------------------------------------------------

PAYLOADS = [TextPayload("héllo"), JsonPayload({"a": [1, 2, {"b": None}]}), JsonPayload([1.5])]
STREAM = StreamLimits(max_chunks=3, max_chunk_bytes=8, max_total_bytes=12)
HOST_FRAMES: list[tuple[type, dict[str, Any]]] = [
    (Open, {"grants": [grant("t"), grant("j", format="json", stream=STREAM)], "max_in_flight": 3}),
    *[
        (
            Invoke,
            {
                "rid": "r1",
                "tool": "t",
                "payload": p,
                "attempt": 2,
                "idempotency_key": "k",
                "deadline_ms": d,
            },
        )
        for p in PAYLOADS
        for d in (None, 1500)
    ],
    (Cancel, {"cid": "c2", "rid": "r1", "tool": "t"}),
    (Reconcile, {"rid": "q3", "tool": "t", "operation_key": "k"}),
    (Ping, {"nonce": "any text, even spaces"}),
    (Close, {}),
]
WORKER_FRAMES: list[tuple[type, dict[str, Any]]] = [
    (Ready, {"tools": [ToolSpec("t", "text")], "impl": "x", "version": "1"}),
    (
        Ready,
        {
            "tools": [ToolSpec("j", "json", False, "d", {"type": "object"}, "J")],
            "impl": "x",
            "version": "1",
        },
    ),
    (Chunk, {"rid": "r1", "index": 1, "text": "part\nwith newline"}),
    *[(Result, {"rid": "r1", "payload": p}) for p in PAYLOADS],
    (Error, {"rid": "r1", "code": "adapter_error", "message": "m", "retryable": True}),
    *[
        (CancelResult, {"cid": "c2", "rid": "r1", "tool": "t", "outcome": o})
        for o in ("acknowledged", "too_late", "unsupported")
    ],
    *[
        (Reconciled, {"rid": "q3", "tool": "t", "operation_key": "k", "status": s})
        for s in (
            Running(),
            Succeeded(TextPayload("x")),
            Failed("boom"),
            CancelledState(),
            UnknownState(),
        )
    ],
    (Pong, {"nonce": "n"}),
]


@pytest.mark.parametrize(("kind", "fields"), HOST_FRAMES)
def test_every_host_kind_round_trips(kind: type, fields: dict[str, Any]) -> None:
    line = Sealer(KEYS.host, SID).seal(kind, **fields)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    msg: Any = Opener(KEYS.host, SID, HostMessage).open(line[:-1])
    assert msg == kind(v=1, sid=SID, seq=1, **fields)


@pytest.mark.parametrize(("kind", "fields"), WORKER_FRAMES)
def test_every_worker_kind_round_trips(kind: type, fields: dict[str, Any]) -> None:
    line = Sealer(KEYS.worker, SID).seal(kind, **fields)
    msg: Any = Opener(KEYS.worker, SID, WorkerMessage).open(line[:-1])
    assert msg == kind(v=1, sid=SID, seq=1, **fields)


def test_sequences_count_from_one_by_one_per_direction() -> None:
    host, worker = Sealer(KEYS.host, SID), Sealer(KEYS.worker, SID)
    at_worker: Opener[Any] = Opener(KEYS.host, SID, HostMessage)
    at_host: Opener[Any] = Opener(KEYS.worker, SID, WorkerMessage)
    for n in range(1, 5):
        assert at_worker.open(host.seal(Ping, nonce="n")[:-1]).seq == n
    assert at_host.open(worker.seal(Pong, nonce="n")[:-1]).seq == 1
    assert (at_worker.next_seq, at_host.next_seq) == (5, 2)


def test_the_mac_covers_the_exact_body_bytes_not_a_reserialisation() -> None:
    body = b'{ "type" : "ping", "v":1, "sid":"sv-test", "seq":1, "nonce":"n" }'
    assert Opener(KEYS.host, SID, HostMessage).open(forge(KEYS.host, body)).nonce == "n"
    compact = msgspec.json.encode(msgspec.json.decode(body))
    with pytest.raises(TagMismatch):  # a tag over the re-serialisation does not verify
        Opener(KEYS.host, SID, HostMessage).open(forge(KEYS.host, compact)[:65] + body)


def _ping(seq: int = 1, v: int = 1, sid: str = SID, extra: str = "") -> bytes:
    return f'{{"type":"ping","v":{v},"sid":"{sid}","seq":{seq},"nonce":"n"{extra}}}'.encode()


@pytest.mark.parametrize(
    ("line", "error"),
    [
        # each line breaks several checks; the earliest in the spec's order must win
        (b"x" * (MAX_LINE_BYTES + 1), LineTooLong),
        (b"NOSPACE" + b"{" * 10, MalformedFrame),
        (b"ABCD " + b"not json at all", BadTag),
        (b"0" * 64 + b" not json and a wrong tag", TagMismatch),
        (forge(KEYS.host, b"not json"), MalformedBody),
        (forge(KEYS.host, _ping(v=2, sid="other", seq=9)), BadVersion),
        (forge(KEYS.host, _ping(sid="other", seq=9)), WrongSession),
        (forge(KEYS.host, _ping(seq=9)), BadSequence),
    ],
)
def test_receiver_checks_run_in_the_spec_order(line: bytes, error: type[Exception]) -> None:
    opener: Opener[Any] = Opener(KEYS.host, SID, HostMessage)
    with pytest.raises(error):
        opener.open(line)
    assert opener.next_seq == 1
    assert opener.open(forge(KEYS.host, _ping())).seq == 1  # nothing changed


def test_a_line_of_exactly_the_limit_is_read() -> None:
    body_len = MAX_LINE_BYTES - 65
    filler = "x" * (body_len - len(_ping(extra=',"pad":""')))
    body = _ping(extra=f',"pad":"{filler}"')
    assert len(forge(KEYS.host, body)) == MAX_LINE_BYTES
    with pytest.raises(MalformedBody):  # the length passes; only the unknown field fails
        Opener(KEYS.host, SID, HostMessage).open(forge(KEYS.host, body))


def test_sealer_refuses_a_frame_over_the_line_limit_and_keeps_its_counter() -> None:
    sealer = Sealer(KEYS.worker, SID)
    with pytest.raises(Refused) as info:
        sealer.seal(Chunk, rid="r1", index=1, text="x" * MAX_LINE_BYTES)
    assert info.value.code == "frame_too_large"
    assert sealer.next_seq == 1


# -- the line reader ---------------------------------------------------------------------


def test_line_reader_reassembles_lines_across_chunks() -> None:
    reader = LineReader()
    for piece in (b"ab", b"c\nde", b"f\n\nxy", b"z\n"):
        reader.feed(piece)
    got = []
    while (line := reader.next_line()) is not None:
        got.append(line)
    assert got == [b"abc", b"def", b"", b"xyz"]
    assert reader.buffered == 0


@pytest.mark.parametrize(
    "chunks",
    [
        [b"one\n"],  # the common case: taken at once
        [b"0123456789\n"],  # exactly the limit
        [b"01234567890\n"],  # one over: the defect, as feed gives it
        [b"one\ntwo\n"],  # two lines: queued
        [b"on", b"e\n"],  # the rest of a held line: queued
        [b"one\n", b"two"],  # a partial line: queued
        [b""],  # nothing
        [b"01234567890", b"x\n"],  # after a defect: nothing more
    ],
)
def test_feed_line_gives_what_feed_gives(chunks: list[bytes]) -> None:
    def lines(reader: LineReader, take_at_once: bool) -> list[bytes | str]:
        out: list[bytes | str] = []
        for chunk in chunks:
            line = reader.feed_line(chunk) if take_at_once else (reader.feed(chunk) or None)
            try:
                while line is not None or (line := reader.next_line()) is not None:
                    out.append(line)
                    line = None
            except ProtocolError as exc:
                out.append(type(exc).__name__)
        return out

    assert lines(LineReader(limit=10), True) == lines(LineReader(limit=10), False)
    assert LineReader(limit=10).feed_line(b"one\n") == b"one"


def test_line_reader_fails_at_limit_plus_one_without_a_line_feed() -> None:
    reader = LineReader(limit=10)
    reader.feed(b"0123456789")  # exactly the limit: fine, still waiting
    assert reader.next_line() is None and reader.buffered == 10
    reader.feed(b"X")
    assert reader.buffered == 0  # never holds more than the limit
    with pytest.raises(LineTooLong):
        reader.next_line()
    with pytest.raises(LineTooLong):  # and stays failed
        reader.next_line()


def test_line_reader_returns_good_lines_before_a_defect() -> None:
    reader = LineReader(limit=4)
    reader.feed(b"ok\n" + b"toolong\n" + b"no\n")
    assert reader.next_line() == b"ok"
    with pytest.raises(LineTooLong):
        reader.next_line()


def test_line_reader_eof_inside_a_line_is_an_error() -> None:
    reader = LineReader()
    reader.feed(b"complete\npartial")
    reader.feed_eof()
    assert reader.next_line() == b"complete"
    with pytest.raises(TruncatedLine):
        reader.next_line()


def test_line_reader_clean_eof_is_not_an_error() -> None:
    reader = LineReader()
    reader.feed(b"a\n")
    reader.feed_eof()
    assert reader.next_line() == b"a"
    assert reader.next_line() is None


# -- payloads ------------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_json_depth_counts_the_root_as_level_one() -> None:
    assert not json_depth_exceeds(_nested(32))
    assert json_depth_exceeds(_nested(33))
    assert not json_depth_exceeds({"a": 1, "b": [1, 2]}, limit=2)
    assert json_depth_exceeds({"a": {"b": {}}}, limit=2)
    assert not json_depth_exceeds(_nested(100_000), limit=100_001)  # iterative, no recursion


def test_sizes_are_utf8_bytes_and_compact_json() -> None:
    assert payload_size(TextPayload("héllo")) == 6
    assert payload_size(TextPayload("日本")) == 6
    assert payload_size(JsonPayload({"a": [1, 2]})) == len(b'{"a":[1,2]}')


def test_json_scalar_payloads_are_refused_at_decode() -> None:
    for scalar in ("1", '"s"', "null", "true"):
        body = (
            _ping()
            .replace(b'"type":"ping"', b'"type":"invoke"')
            .replace(
                b',"nonce":"n"',
                b',"rid":"r1","tool":"t","payload":{"format":"json","value":'
                + scalar.encode()
                + b'},"attempt":1,"idempotency_key":"k","deadline_ms":null',
            )
        )
        with pytest.raises(MalformedBody):
            Opener(KEYS.host, SID, HostMessage).open(forge(KEYS.host, body))
