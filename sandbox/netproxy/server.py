"""The proxy in the host: one Unix socket per sandbox, served by tasks that move bytes.

`ProxyServer.run` holds a task group; `ProxyServer.open` makes an `Endpoint` for one
sandbox: a fresh directory (inside a ``0700`` one of the host's, so nothing else on the
host can reach it) holding ``proxy.sock``, which the launch binds into the sandbox. Each
connection the sandbox makes to it gets a task: the `Handshake` says what the client
wants, the endpoint's `Gate` and call meters decide, the proxy resolves names itself and
connects only to the addresses the gate kept, then two pumps move bytes until either
side ends or the call's byte cap is reached. Every connection ends in one `NetEvent`.

Closing an endpoint (or the server) ends its connections and removes its socket and
directories at once. Works on trio and asyncio (anyio).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.lowlevel

from .allowlist import IPAddress
from .events import NetEvent
from .gate import CallMeter, Connect, Refused, Resolve
from .handshake import Failed, Handshake, NeedData, Target
from .policy import NetworkAllowlist

log = logging.getLogger(__name__)

SOCKET_NAME = "proxy.sock"
READ_BYTES = 256 * 1024
SEND_BUFFER = 1024 * 1024
#: A pump that never has to wait lets the loop run others after this many bytes (a
#: turn per 256 KiB read cost a sixth of the pump's time for nothing when alone).
YIELD_BYTES = 1024 * 1024
HANDSHAKE_TIMEOUT = 10.0
RESOLVE_TIMEOUT = 5.0
CONNECT_TIMEOUT = 10.0
#: Connections one sandbox may hold open at once (each costs the host two fds).
MAX_OPEN = 128


@dataclass(frozen=True, slots=True)
class CallTag:
    """The call a connection is charged to: its tool and an id its owner chooses."""

    tool: str | None
    call: str | None


CallsInFlight = Callable[[], Sequence[CallTag]]
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
EventSink = Callable[[NetEvent], None]

#: For a sandbox without calls (``sandvisor exec``): the whole run is one call.
THE_RUN = (CallTag(None, None),)


async def resolve(name: str, port: int) -> list[IPAddress]:
    """The host's resolver: every address of ``name`` for TCP, in its order."""
    infos = await anyio.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(info[4][0]) for info in infos]


class Endpoint:
    """One sandbox's way to the proxy. ``directory`` is what the launch binds (read-only:
    a socket on a read-only mount can still be connected to)."""

    def __init__(
        self,
        server: ProxyServer,
        network: NetworkAllowlist,
        outer: str,
        *,
        group: str | None,
        sandbox: str | None,
        calls: CallsInFlight | None,
    ) -> None:
        self.network = network
        self.gate = network.gate
        self.group = group
        self.sandbox = sandbox
        self.calls: CallsInFlight = calls if calls is not None else (lambda: THE_RUN)
        self._server = server
        self._outer = outer
        self.directory = os.path.join(outer, "s")
        self.socket_path = os.path.join(self.directory, SOCKET_NAME)
        self._meters: dict[CallTag, CallMeter] = {}
        self._scope = anyio.CancelScope()
        self.open_connections = 0
        self.closed = False

    def attach(self, *, sandbox: str | None, calls: CallsInFlight) -> None:
        """Name the sandbox and say where its calls in flight are read (once spawned)."""
        self.sandbox = sandbox
        self.calls = calls

    def meters_for(self, tags: Sequence[CallTag]) -> list[CallMeter]:
        """The meters of these calls (made on first use; those of calls no longer in
        flight are forgotten, their open connections keep theirs)."""
        meters = self._meters
        if len(meters) > len(tags) + 16:
            for tag in [t for t in meters if t not in tags]:
                del meters[tag]
        caps = self.network.caps
        found = []
        for tag in tags:
            meter = meters.get(tag)
            if meter is None:
                meter = meters[tag] = CallMeter(caps)
            found.append(meter)
        return found

    def close(self) -> None:
        """End every connection and remove the socket and its directories, now."""
        if self.closed:
            return
        self.closed = True
        self._scope.cancel()
        shutil.rmtree(self._outer, ignore_errors=True)
        self._server._endpoints.discard(self)


class ProxyServer:
    """Endpoints for sandboxes, served in the task group of `run`."""

    def __init__(
        self,
        on_event: EventSink | None = None,
        *,
        resolver: Resolver = resolve,
        base_dir: str | None = None,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        resolve_timeout: float = RESOLVE_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.on_event = on_event
        self._resolver = resolver
        self._base_dir = base_dir
        self.handshake_timeout = handshake_timeout
        self.resolve_timeout = resolve_timeout
        self.connect_timeout = connect_timeout
        self._group: anyio.abc.TaskGroup | None = None
        self._endpoints: set[Endpoint] = set()
        self._buffers = _Buffers()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[ProxyServer] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until cancelled; every endpoint is closed on the way out."""
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                task_status.started(self)
                await anyio.sleep_forever()
        finally:
            self._group = None
            for endpoint in list(self._endpoints):
                endpoint.close()

    async def open(
        self,
        network: NetworkAllowlist,
        *,
        group: str | None = None,
        sandbox: str | None = None,
        calls: CallsInFlight | None = None,
    ) -> Endpoint:
        """A new endpoint, listening: its socket exists when this returns."""
        if self._group is None:
            raise RuntimeError("the proxy server is not running")
        outer = tempfile.mkdtemp(prefix=f"sandvisor-net-{os.getpid()}-", dir=self._base_dir)
        endpoint = Endpoint(self, network, outer, group=group, sandbox=sandbox, calls=calls)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            os.mkdir(endpoint.directory, 0o755)
            os.chmod(endpoint.directory, 0o755)  # whatever the umask: the sandbox reads it
            listener.bind(endpoint.socket_path)
            os.chmod(endpoint.socket_path, 0o666)  # the sandbox's uid connects
            listener.listen(64)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            shutil.rmtree(outer, ignore_errors=True)
            raise
        self._endpoints.add(endpoint)
        self._group.start_soon(self._serve_endpoint, endpoint, listener)
        await anyio.lowlevel.checkpoint()
        return endpoint

    async def _serve_endpoint(self, endpoint: Endpoint, listener: socket.socket) -> None:
        try:
            with endpoint._scope:
                async with anyio.create_task_group() as connections:
                    while True:
                        try:
                            client, _ = listener.accept()
                        except BlockingIOError:
                            await anyio.wait_readable(listener)
                            continue
                        except OSError as exc:
                            if exc.errno in (
                                errno.EMFILE,
                                errno.ENFILE,
                                errno.ENOBUFS,
                                errno.ENOMEM,
                            ):
                                log.warning("proxy: cannot accept: %s", exc)
                                await anyio.sleep(0.05)
                                continue
                            raise
                        if endpoint.open_connections >= MAX_OPEN:
                            client.close()
                            self._emit(endpoint, _Record(time.monotonic()), *_cap_reached())
                            continue
                        client.setblocking(False)
                        _grow_send_buffer(client)
                        endpoint.open_connections += 1  # now: the next accept may not wait
                        connections.start_soon(self._serve, endpoint, client, connections)
        finally:
            listener.close()
            endpoint.close()

    async def _serve(
        self,
        endpoint: Endpoint,
        client: socket.socket,
        connections: anyio.abc.TaskGroup,
        passed: bool = False,
    ) -> None:
        """One connection, counted in ``open_connections`` by whoever started this;
        ``passed``: a client's socket the forwarder passed (`_carry`)."""
        record = _Record(time.monotonic())
        upstream: socket.socket | None = None
        try:
            handshake = Handshake()
            step, client = await self._read_target(endpoint, handshake, client, connections, passed)
            if isinstance(step, Failed):
                await _send_quietly(client, step.reply)
                return self._emit(endpoint, record, step.reason, step.detail)
            record.protocol, record.host, record.port = step.protocol, step.host, step.port
            tags = endpoint.calls()
            record.tags = tuple(tags)
            refusal, meters = self._admit(endpoint, tags)
            addresses: Sequence[IPAddress] = ()
            if refusal is None:
                decision = endpoint.gate.target(step.host, step.port)
                if isinstance(decision, Resolve):
                    decision = await self._resolve(endpoint, decision.name, step.port)
                if isinstance(decision, Refused):
                    refusal = decision
                else:
                    addresses = decision.addresses
            if refusal is None:
                upstream, refusal = await self._connect(addresses, step.port, record)
            if refusal is not None or upstream is None:
                assert refusal is not None
                await _send_quietly(client, handshake.refuse(refusal.reason, refusal.detail))
                return self._emit(endpoint, record, refusal.reason, refusal.detail)
            to_client, to_server = handshake.accept()
            record.allowed = True
            await _send_all(client, to_client)
            if to_server:
                if not _charge(meters, len(to_server)):
                    return self._emit(endpoint, record, "byte_cap", "the call's byte limit")
                record.bytes_up += len(to_server)
                await _send_all(upstream, to_server)
            cut = await _relay(client, upstream, meters, record, self._buffers)
            self._emit(endpoint, record, cut, "the call's byte limit" if cut else None)
        except anyio.get_cancelled_exc_class():
            self._emit(endpoint, record, "closing", "the sandbox's proxy was closed")
            raise
        except OSError as exc:  # the client went away mid-way, or the server did
            self._emit(endpoint, record, "aborted", f"{type(exc).__name__}: {exc}")
        finally:
            endpoint.open_connections -= 1
            client.close()
            if upstream is not None:
                upstream.close()

    async def _read_target(
        self,
        endpoint: Endpoint,
        handshake: Handshake,
        client: socket.socket,
        connections: anyio.abc.TaskGroup,
        passed: bool,
    ) -> tuple[Target | Failed, socket.socket]:
        """The target, and the socket to serve: the connection itself, or the client's
        own socket if the sandbox's forwarder passed it (see `_first_message`; the
        forwarder's connection then carries its next clients, `_carry`). A socket
        passed already is a TCP client's: its first bytes are only bytes."""
        with anyio.move_on_after(self.handshake_timeout):
            if passed:
                data = await _recv(client)
            else:
                data, passed_socket, refused = await _first_message(client)
                if refused is not None:
                    return refused, client
                if passed_socket is not None:  # the connection goes to `_carry` (detached)
                    carrier = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, client.detach())
                    endpoint.open_connections += 1
                    connections.start_soon(self._carry, endpoint, carrier, connections)
                    client = passed_socket
                    try:
                        data = await _recv(client)
                    except BaseException:
                        passed_socket.close()
                        raise
            step = handshake.receive(data)
            while isinstance(step, NeedData):
                if step.reply:
                    await _send_all(client, step.reply)
                data = await _recv(client)
                step = handshake.receive(data)
            return step, client
        return handshake.time_out(), client

    async def _carry(
        self, endpoint: Endpoint, conn: socket.socket, connections: anyio.abc.TaskGroup
    ) -> None:
        """The forwarder's connection after its first client: each further message passes
        one more client socket, served like the first; anything else ends it. One
        connection for all of a sandbox's clients: no connect and accept per client.
        Each client is counted in ``open_connections`` before the next message is read
        (queued messages are read without a wait)."""
        try:
            while True:
                data, fds = await _recv_fds(conn, 1)  # one message: one byte, one socket
                if not data and not fds:
                    return
                passed = _passed_socket(data, fds)
                if passed is None:
                    return self._emit(endpoint, _Record(time.monotonic()), *_PASSED_WRONG)
                if endpoint.open_connections >= MAX_OPEN:
                    passed.close()
                    self._emit(endpoint, _Record(time.monotonic()), *_cap_reached())
                    continue
                endpoint.open_connections += 1
                connections.start_soon(self._serve, endpoint, passed, connections, True)
        except OSError:  # the forwarder went away
            return
        finally:
            endpoint.open_connections -= 1
            conn.close()

    def _admit(
        self, endpoint: Endpoint, tags: Sequence[CallTag]
    ) -> tuple[Refused | None, list[CallMeter]]:
        if not tags:
            return Refused("no_call", "no call of this sandbox is running"), []
        meters = endpoint.meters_for(tags)
        for meter in meters:
            refusal = meter.admit()
            if refusal is not None:
                return refusal, meters
        for meter in meters:
            meter.opened()
        return None, meters

    async def _resolve(self, endpoint: Endpoint, name: str, port: int) -> Refused | Connect:
        found: list[IPAddress] = []
        with anyio.move_on_after(self.resolve_timeout):
            try:
                found = await self._resolver(name, port)
            except (OSError, UnicodeError) as exc:
                return Refused("dns_failed", f"{name}: {exc}")
            return endpoint.gate.addresses(name, port, found)
        return Refused("dns_failed", f"{name}: no answer in {self.resolve_timeout} s")

    async def _connect(
        self, addresses: Sequence[IPAddress], port: int, record: _Record
    ) -> tuple[socket.socket | None, Refused | None]:
        """The first address that answers. A near server's handshake is done at once
        (`_connected`): only a connect still under way waits, under a cancel scope with
        the whole connect's deadline (a scope entered per connection cost the proxy a
        tenth of its set-up's CPU for nothing)."""
        last = Refused("connect_failed", "no address to connect to")
        deadline = anyio.current_time() + self.connect_timeout
        for address in addresses:
            record.address = str(address)
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                code = _connected(sock, (str(address), port))
                if code in _CONNECTING:
                    with anyio.CancelScope(deadline=deadline):
                        await anyio.wait_writable(sock)
                        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if code in _CONNECTING:  # the deadline came first
                        sock.close()
                        return None, Refused(
                            "connect_timeout",
                            f"no answer from port {port} in {self.connect_timeout} s",
                        )
                if code == 0:
                    return sock, None
                last = Refused("connect_failed", f"{address} port {port}: {os.strerror(code)}")
            except BaseException:
                sock.close()
                raise
            sock.close()
        return None, last

    def _emit(
        self, endpoint: Endpoint, record: _Record, reason: str | None, detail: str | None
    ) -> None:
        if self.on_event is None:
            return
        tags = record.tags
        first = tags[0] if tags else CallTag(None, None)
        event = NetEvent(
            time=time.time(),
            group=endpoint.group,
            sandbox=endpoint.sandbox,
            tool=first.tool,
            call=first.call,
            also=tuple(t.call for t in tags[1:] if t.call is not None),
            protocol=record.protocol,
            host=record.host,
            port=record.port,
            address=record.address,
            allowed=record.allowed,
            reason=reason,
            detail=detail if reason is not None or not record.allowed else None,
            bytes_up=record.bytes_up,
            bytes_down=record.bytes_down,
            duration_ms=round((time.monotonic() - record.started) * 1000, 3),
        )
        try:
            self.on_event(event)
        except Exception:
            log.exception("proxy: the event sink failed")


class _Record:
    """What one connection's event will say, filled in as it goes."""

    __slots__ = (
        "address",
        "allowed",
        "bytes_down",
        "bytes_up",
        "host",
        "port",
        "protocol",
        "started",
        "tags",
    )

    def __init__(self, started: float) -> None:
        self.started = started
        self.protocol: str | None = None
        self.host: str | None = None
        self.port: int | None = None
        self.address: str | None = None
        self.allowed = False
        self.bytes_up = 0
        self.bytes_down = 0
        self.tags: tuple[CallTag, ...] = ()


#: Every read and write of a client's socket: a socket passed by the sandbox shares its
#: file status with the sandbox's copy, which could make it blocking again (and stall
#: the supervisor's loop) whatever ``setblocking(False)`` said.
_NOWAIT = socket.MSG_DONTWAIT
#: What the forwarder sends with the client's socket (no HTTP or SOCKS5 request starts so).
PASSED = b"\x00"


async def _first_message(
    conn: socket.socket,
) -> tuple[bytes, socket.socket | None, Failed | None]:
    """The connection's first bytes; or, from the sandbox's forwarder, ``PASSED`` with
    the socket its client connected on (``SCM_RIGHTS``): the proxy then serves that
    socket itself, and the forwarder copies nothing (one process less on every chunk's
    way). Only a TCP stream socket is taken; anything else is refused."""
    data, fds = await _recv_fds(conn, 65536)
    if not fds:
        return data, None, None
    passed = _passed_socket(data, fds)
    if passed is None:
        return b"", None, Failed(*_PASSED_WRONG, b"")
    return b"", passed, None


async def _recv_fds(conn: socket.socket, size: int) -> tuple[bytes, list[int]]:
    """Bytes and at most one passed fd (more are closed by the kernel); nothing at the end."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(conn, size, 1, _NOWAIT)
        except BlockingIOError:
            await anyio.wait_readable(conn)
            continue
        except ConnectionResetError:
            return b"", []
        return data, fds


#: A message of the forwarder's that does not pass one TCP socket.
_PASSED_WRONG = ("bad_request", "the sandbox passed something else than its client's TCP socket")


def _cap_reached() -> tuple[str, str]:
    return "connection_cap", f"{MAX_OPEN} connections of this sandbox are open"


def _passed_socket(data: bytes, fds: list[int]) -> socket.socket | None:
    """The client's socket the forwarder passed, ready to serve; None (and every fd
    closed) if the message is anything else."""
    passed = _tcp_socket(fds[0]) if fds else None
    for fd in fds[1:]:
        os.close(fd)
    if passed is None or data != PASSED:
        if passed is not None:
            passed.close()
        return None
    passed.setblocking(False)
    with contextlib.suppress(OSError):  # Nagle would hold an answer's last segment
        passed.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return passed


_CONNECTING = (errno.EINPROGRESS, errno.EALREADY)


def _connected(sock: socket.socket, address: tuple[str, int]) -> int:
    """Start a non-blocking connect; 0 if it is already done. A local server's handshake
    runs within the first call, which still says EINPROGRESS: asking again says 0
    (connected), the error, or EALREADY, and saves a turn of the loop (about 0.3 ms)
    for every connection to a near server."""
    code = sock.connect_ex(address)
    if code == errno.EINPROGRESS:
        code = sock.connect_ex(address)
        if code == errno.EISCONN:
            code = 0
    return code


def _tcp_socket(fd: int) -> socket.socket | None:
    """``fd`` as a socket if it is a TCP stream socket; otherwise closed, and None."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:  # not a socket at all
        os.close(fd)
        return None
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        return sock
    sock.close()
    return None


def _grow_send_buffer(sock: socket.socket) -> None:
    """A Unix socket's send buffer (about 208 KiB by default) holds a fifth of a 1 MiB
    answer: each refill waits for the forwarder to read. The kernel doubles the size
    asked for, within ``net.core.wmem_max``."""
    with contextlib.suppress(OSError):  # a smaller buffer only costs wake-ups
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)


def _charge(meters: Sequence[CallMeter], size: int) -> bool:
    within = True
    for meter in meters:
        within = meter.charge(size) and within
    return within


async def _recv(sock: socket.socket, size: int = 65536) -> bytes:
    while True:
        try:
            return sock.recv(size, _NOWAIT)
        except BlockingIOError:
            await anyio.wait_readable(sock)
        except ConnectionResetError:
            return b""


async def _send_all(sock: socket.socket, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            sent = sock.send(view, _NOWAIT)
        except BlockingIOError:
            await anyio.wait_writable(sock)
            continue
        view = view[sent:]


async def _send_quietly(sock: socket.socket, data: bytes) -> None:
    """A refusal's reply: best effort (the client may be gone), and never for long."""
    if not data:
        return
    with anyio.move_on_after(1.0), contextlib.suppress(OSError):
        await _send_all(sock, data)


class _Buffers:
    """The pumps' read buffers, kept for the next connection (at most ``keep``: 2 MiB).
    A fresh 256 KiB buffer per pump was zeroed each time, and on the main thread glibc
    gave the block back to the system at each free: three ``brk`` calls and their page
    faults per connection, under load up to 0.3-0.8 ms for the two. One event loop uses
    them: no lock."""

    __slots__ = ("_free", "_keep")

    def __init__(self, keep: int = 8) -> None:
        self._free: list[bytearray] = []
        self._keep = keep

    def take(self) -> bytearray:
        return self._free.pop() if self._free else bytearray(READ_BYTES)

    def give(self, buffer: bytearray) -> None:
        if len(self._free) < self._keep:
            self._free.append(buffer)


async def _relay(
    client: socket.socket,
    upstream: socket.socket,
    meters: Sequence[CallMeter],
    record: _Record,
    buffers: _Buffers,
) -> str | None:
    """Move bytes both ways until both directions ended; "byte_cap" if the cap cut it.
    The download runs in this task, the upload in one task of the group (one task
    fewer to start per connection; the group still waits for both)."""
    cut: list[str] = []

    async def pump(src: socket.socket, dst: socket.socket, up: bool) -> None:
        buffer = buffers.take()
        view = memoryview(buffer)
        unyielded = 0  # bytes moved since this pump last let the loop run others
        try:
            while True:
                try:
                    size = src.recv_into(buffer, 0, _NOWAIT)
                except BlockingIOError:
                    unyielded = 0
                    await anyio.wait_readable(src)
                    continue
                if size == 0:
                    with contextlib.suppress(OSError):
                        dst.shutdown(socket.SHUT_WR)
                    return
                if not _charge(meters, size):
                    cut.append("byte_cap")
                    pumps.cancel_scope.cancel()
                    return
                if up:
                    record.bytes_up += size
                else:
                    record.bytes_down += size
                await _send_all(dst, view[:size])
                unyielded += size
                if unyielded >= YIELD_BYTES:
                    unyielded = 0
                    await anyio.lowlevel.checkpoint()
        except OSError:  # reset or broken: the whole connection ends
            pumps.cancel_scope.cancel()
        finally:
            buffers.give(buffer)

    async with anyio.create_task_group() as pumps:
        pumps.start_soon(pump, client, upstream, True)
        await pump(upstream, client, False)
    return cut[0] if cut else None
