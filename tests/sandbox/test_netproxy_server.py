"""The host-side proxy with real sockets: real servers on 127.0.0.1, clients on the
endpoint's Unix socket (no sandbox here: `test_netproxy_sandbox` adds it)."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import time
from collections.abc import AsyncIterator, Callable

import anyio
import pytest
from net_helpers import closed_port, http_server, http_via, read_all, socks5_via, unix

from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy import server as server_module
from sandbox.netproxy.events import NetEvent
from sandbox.netproxy.server import PASSED, CallTag, Endpoint, ProxyServer

NEEDS_SANDBOX = False


class Proxy:
    def __init__(self, server: ProxyServer, events: list[NetEvent]) -> None:
        self.server = server
        self.events = events

    async def settled(self, count: int) -> list[NetEvent]:
        """The events, once ``count`` connections have ended (a client may see its
        answer end before the proxy's task has written the connection's event)."""
        with anyio.fail_after(5):
            while len(self.events) < count:
                await anyio.sleep(0.01)
        return self.events

    async def open(self, *allow: str, **kw: object) -> Endpoint:
        calls = kw.pop("calls", None)
        network = NetworkAllowlist(allow, **kw)  # type: ignore[arg-type]
        return await self.server.open(network, group="g", sandbox="s1", calls=calls)  # type: ignore[arg-type]


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    events: list[NetEvent] = []
    async with anyio.create_task_group() as group:
        server = await group.start(ProxyServer(events.append, handshake_timeout=1.0).run)
        yield Proxy(server, events)
        group.cancel_scope.cancel()


async def in_thread(fn: Callable[..., object], *args: object) -> object:
    return await anyio.to_thread.run_sync(fn, *args)


async def test_http_connect_and_socks5_reach_an_allowed_server(proxy: Proxy) -> None:
    with http_server() as port:
        ep = await proxy.open(
            f"127.0.0.1:{port}", f"web.test:{port}", hosts={"web.test": "127.0.0.1"}
        )
        forward = await in_thread(
            http_via,
            ep.socket_path,
            f"GET http://web.test:{port}/echo HTTP/1.1\r\nHost: evil\r\n\r\n".encode(),
        )
        assert isinstance(forward, bytes) and forward.startswith(b"HTTP/1.1 200 OK")
        assert f"Host: web.test:{port}".encode() in forward  # the server was asked for it
        assert b"Connection: close" in forward and b"evil" not in forward
        tunnel = await in_thread(
            http_via, ep.socket_path,
            f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /5000 HTTP/1.0\r\n\r\n".encode(),
        )  # fmt: skip
        assert isinstance(tunnel, bytes)
        assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK")
        assert tunnel.endswith(b"x" * 5000)
        code, body = await in_thread(
            socks5_via, ep.socket_path, "web.test", port, b"GET /70000 HTTP/1.0\r\n\r\n"
        )  # type: ignore[misc]
        assert code == 0 and body.endswith(b"x" * 70000)
    events = await proxy.settled(3)
    assert [(e.protocol, e.allowed, e.reason) for e in events] == [
        ("http", True, None),
        ("connect", True, None),
        ("socks5", True, None),
    ]
    assert all(e.address == "127.0.0.1" and e.group == "g" and e.sandbox == "s1" for e in events)
    assert events[1].bytes_up == len(b"GET /5000 HTTP/1.0\r\n\r\n")
    assert events[2].bytes_down > 70000 and events[2].host == "web.test"


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("denied.test:81", "not_allowed"),
        ("localhost:80", "loopback"),  # allowed by name, but it resolves to 127.0.0.1
        ("169.254.169.254:80", "metadata"),
        ("[::ffff:127.0.0.1]:80", "loopback"),
        ("10.0.0.1:80", "private"),
    ],
)
async def test_refusals_are_answered_and_audited(proxy: Proxy, target: str, reason: str) -> None:
    ep = await proxy.open("localhost:80", "*:80")
    reply = await in_thread(http_via, ep.socket_path, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
    assert isinstance(reply, bytes) and reply.startswith(b"HTTP/1.1 403 Forbidden")
    assert f"X-Sandvisor-Refused: {reason}".encode() in reply
    (event,) = await proxy.settled(1)
    assert (event.allowed, event.reason) == (False, reason)
    assert event.address is None and event.bytes_up == event.bytes_down == 0
    assert event.detail


async def test_socks5_refusal_and_a_name_that_does_not_resolve(proxy: Proxy) -> None:
    ep = await proxy.open("*.invalid", "127.0.0.1")
    code, _ = await in_thread(socks5_via, ep.socket_path, "no-such-host.invalid", 80, b"")  # type: ignore[misc]
    assert code == 4  # host unreachable
    code, _ = await in_thread(socks5_via, ep.socket_path, "example.org", 80, b"")  # type: ignore[misc]
    assert code == 2  # not allowed by the ruleset
    reply = await in_thread(
        http_via, ep.socket_path, f"CONNECT 127.0.0.1:{closed_port()} HTTP/1.1\r\n\r\n".encode()
    )
    assert isinstance(reply, bytes) and reply.startswith(b"HTTP/1.1 502 Bad Gateway")
    events = await proxy.settled(3)
    assert [e.reason for e in events] == ["dns_failed", "not_allowed", "connect_failed"]


async def test_a_server_that_never_answers_the_connect_times_out() -> None:
    """A listener whose accept queue is full drops the proxy's SYN: the connect waits,
    then ends at the connect timeout with a 504 and its event."""
    events: list[NetEvent] = []
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        fillers = [socket.socket() for _ in range(3)]
        try:
            for filler in fillers:  # queued, never accepted: the queue stays full
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
            async with anyio.create_task_group() as group:
                server = await group.start(ProxyServer(events.append, connect_timeout=0.3).run)
                ep = await server.open(NetworkAllowlist((f"127.0.0.1:{port}",)))
                started = time.monotonic()
                reply = await in_thread(
                    http_via, ep.socket_path, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()
                )
                waited = time.monotonic() - started
                with anyio.fail_after(5):
                    while not events:
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
        finally:
            for filler in fillers:
                filler.close()
    assert isinstance(reply, bytes) and reply.startswith(b"HTTP/1.1 504 Gateway Timeout")
    assert waited >= 0.3
    (event,) = events
    assert (event.allowed, event.reason, event.address) == (False, "connect_timeout", "127.0.0.1")


async def test_connection_and_byte_caps_per_call(proxy: Proxy) -> None:
    tags = [CallTag("web.get", "op-1")]
    with http_server() as port:
        ep = await proxy.open(
            f"127.0.0.1:{port}", max_connections=2, max_bytes=100_000, calls=lambda: tags
        )
        get = f"GET http://127.0.0.1:{port}/60000 HTTP/1.1\r\n\r\n".encode()
        first = await in_thread(http_via, ep.socket_path, get)
        assert isinstance(first, bytes) and first.endswith(b"x" * 60000)
        await proxy.settled(1)  # one connection ended before the next began
        second = await in_thread(http_via, ep.socket_path, get)  # crosses 100,000: cut short
        assert isinstance(second, bytes) and len(second) < 60000
        await proxy.settled(2)
        third = await in_thread(http_via, ep.socket_path, get)
        assert isinstance(third, bytes) and third.startswith(b"HTTP/1.1 429 ")
        tags[:] = [CallTag("web.get", "op-2")]  # the next call starts afresh
        fourth = await in_thread(http_via, ep.socket_path, get)
        assert isinstance(fourth, bytes) and fourth.endswith(b"x" * 60000)
    reasons = [(e.call, e.allowed, e.reason) for e in await proxy.settled(4)]
    assert reasons == [
        ("op-1", True, None),
        ("op-1", True, "byte_cap"),
        ("op-1", False, "connection_cap"),
        ("op-2", True, None),
    ]
    assert all(e.tool == "web.get" for e in proxy.events)


async def test_relayed_bytes_are_counted_exactly_and_capped_across_connections(
    proxy: Proxy,
) -> None:
    """Six tunnels of one call at once: each event counts exactly what its client sent
    and received, and together they stay within the call's cap."""
    tags = [CallTag("web.get", "op-1")]
    reply = b"HTTP/1.1 200 Connection established\r\n\r\n"
    with http_server() as port:
        ep = await proxy.open(f"127.0.0.1:{port}", max_bytes=1_000_000, calls=lambda: tags)
        request = b"GET /300000 HTTP/1.0\r\nX-Pad: " + b"p" * 5000 + b"\r\n\r\n"
        got: list[bytes] = []

        async def one() -> None:
            answer = await in_thread(
                http_via, ep.socket_path,
                f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode() + request,
            )  # fmt: skip
            assert isinstance(answer, bytes)
            if answer.startswith(reply):
                got.append(answer[len(reply) :])
            else:  # began after the others had used the call's bytes up
                assert answer.startswith(b"HTTP/1.1 429 "), answer[:100]

        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(one)
    events = await proxy.settled(6)
    through = [e for e in events if e.allowed]
    assert sorted(e.bytes_down for e in through) == sorted(len(body) for body in got)
    assert all(e.bytes_up == len(request) for e in through if e.bytes_down)
    assert sum(e.bytes_up + e.bytes_down for e in events) <= 1_000_000
    assert sum(len(body) == 300_000 + len(_head(body)) for body in got) >= 1  # some got through
    assert sum(e.reason == "byte_cap" for e in events) >= 2  # 6 x 300 kB is past the cap


def _head(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"


async def test_a_passed_client_socket_is_served_and_anything_else_refused(proxy: Proxy) -> None:
    """The forwarder's way: its client's TCP socket passed with ``PASSED`` (SCM_RIGHTS),
    the proxy speaks on it directly; a pipe, a Unix socket or a marker without a socket
    is refused (bad_request), and nothing passed is kept open."""
    with http_server() as port:
        ep = await proxy.open(f"127.0.0.1:{port}")

        def through_a_passed_socket() -> bytes:
            with socket.create_server(("127.0.0.1", 0)) as listener:
                client = socket.create_connection(listener.getsockname())
                accepted, _ = listener.accept()
            with client, accepted, unix(ep.socket_path) as conn:
                socket.send_fds(conn, [PASSED], [accepted.fileno()])
                client.sendall(f"GET http://127.0.0.1:{port}/3000 HTTP/1.1\r\n\r\n".encode())
                return read_all(client)

        def passing(fd: int, marker: bytes = PASSED) -> bytes:
            with unix(ep.socket_path) as conn:
                socket.send_fds(conn, [marker], [fd])
                return read_all(conn)

        answer = await in_thread(through_a_passed_socket)
        assert isinstance(answer, bytes) and answer.startswith(b"HTTP/1.1 200 OK")
        assert answer.endswith(b"x" * 3000)
        before = len(os.listdir("/proc/self/fd"))
        read, write = os.pipe()
        one, other = socket.socketpair()
        with one, other:
            assert await in_thread(passing, read) == b""
            assert await in_thread(passing, one.fileno()) == b""
            with socket.create_server(("127.0.0.1", 0)) as tcp:
                assert await in_thread(passing, tcp.fileno(), b"GET") == b""
        os.close(read)
        os.close(write)
        events = await proxy.settled(4)
        assert len(os.listdir("/proc/self/fd")) <= before
    assert (events[0].allowed, events[0].bytes_down) == (True, len(answer))
    assert [(e.allowed, e.reason) for e in events[1:]] == [(False, "bad_request")] * 3
    assert all("passed something else" in (e.detail or "") for e in events[1:])


async def test_one_connection_carries_every_client_the_forwarder_passes(proxy: Proxy) -> None:
    """The forwarder keeps one connection: each message on it passes one more client's
    socket, served like the first, two at once included; a message that passes anything
    else ends the connection (bad_request), and nothing passed is kept open."""
    with http_server() as port:
        ep = await proxy.open(f"127.0.0.1:{port}")

        def clients_over_one_connection() -> tuple[list[bytes], bytes]:
            with socket.create_server(("127.0.0.1", 0)) as listener, unix(ep.socket_path) as conn:
                pairs = []
                for _ in range(3):
                    client = socket.create_connection(listener.getsockname())
                    accepted, _ = listener.accept()
                    socket.send_fds(conn, [PASSED], [accepted.fileno()])
                    accepted.close()
                    pairs.append(client)
                for size, client in zip((1000, 2000, 3000), pairs, strict=True):
                    client.sendall(f"GET http://127.0.0.1:{port}/{size} HTTP/1.1\r\n\r\n".encode())
                answers = []
                for client in pairs:
                    with client:
                        answers.append(read_all(client))
                read, write = os.pipe()
                socket.send_fds(conn, [PASSED], [read])  # not a socket: the carrier ends
                os.close(read)
                os.close(write)
                conn.settimeout(5)
                return answers, conn.recv(10)

        before = len(os.listdir("/proc/self/fd"))
        answers, last = await in_thread(clients_over_one_connection)  # type: ignore[misc]
        events = await proxy.settled(4)
        assert len(os.listdir("/proc/self/fd")) <= before
    assert [a.endswith(b"x" * n) and a.startswith(b"HTTP/1.1 200 OK") for a, n in
            zip(answers, (1000, 2000, 3000), strict=True)] == [True] * 3  # fmt: skip
    assert last == b""  # the proxy closed the carrier
    assert (
        sorted((e.allowed, e.reason) for e in events)
        == [(False, "bad_request")] + [(True, None)] * 3
    )
    assert ep.open_connections == 0


async def test_a_sandbox_holds_at_most_max_open_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seven clients passed at once over one connection, with room for four open (the
    forwarder's connection is one of them): three are held, the other four closed at
    once with connection_cap, each counted before the next message is read."""
    monkeypatch.setattr(server_module, "MAX_OPEN", 4)
    events: list[NetEvent] = []
    async with anyio.create_task_group() as group:
        server = await group.start(ProxyServer(events.append, handshake_timeout=60).run)
        ep = await server.open(NetworkAllowlist(("*",)))

        def burst() -> list[bytes]:
            with socket.create_server(("127.0.0.1", 0)) as listener, unix(ep.socket_path) as conn:
                clients = []
                for _ in range(7):
                    clients.append(socket.create_connection(listener.getsockname()))
                    accepted, _ = listener.accept()
                    with accepted:
                        socket.send_fds(conn, [PASSED], [accepted.fileno()])
                until = time.monotonic() + 10
                while sum(e.reason == "connection_cap" for e in events) < 4:
                    assert time.monotonic() < until, events
                    time.sleep(0.01)
                ends = []
                for client in clients:
                    with client:
                        client.setblocking(False)
                        try:
                            ends.append(client.recv(1))
                        except BlockingIOError:  # held: nothing said, not closed
                            ends.append(b"held")
                return ends

        ends = await in_thread(burst)
        with anyio.fail_after(10):
            while ep.open_connections or len(events) < 7:
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    assert ends == [b"held"] * 3 + [b""] * 4
    caps = [e for e in events if e.reason == "connection_cap"]
    assert len(caps) == 4 and all("4 connections" in (e.detail or "") for e in caps)


async def test_a_passed_socket_made_blocking_again_does_not_stall_the_proxy(proxy: Proxy) -> None:
    """A passed socket shares its file status flags with the sandbox's copy: the sandbox
    clears O_NONBLOCK after the proxy set it and reads nothing of a 16 MiB answer. Every
    read and write of the proxy's on it is MSG_DONTWAIT, so its loop still serves
    another client meanwhile (a blocking send would wait for the reader, and the other
    client would time out), and the answer is whole once read."""
    size = 16 << 20
    with http_server() as port:
        ep = await proxy.open(f"127.0.0.1:{port}")

        def get(size: int) -> bytes:
            return f"GET http://127.0.0.1:{port}/{size} HTTP/1.1\r\n\r\n".encode()

        def made_blocking() -> tuple[bytes, bytes]:
            with socket.create_server(("127.0.0.1", 0)) as listener:
                client = socket.create_connection(listener.getsockname())
                copy, _ = listener.accept()  # the sandbox's copy of the passed socket
            with client, copy, unix(ep.socket_path) as conn:
                socket.send_fds(conn, [PASSED], [copy.fileno()])
                until = time.monotonic() + 5
                while os.get_blocking(copy.fileno()) and time.monotonic() < until:
                    time.sleep(0.001)  # until the proxy has made it non-blocking
                os.set_blocking(copy.fileno(), True)  # for the proxy's copy too
                client.sendall(get(size))
                time.sleep(0.5)  # the proxy fills the client's buffers, then would block
                other = http_via(ep.socket_path, get(100))
                chunks = []
                while chunk := client.recv(1 << 20):
                    chunks.append(chunk)
                return b"".join(chunks), other

        answer, other = await in_thread(made_blocking)  # type: ignore[misc]
        events = await proxy.settled(2)
    assert other.startswith(b"HTTP/1.1 200 OK") and other.endswith(b"x" * 100)
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"x" * size)
    assert [(e.allowed, e.reason) for e in events] == [(True, None)] * 2
    assert sorted(e.bytes_down for e in events) == sorted((len(answer), len(other)))


async def test_no_call_in_flight_no_connection_and_shared_calls_are_all_named(proxy: Proxy) -> None:
    tags: list[CallTag] = []
    ep = await proxy.open("*", calls=lambda: tags)
    reply = await in_thread(http_via, ep.socket_path, b"CONNECT 1.1.1.1:443 HTTP/1.1\r\n\r\n")
    assert isinstance(reply, bytes) and b"X-Sandvisor-Refused: no_call" in reply
    tags[:] = [CallTag("a", "1"), CallTag("b", "2")]
    await in_thread(http_via, ep.socket_path, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
    assert [(e.reason, e.tool, e.call, e.also) for e in await proxy.settled(2)] == [
        ("no_call", None, None, ()),
        ("loopback", "a", "1", ("2",)),
    ]


async def test_a_slow_client_is_timed_out(proxy: Proxy) -> None:
    ep = await proxy.open("*")

    def slow() -> bytes:
        with unix(ep.socket_path) as sock:
            sock.sendall(b"CONNECT a.test:443 HT")
            return read_all(sock)

    reply = await in_thread(slow)
    assert isinstance(reply, bytes) and reply.startswith(b"HTTP/1.1 408 ")
    assert [e.reason for e in await proxy.settled(1)] == ["handshake_timeout"]


async def test_endpoints_are_private_unique_and_gone_when_closed(proxy: Proxy) -> None:
    one = await proxy.open("*")
    two = await proxy.open("*")
    assert one.directory != two.directory and one.socket_path != two.socket_path
    outer = os.path.dirname(one.directory)
    assert stat.S_IMODE(os.stat(outer).st_mode) == 0o700  # nobody else on the host gets in
    assert stat.S_ISSOCK(os.stat(one.socket_path).st_mode)
    with http_server() as port:
        ep = await proxy.open(f"127.0.0.1:{port}")

        def hold() -> bytes:
            with unix(ep.socket_path) as sock:
                sock.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
                sock.recv(100)
                return read_all(sock)  # ends when the endpoint closes

        async with anyio.create_task_group() as group:
            group.start_soon(in_thread, hold)
            await anyio.sleep(0.2)
            ep.close()
        assert not os.path.exists(os.path.dirname(ep.directory))
    one.close()
    assert not os.path.exists(outer)
    assert proxy.events[-1].reason == "closing" and proxy.events[-1].allowed


def test_the_proxy_runs_on_asyncio() -> None:
    events: list[NetEvent] = []

    async def main() -> bytes:
        async with anyio.create_task_group() as group:
            server = await group.start(ProxyServer(events.append).run)
            with http_server() as port:
                ep = await server.open(NetworkAllowlist([f"127.0.0.1:{port}"]))
                reply = await anyio.to_thread.run_sync(
                    http_via,
                    ep.socket_path,
                    f"GET http://127.0.0.1:{port}/3 HTTP/1.1\r\n\r\n".encode(),
                )
            group.cancel_scope.cancel()
        return reply

    reply = asyncio.run(main())
    assert reply.endswith(b"\r\n\r\nxxx")
    assert [e.allowed for e in events] == [True]
