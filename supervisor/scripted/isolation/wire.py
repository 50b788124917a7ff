"""The protocol between the host and a script child (no I/O here).

Host to child: `Run` (one execution), `ToolReply` (the answer to a `ToolCall`). Child to
host: `ChildReady` once it has started, `ToolCall` for each command the host keeps (the
tools, ``help``, ``discover``: their callbacks live in the host), `Done` once per `Run`.
Frames are the jq engine's (a 4-byte length and a msgpack body, strings as UTF-8 with
lone surrogates kept), so the same buffer reads both.
"""

from __future__ import annotations

import msgspec

from ..text_tools.jq_tool.wire import HEADER, FrameBuffer, WireError, from_wire, to_wire

__all__ = [
    "ChildFrame",
    "ChildReady",
    "Done",
    "FrameBuffer",
    "HostFrame",
    "Run",
    "ToolCall",
    "ToolReply",
    "WireError",
    "decode_child",
    "decode_host",
    "frame",
    "from_wire",
    "to_wire",
]

#: The largest frame either side takes: a script, a tool's output, a result.
MAX_FRAME = 256 << 20


class Run(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=1):
    script: bytes
    env: dict[str, bytes]
    #: ``ExecutionLimits`` as keyword arguments
    limits: dict[str, int | float]
    request_timeout: float | None
    #: the commands whose calls come back to the host (they override shell builtins)
    remote: list[str]


class ToolReply(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=2):
    call: int
    stdout: bytes
    stderr: bytes
    status: int


class ChildReady(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=3):
    pid: int


class ToolCall(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=4):
    call: int
    name: str
    args: list[bytes]
    stdin: bytes | None


class Done(msgspec.Struct, array_like=True, forbid_unknown_fields=True, tag=5):
    stdout: bytes
    stderr: bytes
    exit_code: int
    error: str | None
    stdout_truncated: bool
    stderr_truncated: bool


HostFrame = Run | ToolReply
ChildFrame = ChildReady | ToolCall | Done

_encoder = msgspec.msgpack.Encoder()
_host_decoder = msgspec.msgpack.Decoder(HostFrame)
_child_decoder = msgspec.msgpack.Decoder(ChildFrame)


def frame(message: msgspec.Struct) -> bytes:
    body = _encoder.encode(message)
    if len(body) > MAX_FRAME:
        raise WireError(f"frame of {len(body)} bytes (limit {MAX_FRAME})")
    return len(body).to_bytes(HEADER, "big") + body


def decode_host(body: bytes) -> HostFrame:
    try:
        return _host_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"bad host frame: {exc}") from None


def decode_child(body: bytes) -> ChildFrame:
    try:
        return _child_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"bad child frame: {exc}") from None
