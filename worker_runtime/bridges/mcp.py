"""``python -m worker_runtime.bridges.mcp [options] -- COMMAND [ARGS...]``: a worker whose
tools are those of a stdio MCP server it runs as its child, in the same sandbox.

The host keeps its authenticated protocol (fds 3 and 4) and its outcome rules; the bridge
translates: ``invoke`` -> ``tools/call``, ``cancel`` -> ``notifications/cancelled``,
``notifications/progress`` -> ``chunk``, the answer -> ``result`` or ``error``. A server
that answers a cancelled call with an error has acknowledged it; one that answers with a
result gets ``too_late``; one that does not answer is killed with its sandbox by the
host's watchdog once the grace is over (indeterminate, a fresh server next time). Anything
the server breaks (see `mcp_client`) ends the session: exit 2, one line on stderr.

One thread and one ``select`` loop: nothing to start per call, so a server that used up
the sandbox's processes cannot starve the bridge. Options:

``--describe``      start the server, list its tools, write them as one JSON line to fd 4
                    (``{"tools": [tool, ...]}``, spec section 6); then EOF on fd 3 ends
                    it (exit 0), and a bootstrap makes it the session it would have been
                    without the option (the supervisor's first: its server starts once)
``--prefix P``      tool ids are ``P`` + the server's name (e.g. ``fs.read-file``)
``--start-timeout S`` seconds for ``initialize`` and ``tools/list`` (default 10)
``--fd-in N --fd-out M`` the protocol fds (default 3 and 4)

Exit status: 0 after ``close``; 2 after a violation by the host or the server, or the
server's exit; 3 when the session never started (no answer to ``initialize`` in time, the
server exited first, bad arguments): one line on stderr says why, with the last lines of
the server's stderr.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

import msgspec

from .. import __version__
from ..protocol.bootstrap import read_bootstrap
from ..protocol.errors import BootstrapError, ProtocolError, Refused
from ..protocol.framing import LineReader
from ..protocol.keys import derive_keys
from ..protocol.messages import ToolSpec
from ..protocol.worker import (
    CancelReceived,
    CloseReceived,
    InvokeReceived,
    Opened,
    PingReceived,
    ReconcileReceived,
    WorkerConnection,
    WorkerEvent,
)
from .mcp_child import Server, StartError, hop, kill_server, start_server
from .mcp_client import (
    MAX_MESSAGE_BYTES,
    CallEnded,
    Event,
    Initialized,
    Log,
    McpClient,
    McpViolation,
    Progress,
    Tool,
    ToolsChanged,
    ToolsListed,
    sanitise,
)

EXIT_CLOSED = 0
EXIT_VIOLATION = 2
EXIT_BOOTSTRAP = 3
IMPL = "sandvisor-mcp-bridge"
READ_CHUNK = 65536
#: Bytes of the server's stderr forwarded to ours (diagnostics); the rest is counted.
FORWARD_STDERR = 256 * 1024
#: Lines of the server's stderr quoted when it fails to start.
TAIL_LINES = 3
#: Written on the bridge's own stdout when the server sends ``tools/list_changed``: the
#: host re-describes the server (`supervisor.workers.mcp_worker`). Only the bridge writes
#: its stdout (the server's stdout is the bridge's pipe, its stderr is forwarded to fd 2),
#: so the server cannot forge the notice, only send the notification itself.
TOOLS_CHANGED_NOTICE = b"sandvisor-mcp-bridge: tools/list_changed\n"
USAGE = (
    "usage: python -m worker_runtime.bridges.mcp [--describe] [--prefix P] "
    "[--start-timeout S] [--fd-in N --fd-out M] -- COMMAND [ARGS...]"
)


class UsageError(Exception):
    pass


class StartFailed(Exception):
    """The server never became usable; the message is the one line to print."""


class Options(msgspec.Struct):
    argv: list[str]
    describe: bool = False
    prefix: str = ""
    start_timeout: float = 10.0
    fd_in: int = 3
    fd_out: int = 4


def parse_args(args: Sequence[str]) -> Options:
    if "--" not in args:
        raise UsageError("the server's command comes after --")
    split = list(args).index("--")
    head, argv = list(args[:split]), list(args[split + 1 :])
    if not argv:
        raise UsageError("no server command after --")
    opts = Options(argv)
    it = iter(head)
    for arg in it:
        if arg == "--describe":
            opts.describe = True
            continue
        value = next(it, None)
        if arg not in ("--prefix", "--start-timeout", "--fd-in", "--fd-out") or value is None:
            raise UsageError(f"unknown argument or missing value: {arg!r}")
        if arg == "--prefix":
            opts.prefix = value
        elif arg == "--start-timeout":
            try:
                opts.start_timeout = float(value)
            except ValueError:
                raise UsageError("--start-timeout takes seconds") from None
        elif value.isdigit() and int(value) > 2:
            setattr(opts, arg[2:].replace("-", "_"), int(value))
        else:
            raise UsageError(f"{arg} must be a file descriptor number above 2")
    return opts


class _Tail:
    """The server's stderr: forwarded (bounded) once started, its last lines kept."""

    def __init__(self) -> None:
        self.held = bytearray()  # until the server is up: quoted if it fails
        self.forwarding = False
        self.forwarded = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        if not self.forwarding:
            self.held += data
            del self.held[: max(0, len(self.held) - 16384)]
            return
        room = FORWARD_STDERR - self.forwarded
        if room > 0:
            _write_all(2, data[:room])
            self.forwarded += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def start_forwarding(self) -> None:
        self.forwarding = True
        held, self.held = bytes(self.held), bytearray()
        if held:
            self.feed(held)

    def last_lines(self) -> str:
        lines = [sanitise(x, 300) for x in self.held.decode(errors="replace").splitlines()]
        lines = [x for x in lines if x.strip()][-TAIL_LINES:]
        return " | ".join(lines)


class Bridge:
    """One session: the server, the host's protocol, and the loop between them."""

    def __init__(self, opts: Options, server: Server) -> None:
        self.opts = opts
        self.client = McpClient("sandvisor", __version__, prefix=opts.prefix)
        self.tail = _Tail()
        self.selector = selectors.DefaultSelector()
        self.to_server = bytearray()
        self.server_lines = LineReader(MAX_MESSAGE_BYTES)
        self.host_lines = LineReader()
        self.tools: list[Tool] = []
        self.host_read = b""  # read from fd 3 ahead of the bootstrap (`host_stays`)
        self.aliases: dict[str, str] = {}  # tool id -> the server's name
        self.conn: WorkerConnection | None = None
        self.proc = server
        self.fd_stdin = server.stdin
        self.fd_stdout = server.stdout
        self.fd_stderr = server.stderr
        self.selector.register(self.fd_stdout, selectors.EVENT_READ)
        self.selector.register(self.fd_stderr, selectors.EVENT_READ)

    # -- start-up ----------------------------------------------------------------------

    def start(self) -> None:
        """``initialize`` and ``tools/list`` within the start-up bound, or `StartFailed`."""
        self._to_server(self.client.start())
        until = time.monotonic() + self.opts.start_timeout
        while not self.client.ready:
            left = until - time.monotonic()
            if left <= 0:
                raise StartFailed(
                    f"did not answer initialize and tools/list within {self.opts.start_timeout:g} s"
                )
            self._poll(left, starting=True)
        hop("listed")
        self.tail.start_forwarding()

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                t.id, "json", True, t.description, t.schema, None if t.name == t.id else t.name
            )
            for t in self.tools
        ]

    # -- the loop ----------------------------------------------------------------------

    def serve(self) -> NoReturn:
        boot = read_bootstrap(self._read_exact)
        hop("bootstrap")
        self.conn = WorkerConnection(
            boot.session_id, derive_keys(boot.session_key), {s.name: s for s in self.specs()}
        )
        self.selector.register(self.opts.fd_in, selectors.EVENT_READ)
        while True:
            self._poll(None, starting=False)

    def _poll(self, timeout: float | None, *, starting: bool) -> None:
        events = self.selector.select(timeout)
        for key, mask in events:
            fd = int(key.fd)
            if mask & selectors.EVENT_WRITE and fd == self.fd_stdin:
                self._flush_server()
            if not mask & selectors.EVENT_READ:
                continue
            if fd == self.fd_stdout:
                self._from_server(starting)
            elif fd == self.fd_stderr:
                self._from_stderr()
            elif fd == self.opts.fd_in:
                self._from_host()

    def _from_server(self, starting: bool) -> None:
        try:
            data = os.read(self.fd_stdout, READ_CHUNK)
        except BlockingIOError:
            return
        if not data:
            self._server_gone(starting)
        try:
            self.server_lines.feed(data)
            while (line := self.server_lines.next_line()) is not None:
                events, answer = self.client.receive(line)
                if answer:
                    self._to_server(answer)
                for event in events:
                    self._on_server_event(event)
        except ProtocolError as exc:  # the line reader's cap
            self._fail_server(f"a message over {MAX_MESSAGE_BYTES} bytes ({exc})", starting)
        except McpViolation as exc:
            self._fail_server(str(exc), starting)

    def _from_stderr(self) -> None:
        try:
            data = os.read(self.fd_stderr, READ_CHUNK)
        except BlockingIOError:
            return
        if data:
            self.tail.feed(data)
        else:
            self.selector.unregister(self.fd_stderr)

    def _from_host(self) -> None:
        conn = self.conn
        assert conn is not None
        try:
            data = os.read(self.opts.fd_in, READ_CHUNK)
            if not data:
                self.host_lines.feed_eof()
            else:
                self.host_lines.feed(data)
            while (line := self.host_lines.next_line()) is not None:
                self._on_host_event(conn, conn.receive(line))
            if not data:
                conn.receive_eof()
        except ProtocolError as exc:
            die(f"protocol violation by the host ({exc.code}): {exc}", self.proc)
        except BlockingIOError:
            return

    # -- host -> server ----------------------------------------------------------------

    def _on_host_event(self, conn: WorkerConnection, event: WorkerEvent) -> None:
        kind = type(event)
        if kind is InvokeReceived:
            assert isinstance(event, InvokeReceived)
            name = self.aliases[event.tool]
            self._to_server(self.client.call(event.rid, name, event.value))
        elif kind is CancelReceived:
            assert isinstance(event, CancelReceived)
            if event.finished:
                self._to_host(conn.too_late(event.cid))
            else:
                self._to_server(self.client.cancel(event.rid, "cancelled by the host"))
        elif kind is Opened:
            self._to_host(conn.ready(IMPL, __version__))
            hop("ready_sent")
        elif kind is PingReceived:
            assert isinstance(event, PingReceived)
            self._to_host(conn.pong(event.nonce))
        elif kind is ReconcileReceived:
            assert isinstance(event, ReconcileReceived)
            self._to_host(conn.reconciled(event.rid))
        elif kind is CloseReceived:
            kill_server(self.proc)
            os._exit(EXIT_CLOSED)

    # -- server -> host ----------------------------------------------------------------

    def _on_server_event(self, event: Event) -> None:
        if isinstance(event, ToolsListed):
            if self.conn is None:
                self.tools = event.tools
                self.aliases = {t.id: t.name for t in event.tools}
            return
        if isinstance(event, Log):
            if self.tail.forwarding:
                self.tail.feed(f"[mcp server] {event.text}\n".encode())
            return
        if isinstance(event, ToolsChanged):
            if self.conn is not None:  # before the session the listing is still to come
                self.tail.feed(b"[mcp bridge] the server's tools changed\n")
                with _suppress():
                    _write_all(1, TOOLS_CHANGED_NOTICE)
            return
        if isinstance(event, Initialized):
            hop("initialized")
            return
        conn = self.conn
        if conn is None:  # a call's event before the session: impossible, we made none
            return
        if isinstance(event, Progress):
            line = conn.chunk(event.rid, event.text)
            if line is not None:
                self._to_host(line)
        elif isinstance(event, CallEnded):
            self._to_host(self._terminal(conn, event))

    def _terminal(self, conn: WorkerConnection, end: CallEnded) -> bytes:
        call = conn.call(end.rid)
        if call is None:  # not in flight on our side: the client refused unknown ids
            raise McpViolation(f"an answer for {end.rid!r}, which is not in flight")
        if end.kind == "rpc_error" and call.cid is not None:
            return conn.acknowledge(end.rid)  # it stopped: the error is its acknowledgement
        if end.kind == "result":
            try:
                return conn.result(end.rid, end.value)
            except Refused as exc:
                return conn.error(end.rid, exc.code, str(exc))
        if end.kind == "tool_error":
            return conn.error(end.rid, "tool_error", end.message)
        code = "invalid_input" if end.code == -32602 else "mcp_error"
        return conn.error(end.rid, code, f"{end.message} (MCP error {end.code})")

    # -- bytes ---------------------------------------------------------------------------

    def _to_server(self, data: bytes) -> None:
        if not data:
            return
        was_empty = not self.to_server
        self.to_server += data
        if was_empty:
            self._flush_server()

    def _flush_server(self) -> None:
        try:
            written = os.write(self.fd_stdin, self.to_server)
        except BlockingIOError:
            written = 0
        except OSError as exc:  # the server closed its stdin: it is going
            self._fail_server(f"its stdin closed ({exc.strerror})", not self.client.ready)
        del self.to_server[:written]
        registered = self.fd_stdin in self.selector.get_map()
        if self.to_server and not registered:
            self.selector.register(self.fd_stdin, selectors.EVENT_WRITE)
        elif not self.to_server and registered:
            self.selector.unregister(self.fd_stdin)

    def _to_host(self, data: bytes) -> None:
        try:
            _write_all(self.opts.fd_out, data)
        except OSError as exc:
            die(f"writing to the host failed: {exc}", self.proc)

    def host_stays(self) -> bool:
        """After ``--describe``: whether the host goes on to a session (a bootstrap comes on
        fd 3) rather than closing it (EOF: it only wanted the tools)."""
        self.host_read = os.read(self.opts.fd_in, 1)
        return bool(self.host_read)

    def _read_exact(self, n: int) -> bytes:
        out, self.host_read = self.host_read[:n], self.host_read[n:]
        while len(out) < n:
            chunk = os.read(self.opts.fd_in, n - len(out))
            if not chunk:
                break
            out += chunk
        return out

    # -- ends ----------------------------------------------------------------------------

    def _server_gone(self, starting: bool) -> NoReturn:
        code = self.proc.wait(1.0)
        self._drain_stderr()
        how = "closed its stdout" if code is None else f"exited with status {code}"
        if starting:
            raise StartFailed(f"{how} before answering initialize and tools/list")
        die(f"the MCP server {how}", self.proc)

    def _fail_server(self, why: str, starting: bool) -> NoReturn:
        if starting:
            raise StartFailed(f"broke the MCP protocol: {why}")
        die(f"the MCP server broke the protocol: {why}", self.proc)

    def _drain_stderr(self) -> None:
        end = time.monotonic() + 0.2
        while time.monotonic() < end and self.fd_stderr in self.selector.get_map():
            if self.selector.select(0.05):
                self._from_stderr()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            selectors.DefaultSelector().select(0.01)


def die(why: str, proc: Server) -> NoReturn:
    """A fatal end of the session: one line, the server killed, exit 2 at once."""
    with _suppress():
        os.write(2, f"sandvisor mcp bridge: {sanitise(why, 2000)}\n".encode())
    with _suppress():
        kill_server(proc)
    os._exit(EXIT_VIOLATION)


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


def main(args: Sequence[str], server: Server | None = None) -> int:
    """The bridge; ``server``: already started by `mcp_boot` (with the bridge guarded)."""
    try:
        opts = parse_args(args)
    except UsageError as exc:
        if server is not None:
            kill_server(server)
        print(f"sandvisor mcp bridge: {exc}\n{USAGE}", file=sys.stderr)
        return EXIT_BOOTSTRAP
    if server is None:
        try:
            server = start_server(opts.argv)
        except StartError as exc:
            print(f"sandvisor mcp bridge: {exc}", file=sys.stderr)
            return EXIT_BOOTSTRAP
    bridge = Bridge(opts, server)
    try:
        bridge.start()
    except StartFailed as exc:
        tail = bridge.tail.last_lines()
        kill_server(bridge.proc)
        quoted = f"; its stderr ends: {tail}" if tail else "; it wrote nothing on stderr"
        print(f"sandvisor mcp bridge: the MCP server {opts.argv[0]!r} {exc}{quoted}",
              file=sys.stderr)  # fmt: skip
        return EXIT_BOOTSTRAP
    try:
        if opts.describe:
            tools = [msgspec.to_builtins(spec) for spec in bridge.specs()]
            try:
                _write_all(opts.fd_out, msgspec.json.encode({"tools": tools}) + b"\n")
            except OSError as exc:
                kill_server(bridge.proc)
                print(f"sandvisor mcp bridge: cannot write the description: {exc}",
                      file=sys.stderr)  # fmt: skip
                return EXIT_BOOTSTRAP
            if not bridge.host_stays():
                kill_server(bridge.proc)
                return 0
        bridge.serve()
    except (BootstrapError, OSError) as exc:
        kill_server(bridge.proc)
        print(f"sandvisor mcp bridge: bad bootstrap: {exc}", file=sys.stderr)
        return EXIT_BOOTSTRAP


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
