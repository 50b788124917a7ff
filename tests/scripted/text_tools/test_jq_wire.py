"""The jq engine protocol without processes: frames, limits, strings that are not UTF-8."""

from __future__ import annotations

import msgspec
import pytest

from supervisor.scripted.text_tools.jq_tool.wire import (
    EngineReady,
    FrameBuffer,
    JqReply,
    JqRequest,
    WireError,
    decode_child_frame,
    decode_request,
    frame,
    from_wire,
    request_frame,
)


def _bodies(data: bytes, max_frame: int = 1 << 20, step: int = 1) -> list[bytes]:
    buffer = FrameBuffer(max_frame)
    out = []
    for i in range(0, len(data), step):
        buffer.feed(data[i : i + step])
        while (body := buffer.next_frame()) is not None:
            out.append(body)
    return out


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_frames_survive_any_split(step: int) -> None:
    data = (
        request_frame(["-r", ".a"], '{"a": 1}')
        + frame(EngineReady(7))
        + frame(JqReply(b"x", b"", 0))
    )
    bodies = _bodies(data, step=step)
    assert decode_request(bodies[0]) == JqRequest([b"-r", b".a"], b'{"a": 1}')
    assert decode_child_frame(bodies[1]) == EngineReady(7)
    assert decode_child_frame(bodies[2]) == JqReply(b"x", b"", 0, False)


def test_pending_counts_the_bytes_still_needed() -> None:
    data = frame(JqReply(b"y" * 100, b"", 0))
    buffer = FrameBuffer(1 << 20)
    assert buffer.pending() == 0
    buffer.feed(data[:2])
    assert buffer.pending() == 2
    buffer.feed(data[2:10])
    assert buffer.pending() == len(data) - 10
    buffer.feed(data[10:])
    assert buffer.pending() == 0
    assert buffer.next_frame() == data[4:]


def test_lone_surrogates_and_no_stdin_travel_intact() -> None:
    text = "a\udcff\ud800b é"
    (body,) = _bodies(request_frame([text], text))
    request = decode_request(body)
    assert [from_wire(a) for a in request.args] == [text]
    assert request.stdin is not None and from_wire(request.stdin) == text
    (body,) = _bodies(request_frame([], None))
    assert decode_request(body).stdin is None


def test_oversized_frames_are_refused_before_they_arrive() -> None:
    buffer = FrameBuffer(10)
    buffer.feed((11).to_bytes(4, "big"))
    with pytest.raises(WireError, match="frame of 11 bytes"):
        buffer.next_frame()


@pytest.mark.parametrize(
    "body",
    [
        b"\xc1",
        msgspec.msgpack.encode([9, 1]),  # unknown tag
        msgspec.msgpack.encode([3, b"", b"", 0, False, "extra"]),  # unknown field
        msgspec.msgpack.encode([1, ["not bytes"], None]),
    ],
)
def test_malformed_bodies_are_wire_errors(body: bytes) -> None:
    with pytest.raises(WireError):
        decode_child_frame(body)
    with pytest.raises(WireError):
        decode_request(body)
