"""The `sandvisor serve` wire format without I/O: strict decoding with one-line errors that
keep the request's id, event encoding, the published JSON Schema, and the line splitter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from hosting_helpers import ROOT
from hypothesis import given
from hypothesis import strategies as st

from sandbox.netproxy.events import NetEvent
from supervisor.commands import serve_wire as wire
from supervisor.workers.outcome import Outcome

NEEDS_SANDBOX = False
SCHEMA_FILE = ROOT / "docs" / "serve-protocol.schema.json"


def schema_for(name: str) -> dict[str, Any]:
    document = json.loads(SCHEMA_FILE.read_text())
    return {**document, "oneOf": [{"$ref": f"#/$defs/{name}"}]}


POLICY = {"network": False, "pids": None, "env": {"A": "b"}}
VALID = [
    {"op": "hello", "id": 1, "adapters": ["m:r"], "policy": POLICY},
    {
        "op": "invoke",
        "id": "c1",
        "tool": "t",
        "input": {"any": ["json", 1]},
        "deadline": 2,
        "idempotency_key": "k",
        "stream": False,
    },
    {"op": "invoke", "id": 2, "tool": "t"},
    {"op": "script", "id": 3, "commands": "echo hi", "timeout_ms": 100},
    {"op": "cancel", "id": 4, "target": "c1"},
    {"op": "audit", "enable": False},
    {"op": "pending"},
    {"op": "reconcile", "id": 5, "op_id": 9},
    {"op": "ping"},
    {"op": "shutdown", "id": "bye"},
]


@pytest.mark.parametrize("message", VALID, ids=lambda m: m["op"])
def test_valid_requests_decode_and_match_the_schema(message: dict[str, Any]) -> None:
    request = wire.decode_request(json.dumps(message).encode())
    assert type(request).__name__.lower() == message["op"]
    assert request.id == message.get("id")
    jsonschema.validate(message, schema_for("Request"))


INVALID: list[tuple[bytes, str, Any, str]] = [
    (b"{", "bad_json", None, "not a JSON object"),
    (b'"hello"', "bad_request", None, "Expected `object`"),
    (b'{"id": 3}', "bad_request", 3, "every request names its op"),
    (b'{"op": "nope", "id": "x"}', "bad_request", "x", "op is one of: hello"),
    (b'{"op": "ping", "id": 1, "oops": 2}', "bad_request", 1, "unknown field `oops`"),
    (b'{"op": "invoke", "id": 1, "tool": "t", "deadline": 0}', "bad_request", 1, "deadline"),
    (b'{"op": "invoke", "id": 1, "tool": "t", "deadline": "2"}', "bad_request", 1, "deadline"),
    (b'{"op": "hello", "id": 1, "pool_size": 100}', "bad_request", 1, "pool_size"),
    (b'{"op": "hello", "id": 1, "policy": {"seccomp": "off"}}', "bad_request", 1, "seccomp"),
    (b'{"op": "ping", "id": true}', "bad_request", None, "id"),
    (b'{"op": "ping", "id": 9007199254740993}', "bad_request", None, "id"),
    (b'{"op": "ping", "id": ""}', "bad_request", None, "id"),
    (b'{"op": "reconcile", "id": 2, "op_id": 0}', "bad_request", 2, "op_id"),
]


@pytest.mark.parametrize(("line", "code", "request_id", "says"), INVALID)
def test_invalid_requests_are_one_line_errors_with_the_id(
    line: bytes, code: str, request_id: Any, says: str
) -> None:
    with pytest.raises(wire.RequestError) as caught:
        wire.decode_request(line)
    error = caught.value
    assert (error.code, error.request_id) == (code, request_id)
    assert says in error.message
    event = json.loads(wire.error_event(error.request_id, error.code, error.message))
    assert event["event"] == "error" and "\n" not in event["error"]["message"]
    jsonschema.validate(event, schema_for("Event"))


TOOL = wire.ToolInfo(name="t", format="text", deadline=None, max_input_bytes=1,
                     max_output_bytes=2, max_attempts=1)  # fmt: skip


def test_events_encode_as_one_line_each_and_match_the_schema() -> None:
    outcome = Outcome(status="completed", tool="t", value={"v": [1]}, op_id=3)
    events: list[wire.Event] = [
        wire.Ready(id=1, version="0.1.0", tools=[TOOL]),
        wire.Started(id="c", op_id=3),
        wire.ChunkEvent(id="c", index=1, text="line\nbreak"),
        wire.OutcomeEvent(id="c", outcome=outcome),
        wire.Pong(id=None),
        wire.Bye(id="z"),
        wire.NetAuditEvent(net=NetEvent(
            time=1.5, group="g", sandbox="s1", tool="t", call="r2", protocol="connect",
            host="api.example", port=443, address="203.0.113.7", allowed=True, reason=None,
            detail=None, bytes_up=10, bytes_down=20, duration_ms=3.0,
        )),
    ]  # fmt: skip
    for event in events:
        line = wire.encode_event(event)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        decoded = json.loads(line)
        jsonschema.validate(decoded, schema_for("Event"))
    assert json.loads(wire.encode_event(events[0]))["protocol"] == wire.PROTOCOL_VERSION
    assert wire.error_event(1, "x", "first line\nsecond line").count(b"\n") == 1


def test_the_published_schema_is_the_one_the_code_makes() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == json.loads(json.dumps(wire.json_schema()))
    jsonschema.Draft202012Validator.check_schema(wire.json_schema())


# -- the line splitter ---------------------------------------------------------------------------


def test_lines_split_across_feeds_and_long_lines_are_skipped_once() -> None:
    lines = wire.LineBuffer(limit=8)
    assert lines.feed(b"ab") == []
    assert lines.feed(b"c\nde") == [b"abc"]
    assert lines.feed(b"\n\n") == [b"de", b""]
    out = lines.feed(b"0123456789")
    assert len(out) == 1 and isinstance(out[0], wire.TooLong)
    assert lines.feed(b"more of it") == []  # still skipping
    assert lines.feed(b"tail\nok\n") == [b"ok"]
    out = lines.feed(b"012345678\nfine\n")
    assert isinstance(out[0], wire.TooLong) and out[1:] == [b"fine"]
    assert lines.pending == 0


@given(
    st.lists(st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.lists(st.integers(min_value=1, max_value=15), min_size=1, max_size=50),
)
def test_any_chunking_gives_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    limit = 12
    data = b"".join(line + b"\n" for line in lines)
    buffer = wire.LineBuffer(limit=limit)
    got: list[Any] = []
    position, index = 0, 0
    while position < len(data):
        size = cuts[index % len(cuts)]
        got += buffer.feed(data[position : position + size])
        position += size
        index += 1
    expected = [line if len(line) <= limit else "long" for line in lines]
    assert [g if isinstance(g, bytes) else "long" for g in got] == expected


def test_decoding_is_typed() -> None:
    request = wire.decode_request(b'{"op": "hello", "policy": {"memory_bytes": null}}')
    assert isinstance(request, wire.Hello) and request.policy is not None
    assert request.policy.memory_bytes is None
    assert request.policy.pids is msgspec.UNSET
    assert isinstance(Path(SCHEMA_FILE), Path)
