"""The proxy handshake as a state machine: HTTP CONNECT, HTTP forward, SOCKS5, and every
way a client can get it wrong; fed whole or a byte at a time."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.netproxy import socks5
from sandbox.netproxy.handshake import (
    REFUSALS,
    TRANSITIONS,
    Failed,
    Handshake,
    HandshakeError,
    Input,
    NeedData,
    State,
    Target,
)
from sandbox.netproxy.http_head import MAX_HEAD_BYTES


def feed(data: bytes, *, one_byte: bool = False) -> tuple[Handshake, object, bytes]:
    """Feed ``data``; the machine, its last step and every reply it asked to send."""
    handshake = Handshake()
    replies = b""
    step: object = NeedData()
    chunks = [data[i : i + 1] for i in range(len(data))] if one_byte else [data]
    for chunk in chunks:
        step = handshake.receive(chunk)
        if isinstance(step, NeedData):
            replies += step.reply
        else:
            break
    return handshake, step, replies


def socks_request(host: bytes | str, port: int) -> bytes:
    if isinstance(host, str):
        packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        atyp = socks5.ATYP_IPV6 if ":" in host else socks5.ATYP_IPV4
        return bytes([5, 1, 0, atyp]) + packed + port.to_bytes(2, "big")
    return bytes([5, 1, 0, 3, len(host)]) + host + port.to_bytes(2, "big")


def test_connect_tunnel() -> None:
    hs, step, _ = feed(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n\x16\x03early")
    assert step == Target("connect", "api.example.com", 443)
    assert hs.state is State.DECIDING
    to_client, to_server = hs.accept()
    assert to_client == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert to_server == b"\x16\x03early"  # sent before the answer: kept for the server
    assert hs.state is State.RELAYING


def test_connect_ipv6() -> None:
    _, step, _ = feed(b"CONNECT [2001:db8::1]:8443 HTTP/1.1\r\n\r\n")
    assert step == Target("connect", "2001:db8::1", 8443)


def test_forward_is_rewritten_for_the_server() -> None:
    head = (
        b"POST http://Api.Example.com:8080/v1/x?q=1 HTTP/1.1\r\n"
        b"Host: evil.example\r\n"
        b"Proxy-Connection: keep-alive\r\n"
        b"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
        b"Connection: keep-alive, X-Hop\r\n"
        b"X-Hop: 1\r\n"
        b"Content-Length: 4\r\n\r\nbody"
    )
    hs, step, _ = feed(head)
    assert step == Target("http", "Api.Example.com", 8080)
    to_client, to_server = hs.accept()
    assert to_client == b""
    assert to_server == (
        b"POST /v1/x?q=1 HTTP/1.1\r\n"
        b"Host: Api.Example.com:8080\r\n"  # the host the proxy connects to, not the client's
        b"Content-Length: 4\r\n"
        b"Connection: close\r\n\r\nbody"
    )


@pytest.mark.parametrize(
    ("target", "host", "port", "path"),
    [
        (b"http://a.test", "a.test", 80, b"/"),
        (b"http://a.test?x", "a.test", 80, b"/?x"),
        (b"HTTP://a.test:81/p", "a.test", 81, b"/p"),
        (b"http://[::1]:9/", "::1", 9, b"/"),
    ],
)
def test_forward_targets(target: bytes, host: str, port: int, path: bytes) -> None:
    hs, step, _ = feed(b"GET " + target + b" HTTP/1.0\r\n\r\n")
    assert step == Target("http", host, port)
    assert hs.accept()[1].startswith(b"GET " + path + b" HTTP/1.0\r\n")


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"GET /just/a/path HTTP/1.1\r\n\r\n", "bad_request"),
        (b"GET https://a.test/ HTTP/1.1\r\n\r\n", "bad_request"),
        (b"GET http://user@a.test/ HTTP/1.1\r\n\r\n", "bad_request"),
        (b"CONNECT a.test HTTP/1.1\r\n\r\n", "bad_request"),
        (b"CONNECT a.test:0 HTTP/1.1\r\n\r\n", "bad_request"),
        (b"CONNECT a.test:99999 HTTP/1.1\r\n\r\n", "bad_request"),
        (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n", "bad_request"),
        (b"CONNECT a.test:443 HTTP/2\r\n\r\n", "bad_request"),
        (b"CONNECT a.test:443 HTTP/1.1\r\nno colon\r\n\r\n", "bad_request"),
        (b"CONNECT a.test:443 HTTP/1.1\r\n folded: x\r\n\r\n", "bad_request"),
        (b"\x16\x03\x01", "unsupported"),  # TLS straight at the proxy
        (b"\x04\x01\x00\x50", "unsupported"),  # SOCKS4
    ],
)
def test_malformed_requests_fail_with_a_reply(head: bytes, reason: str) -> None:
    hs, step, _ = feed(head)
    assert isinstance(step, Failed)
    assert step.reason == reason
    assert hs.state is State.DONE
    status = REFUSALS[reason].status
    assert step.reply.startswith(f"HTTP/1.1 {status} ".encode())
    assert f"X-Sandvisor-Refused: {reason}".encode() in step.reply


def test_head_size_is_bounded() -> None:
    hs = Handshake()
    assert hs.receive(b"CONNECT a.test:443 HTTP/1.1\r\n") == NeedData()
    step = hs.receive(b"X-Pad: " + b"a" * MAX_HEAD_BYTES)
    assert isinstance(step, Failed) and step.reason == "head_too_large"
    assert step.reply.startswith(b"HTTP/1.1 431 ")


def test_refusal_in_http() -> None:
    hs, step, _ = feed(b"CONNECT a.test:443 HTTP/1.1\r\n\r\n")
    assert isinstance(step, Target)
    reply = hs.refuse("not_allowed", "a.test:443 is not in the allowlist")
    assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert reply.endswith(b"\r\n\r\nsandvisor proxy: a.test:443 is not in the allowlist\n")
    assert hs.state is State.DONE


def test_socks5_with_a_name() -> None:
    hs = Handshake()
    assert hs.receive(b"\x05\x02\x00\x02") == NeedData(b"\x05\x00")
    step = hs.receive(socks_request(b"api.example.com", 443) + b"early")
    assert step == Target("socks5", "api.example.com", 443)
    to_client, to_server = hs.accept()
    assert to_client == socks5.reply(socks5.SUCCEEDED)
    assert to_server == b"early"


@pytest.mark.parametrize("host", ["10.1.2.3", "2001:db8::5"])
def test_socks5_with_addresses(host: str) -> None:
    hs, step, _ = feed(b"\x05\x01\x00" + socks_request(host, 80))
    assert step == Target("socks5", host, 80)
    # the greeting and the request came together: the method selection goes first
    assert hs.accept()[0] == b"\x05\x00" + socks5.reply(socks5.SUCCEEDED)


def test_socks5_refusal_codes() -> None:
    hs = Handshake()
    hs.receive(b"\x05\x01\x00")
    hs.receive(socks_request(b"a.test", 80))
    assert hs.refuse("metadata", "") == socks5.reply(socks5.NOT_ALLOWED)
    hs = Handshake()
    hs.receive(b"\x05\x01\x00")
    hs.receive(socks_request(b"a.test", 80))
    assert hs.refuse("dns_failed", "") == socks5.reply(socks5.HOST_UNREACHABLE)


@pytest.mark.parametrize(
    ("data", "reason", "reply"),
    [
        (b"\x05\x01\x02", "unsupported", b"\x05\xff"),  # only username/password offered
        (b"\x05\x01\x00\x05\x02\x00\x01" + bytes(6), "unsupported", socks5.reply(7)),  # BIND
        (b"\x05\x01\x00\x05\x01\x00\x09" + bytes(6), "unsupported", socks5.reply(8)),
        (b"\x05\x01\x00\x05\x01\x00\x03\x00\x00\x50", "bad_request", socks5.reply(1)),
        (b"\x05\x01\x00\x05\x01\x00\x01" + bytes(6), "bad_request", socks5.reply(1)),  # port 0
    ],
)
def test_socks5_failures(data: bytes, reason: str, reply: bytes) -> None:
    _, step, replies = feed(data)
    assert isinstance(step, Failed), step
    assert step.reason == reason
    assert (replies + step.reply).endswith(reply)


def test_eof_before_the_request_fails() -> None:
    hs = Handshake()
    hs.receive(b"CONNECT a.test")
    step = hs.receive(b"")
    assert isinstance(step, Failed) and step.reason == "bad_request"


def test_timeout_fails_in_the_clients_protocol() -> None:
    hs = Handshake()
    hs.receive(b"GET http://a")
    assert hs.time_out().reply.startswith(b"HTTP/1.1 408 ")
    hs = Handshake()
    hs.receive(b"\x05\x01\x00")
    assert hs.time_out().reply == socks5.reply(socks5.GENERAL_FAILURE)


def test_steps_the_table_lacks_are_refused() -> None:
    hs = Handshake()
    with pytest.raises(HandshakeError):
        hs.accept()
    hs.receive(b"CONNECT a.test:1 HTTP/1.1\r\n\r\n")
    hs.accept()
    with pytest.raises(HandshakeError):
        hs.refuse("not_allowed", "")
    with pytest.raises(HandshakeError):
        hs.receive(b"more")


def test_every_state_but_done_and_relaying_can_be_left() -> None:
    sources = {state for state, _ in TRANSITIONS}
    assert sources == set(State) - {State.DONE, State.RELAYING}
    assert all(isinstance(event, Input) for _, event in TRANSITIONS)


_REQUESTS = [
    b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
    b"GET http://a.test:8080/x HTTP/1.1\r\nAccept: */*\r\n\r\n",
    b"\x05\x01\x00" + socks_request(b"a.test", 443),
    b"\x05\x01\x00" + socks_request("192.0.2.1", 80),
]


@given(st.sampled_from(_REQUESTS), st.lists(st.integers(1, 40), max_size=30))
def test_any_split_of_the_bytes_gives_the_same_answer(data: bytes, cuts: list[int]) -> None:
    whole_hs, whole, whole_replies = feed(data)
    hs = Handshake()
    replies = b""
    step: object = NeedData()
    rest = data
    for cut in [*cuts, len(data)]:
        chunk, rest = rest[:cut], rest[cut:]
        if not chunk:
            continue
        step = hs.receive(chunk)
        if isinstance(step, NeedData):
            replies += step.reply
        else:
            break
    assert step == whole
    assert replies + hs.accept()[0] == whole_replies + whole_hs.accept()[0]


@given(st.binary(max_size=300))
def test_garbage_never_raises(data: bytes) -> None:
    hs = Handshake()
    step = hs.receive(data) if data else hs.receive(b"x")
    assert isinstance(step, NeedData | Target | Failed)
