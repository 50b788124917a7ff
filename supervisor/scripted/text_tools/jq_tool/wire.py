"""The jq engine protocol: length-prefixed msgpack frames over two pipes (no I/O here).

Host to child: one `JqRequest` per call. Child to host: `EngineReady` once, when it has
started, then one `JqReply` per request, in order. A frame is a 4-byte big-endian length
and a msgpack body. Strings travel as UTF-8 bytes with lone surrogates kept
(``surrogatepass``): the shell's values carry undecodable input bytes that way.
"""

from __future__ import annotations

import msgspec

HEADER = 4


class WireError(Exception):
    """A frame that breaks the protocol: too big or undecodable."""


class JqRequest(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=1):
    args: list[bytes]
    stdin: bytes | None


class EngineReady(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=2):
    pid: int


class JqReply(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=3):
    stdout: bytes
    stderr: bytes
    status: int
    #: The child stops after this reply (it ran out of memory): do not reuse it.
    retire: bool = False


ChildFrame = EngineReady | JqReply

_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(JqRequest)
_child_decoder = msgspec.msgpack.Decoder(ChildFrame)


def to_wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def from_wire(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def frame(message: msgspec.Struct) -> bytes:
    body = _encoder.encode(message)
    return len(body).to_bytes(HEADER, "big") + body


def request_frame(args: list[str], stdin: str | None) -> bytes:
    wire_stdin = None if stdin is None else to_wire(stdin)
    return frame(JqRequest([to_wire(a) for a in args], wire_stdin))


def decode_request(body: bytes) -> JqRequest:
    try:
        return _request_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"bad request: {exc}") from None


def decode_child_frame(body: bytes) -> ChildFrame:
    try:
        return _child_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"bad reply: {exc}") from None


class FrameBuffer:
    """Bytes in, whole frame bodies out; refuses a frame announced above ``max_frame``."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame: int) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> None:
        self._buf += data

    def pending(self) -> int:
        """Bytes still needed for the frame in progress (0 when none has started)."""
        buf = self._buf
        if len(buf) < HEADER:
            return HEADER - len(buf) if buf else 0
        return max(0, HEADER + int.from_bytes(buf[:HEADER], "big") - len(buf))

    def next_frame(self) -> bytes | None:
        """The next complete frame's body, or None until more bytes arrive."""
        buf = self._buf
        if len(buf) < HEADER:
            return None
        size = int.from_bytes(buf[:HEADER], "big")
        if size > self._max:
            raise WireError(f"frame of {size} bytes (limit {self._max})")
        end = HEADER + size
        if len(buf) < end:
            return None
        body = bytes(buf[HEADER:end])
        del buf[:end]
        return body
