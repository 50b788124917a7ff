"""One proxied connection's handshake, as a state machine: bytes in, decisions out.

The first byte says which protocol the client speaks (5: SOCKS5; a letter: HTTP), so one
port serves ``HTTP_PROXY``, ``HTTPS_PROXY`` and ``ALL_PROXY=socks5h://``. The machine
reads until it knows the target (`Target`), then waits for the driver's decision:
`Handshake.accept` (the reply for the client and the bytes for the server: a rewritten
HTTP head, or whatever the client sent early) or `Handshake.refuse` (the reply that says
why, in the client's protocol). After that the driver only moves bytes.

Every transition is in `TRANSITIONS`; a step the table lacks is a bug of the driver and
raises `HandshakeError`. What each refusal looks like on the wire is in `REFUSALS`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from . import http_head, socks5

Protocol = Literal["connect", "http", "socks5"]


class State(enum.Enum):
    START = "start"
    HTTP_HEAD = "http_head"
    SOCKS_GREETING = "socks_greeting"
    SOCKS_REQUEST = "socks_request"
    DECIDING = "deciding"
    RELAYING = "relaying"
    DONE = "done"


class Input(enum.Enum):
    HTTP = "http"  # the first byte is a letter
    SOCKS = "socks"  # the first byte is 5
    GREETED = "greeted"  # a SOCKS greeting, answered
    TARGET = "target"  # the target is known
    ACCEPT = "accept"  # the driver connected
    REFUSE = "refuse"  # the driver said no
    FAIL = "fail"  # the client sent something the proxy will not serve


S, In = State, Input
TRANSITIONS: dict[tuple[State, Input], State] = {
    (S.START, In.HTTP): S.HTTP_HEAD,
    (S.START, In.SOCKS): S.SOCKS_GREETING,
    (S.START, In.FAIL): S.DONE,
    (S.HTTP_HEAD, In.TARGET): S.DECIDING,
    (S.HTTP_HEAD, In.FAIL): S.DONE,
    (S.SOCKS_GREETING, In.GREETED): S.SOCKS_REQUEST,
    (S.SOCKS_GREETING, In.FAIL): S.DONE,
    (S.SOCKS_REQUEST, In.TARGET): S.DECIDING,
    (S.SOCKS_REQUEST, In.FAIL): S.DONE,
    (S.DECIDING, In.ACCEPT): S.RELAYING,
    (S.DECIDING, In.REFUSE): S.DONE,
}
del S, In


@dataclass(frozen=True, slots=True)
class Refusal:
    """How one refusal reads: HTTP status and phrase, SOCKS5 reply code, and words."""

    status: int
    phrase: str
    socks: int
    text: str


#: Every reason the proxy refuses a connection, in one place.
REFUSALS: dict[str, Refusal] = {
    "not_allowed": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "not in the allowlist"),
    "metadata": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a cloud metadata address"),
    "loopback": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a loopback address"),
    "unspecified": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "an unspecified address"),
    "private": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a private address"),
    "link_local": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a link-local address"),
    "cgnat": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a shared (CGNAT) address"),
    "multicast": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a multicast address"),
    "reserved": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "a reserved address"),
    "no_call": Refusal(403, "Forbidden", socks5.NOT_ALLOWED, "no call of this sandbox is running"),
    "connection_cap": Refusal(
        429, "Too Many Requests", socks5.NOT_ALLOWED, "the call's connection limit is reached"
    ),
    "byte_cap": Refusal(
        429, "Too Many Requests", socks5.NOT_ALLOWED, "the call's byte limit is reached"
    ),
    "dns_failed": Refusal(502, "Bad Gateway", socks5.HOST_UNREACHABLE, "the name does not resolve"),
    "connect_failed": Refusal(
        502, "Bad Gateway", socks5.CONNECTION_REFUSED, "the connection failed"
    ),
    "connect_timeout": Refusal(
        504, "Gateway Timeout", socks5.HOST_UNREACHABLE, "the connection timed out"
    ),
    "bad_request": Refusal(400, "Bad Request", socks5.GENERAL_FAILURE, "a malformed request"),
    "unsupported": Refusal(
        405, "Method Not Allowed", socks5.COMMAND_NOT_SUPPORTED, "not supported by this proxy"
    ),
    "head_too_large": Refusal(
        431, "Request Header Fields Too Large", socks5.GENERAL_FAILURE, "the request is too large"
    ),
    "handshake_timeout": Refusal(
        408, "Request Timeout", socks5.GENERAL_FAILURE, "the request was not sent in time"
    ),
    "closing": Refusal(503, "Service Unavailable", socks5.GENERAL_FAILURE, "the sandbox is ending"),
}


_READING = frozenset({State.START, State.HTTP_HEAD, State.SOCKS_GREETING, State.SOCKS_REQUEST})


class HandshakeError(Exception):
    """The driver asked for a step the state table does not allow (a bug)."""


@dataclass(frozen=True, slots=True)
class NeedData:
    """Read more; send ``reply`` first (a SOCKS method selection)."""

    reply: bytes = b""


@dataclass(frozen=True, slots=True)
class Target:
    """The client asked for ``host:port`` (``host`` as the client wrote it, unresolved)."""

    protocol: Protocol
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Failed:
    """The client sent something the proxy will not serve: send ``reply``, then close."""

    reason: str
    detail: str
    reply: bytes


Step = NeedData | Target | Failed


class Handshake:
    """The proxy side of one connection's handshake (HTTP CONNECT, HTTP forward, SOCKS5)."""

    __slots__ = ("_buffer", "_early_reply", "_forward", "protocol", "state")

    def __init__(self) -> None:
        self.state = State.START
        self.protocol: Protocol | None = None
        self._buffer = bytearray()
        self._forward = b""
        self._early_reply = b""  # a SOCKS method selection not sent yet

    def _go(self, event: Input) -> None:
        nxt = TRANSITIONS.get((self.state, event))
        if nxt is None:
            raise HandshakeError(f"{event.value} is not allowed in state {self.state.value}")
        self.state = nxt

    def receive(self, data: bytes) -> Step:
        """Feed what the client sent (b"" at its EOF); the next step."""
        if self.state not in _READING:
            raise HandshakeError(f"no data is expected in state {self.state.value}")
        if not data:
            return self._fail("bad_request", "the client closed before its request was complete")
        self._buffer += data
        if self.state is State.START:
            first = self._buffer[0]
            if first == socks5.VERSION:
                self._go(Input.SOCKS)
            elif bytes([first]).isalpha():  # ASCII only: a method name
                self._go(Input.HTTP)
            else:
                return self._fail(
                    "unsupported", f"first byte {first:#04x}: neither HTTP nor SOCKS5"
                )
        if self.state is State.HTTP_HEAD:
            return self._http()
        step = self._socks()
        if isinstance(step, NeedData) and step.reply and self._buffer:
            # the request came with the greeting (an optimistic client): answer both
            self._early_reply = step.reply
            step = self._socks()
            if isinstance(step, NeedData):
                step, self._early_reply = NeedData(self._early_reply), b""
        return step

    def _http(self) -> Step:
        end = http_head.head_end(self._buffer)
        if end < 0:
            if len(self._buffer) > http_head.MAX_HEAD_BYTES:
                return self._fail(
                    "head_too_large", f"no end of head in {http_head.MAX_HEAD_BYTES} bytes"
                )
            return NeedData()
        if end > http_head.MAX_HEAD_BYTES:
            return self._fail(
                "head_too_large", f"the head exceeds {http_head.MAX_HEAD_BYTES} bytes"
            )
        try:
            request = http_head.parse_head(bytes(self._buffer[:end]))
        except http_head.HeadError as exc:
            return self._fail(exc.reason, exc.detail)
        del self._buffer[:end]
        self.protocol = "connect" if request.method == "CONNECT" else "http"
        self._forward = request.forward
        self._go(Input.TARGET)
        return Target(self.protocol, request.host, request.port)

    def _socks(self) -> Step:
        try:
            if self.state is State.SOCKS_GREETING:
                size = socks5.greeting_size(self._buffer)
                if not size:
                    return NeedData()
                answer = socks5.greet(self._buffer[:size])
                del self._buffer[:size]
                self._go(Input.GREETED)
                return NeedData(answer)
            request = socks5.parse_request(self._buffer)
        except socks5.SocksError as exc:
            return self._fail(exc.reason, exc.detail, exc.reply)
        if request is None:
            return NeedData()
        del self._buffer[: request.size]
        self.protocol = "socks5"
        self._go(Input.TARGET)
        return Target("socks5", request.host, request.port)

    def _fail(self, reason: str, detail: str, reply: bytes | None = None) -> Failed:
        if reply is None:
            reply = self._refusal_reply(reason, detail)
        self._go(Input.FAIL)
        return Failed(reason, detail, self._take_early() + reply)

    def _take_early(self) -> bytes:
        early, self._early_reply = self._early_reply, b""
        return early

    def time_out(self) -> Failed:
        """The client did not complete its request in time."""
        return self._fail("handshake_timeout", "the request was not complete in time")

    def accept(self) -> tuple[bytes, bytes]:
        """Connected: (bytes for the client, bytes for the server, in that order)."""
        self._go(Input.ACCEPT)
        early, self._buffer = bytes(self._buffer), bytearray()
        if self.protocol == "http":
            return b"", self._forward + early
        if self.protocol == "socks5":
            return self._take_early() + socks5.reply(socks5.SUCCEEDED), early
        return http_head.ESTABLISHED, early

    def refuse(self, reason: str, detail: str) -> bytes:
        """The reply that tells the client why (then close)."""
        reply = self._refusal_reply(reason, detail)
        self._go(Input.REFUSE)
        return self._take_early() + reply

    def _refusal_reply(self, reason: str, detail: str) -> bytes:
        refusal = REFUSALS[reason]
        if self.state in (State.SOCKS_GREETING, State.SOCKS_REQUEST) or self.protocol == "socks5":
            return socks5.reply(refusal.socks)
        return http_head.response(refusal.status, refusal.phrase, reason, detail or refusal.text)
