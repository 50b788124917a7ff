"""One client of `sandvisor serve`: read requests, run them, write events (trio).

The session owns three kinds of task, each in a nursery named here: the reader (reads
and dispatches request lines in order; waits while too much output is queued), the
writer (the only task that writes to the client), and, once ``hello`` succeeded, the
supervisor task, whose *calls nursery* holds one task per running ``invoke``, ``script``
or ``reconcile``. A bad request costs one ``error`` event, never the session.

Shutdown (a ``shutdown`` request, end of input, or the server stopping): stop reading,
cancel every running call cooperatively (each still reports its outcome), close the
supervisor (every worker), flush the events, then ``bye`` if it was asked for.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.netproxy.events import NetEvent
from sandbox.policy import SandboxPolicy
from supervisor._fdwrite import write_now
from supervisor.commands import serve_wire as wire
from supervisor.commands.scripted_bridge import add_sandboxed_tools
from supervisor.ledger import DeadlineElapsed, InvalidInput, LedgerError, UnknownTool
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.calls import CallHandle
from supervisor.workers.groups import ToolGroup
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import DuplicateOperation, Supervisor, SupervisorError
from worker_runtime import __version__

if TYPE_CHECKING:
    from supervisor.scripted import ScriptedTool

log = logging.getLogger(__name__)

#: Requests running at once per session (invokes, scripts, reconciles).
MAX_RUNNING = 1024
#: Queued output bytes above which the reader stops reading requests (back-pressure).
HIGH_WATER = 16 * 1024 * 1024
READ_SIZE = 65536


@dataclass
class ServeDefaults:
    """What a ``hello`` leaves out (from the command line)."""

    #: From ``--config``: the groups, which a hello may not change.
    groups: list[ToolGroup] | None = None
    adapters: list[str] = field(default_factory=list)
    pool_size: int = 2
    max_in_flight: int = 1
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    supervisor_options: dict[str, Any] = field(default_factory=dict)


class OutQueue:
    """Encoded event lines waiting for the writer; ``put`` never blocks.

    With ``fd`` (the client's non-blocking pipe or socket), a line put while nothing is
    queued or being written goes straight out with one ``os.write``: no wake-up of the
    writer task, which then only writes what the client was not ready to take. Lines
    still leave in order: ``put`` writes directly only when the queue is empty and the
    writer is not in the middle of a write."""

    def __init__(self, fd: int | None = None) -> None:
        self._lines: collections.deque[bytes] = collections.deque()
        self._fd = fd
        self._writing = False  # the writer holds lines taken and not yet written
        self.queued = 0
        self.closed = False
        self._wake = trio.Event()
        self._drained = trio.Event()

    def put(self, line: bytes) -> None:
        if self.closed:
            return
        if self._fd is not None and not self._writing and not self._lines:
            line = write_now(self._fd, line)
            if not line:
                return
        self._lines.append(line)
        self.queued += len(line)
        self._wake.set()

    def close(self) -> None:
        """No more lines; the writer ends once it has written what is queued."""
        self.closed = True
        self._wake.set()

    async def take(self) -> bytes | None:
        """Everything queued, as one write; None once closed and empty. (The writer
        calls it again only once the last write is done.)"""
        self._writing = False
        while not self._lines:
            if self.closed:
                return None
            await self._wake.wait()
            self._wake = trio.Event()
        data = b"".join(self._lines)
        self._lines.clear()
        self._writing = True
        self.queued = 0
        self._drained.set()
        self._drained = trio.Event()
        return data

    async def below(self, limit: int) -> None:
        while self.queued > limit and not self.closed:
            await self._drained.wait()


class _Capture:
    """The audit event of the call the current task is running (see `_invoke`)."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event: CallEvent | None = None


_CAPTURE: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar(
    "sandvisor_serve_capture", default=None
)


def _capture_audit(event: CallEvent) -> None:
    """An audit callback: hand the event to the invoke running in this task, if any."""
    capture = _CAPTURE.get()
    if capture is not None and capture.event is None:
        capture.event = event


def outcome_of_event(event: CallEvent, sup: Supervisor) -> Outcome:
    """The `Outcome` of a call whose ``invoke`` was cancelled, from its audit event (and
    its value from the ledger, if it completed after all). ``error`` is the event's
    (at most 256 characters); ``retryable`` is not recorded there and reads False."""
    value = None
    if event.status == "completed" and event.op_id is not None:
        with contextlib.suppress(LedgerError):
            ledger_outcome = sup.ledger.outcome(event.op_id)
            value = getattr(ledger_outcome, "value", None)
    return Outcome(
        status=event.status, tool=event.tool, value=value, error=event.error,
        error_code=event.error_code, kill_reason=event.kill_reason,
        termination=event.termination, op_id=event.op_id, session_id=event.session_id,
        rid=event.rid, attempt=event.attempt, idempotency_key=event.idempotency_key,
        chunks=event.chunks, bytes_in=event.bytes_in, bytes_out=event.bytes_out,
        queued_s=event.queued_ms / 1000, run_s=event.run_ms / 1000,
        total_s=event.total_ms / 1000, peak_memory=event.peak_memory,
    )  # fmt: skip


class _Running:
    """A request in progress that ``cancel`` can reach: it runs in ``scope``, or (an
    invoke that reported ``started``) in the supervisor, through ``handle``."""

    __slots__ = ("calls", "handle", "scope")

    def __init__(self, calls: trio.Nursery) -> None:
        self.calls = calls
        self.handle: CallHandle | None = None
        self.scope = trio.CancelScope()

    def cancel(self) -> None:
        """Cancel cooperatively; the request still reports how it ended."""
        self.scope.cancel()
        if self.handle is not None and not self.handle.done:
            self.calls.start_soon(self.handle.cancel)


class ServeSession:
    """The requests of one client (see the module docstring)."""

    def __init__(self, defaults: ServeDefaults, out: OutQueue) -> None:
        self.defaults = defaults
        self.out = out
        self.sup: Supervisor | None = None
        self.scripted: ScriptedTool | None = None
        self.shutting_down = False
        self.bye_for: Any = None
        self.bye_wanted = False
        self._calls: trio.Nursery | None = None
        self._stop = trio.Event()
        self._supervisor_done = trio.Event()
        self._read_scope = trio.CancelScope()
        self._running: dict[Any, _Running] = {}
        self._unsubscribe: Callable[[], None] | None = None

    # -- output ---------------------------------------------------------------------------

    def send(self, event: wire.Event) -> None:
        self.out.put(wire.encode_event(event))

    def error(self, request_id: Any, code: str, message: str) -> None:
        self.out.put(wire.error_event(request_id, code, message))

    # -- the reader -------------------------------------------------------------------------

    async def read_requests(self, source: trio.abc.ReceiveStream, nursery: trio.Nursery) -> None:
        """Read and dispatch lines until end of input, ``shutdown`` or `request_stop`."""
        with self._read_scope:
            await self._read(source, nursery)

    def request_stop(self) -> None:
        """Stop reading requests (the server is stopping); `close` does the rest."""
        self.shutting_down = True
        self._read_scope.cancel()

    async def _read(self, source: trio.abc.ReceiveStream, nursery: trio.Nursery) -> None:
        lines = wire.LineBuffer()
        while not self.shutting_down:
            await self.out.below(HIGH_WATER)
            try:
                data = await source.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                if lines.pending:
                    self.error(None, "bad_json", "the input ended inside a line")
                return
            for line in lines.feed(bytes(data)):
                if isinstance(line, wire.TooLong):
                    self.error(
                        None,
                        "line_too_long",
                        f"a request line is over {wire.MAX_LINE_BYTES} bytes; skipped",
                    )
                    continue
                if line.strip():
                    await self.handle_line(line, nursery)
                if self.shutting_down:
                    return

    async def handle_line(self, line: bytes, nursery: trio.Nursery) -> None:
        try:
            request = wire.decode_request(line)
        except wire.RequestError as exc:
            self.error(exc.request_id, exc.code, exc.message)
            return
        try:
            await self.dispatch(request, nursery)
        except wire.RequestError as exc:
            self.error(request.id, exc.code, exc.message)

    async def dispatch(self, request: wire.Request, nursery: trio.Nursery) -> None:
        if isinstance(request, wire.Ping):
            self.send(wire.Pong(id=request.id))
        elif isinstance(request, wire.Shutdown):
            self.shutting_down = True
            self.bye_wanted = True
            self.bye_for = request.id
        elif isinstance(request, wire.Hello):
            await self.hello(request, nursery)
        elif isinstance(request, wire.Cancel):
            self.cancel(request)
        else:
            sup = self._ready()
            if isinstance(request, wire.Audit):
                self.audit(sup, request.enable)
                self.send(wire.Ok(id=request.id))
            elif isinstance(request, wire.Pending):
                self.send(wire.PendingEvent(id=request.id, operations=list(sup.ledger.pending())))
            elif isinstance(request, wire.Invoke):
                self.start_invoke(sup, request)
            elif isinstance(request, wire.Script):
                self.start_script(request)
            elif isinstance(request, wire.Reconcile):
                self._spawn(request.id, self.reconcile, sup, request)

    def _ready(self) -> Supervisor:
        if self.sup is None:
            raise wire.RequestError("not_ready", "send hello first (it names the adapters)")
        return self.sup

    # -- hello --------------------------------------------------------------------------------

    async def hello(self, request: wire.Hello, nursery: trio.Nursery) -> None:
        if self.sup is not None:
            raise wire.RequestError("already_configured", "hello was already accepted")
        try:
            sup = make_supervisor(request, self.defaults)
            scripted = None
            if request.script is not None:
                from supervisor.commands.script_cgroup import service_script_pool
                from supervisor.scripted import ScriptedTool

                # each script runs in a child process: it cannot stall this loop
                scripted = ScriptedTool(request.script, isolation=service_script_pool())
        except (ValueError, SandboxError) as exc:
            raise wire.RequestError("bad_config", str(exc)) from None
        try:
            await nursery.start(self._run_supervisor, sup)
        except SandboxUnavailable as exc:
            raise wire.RequestError(
                "sandbox_unavailable", f"{exc} (run `sandvisor doctor`)"
            ) from None
        except ValueError as exc:  # an adapter module that cannot be found, a bad policy
            raise wire.RequestError("bad_config", str(exc)) from None
        except Exception as exc:
            raise wire.RequestError("start_failed", f"{type(exc).__name__}: {exc}") from None
        if scripted is not None:
            add_sandboxed_tools(scripted, sup.tools, sup.tool_callback, specs=sup.specs)
            self.scripted = scripted
            if scripted.isolation is not None:
                await scripted.isolation.warm()
        if request.audit:
            self.audit(sup, True)
        specs = sup.specs
        tools = [
            wire.ToolInfo(
                name=p.name, format=p.format, deadline=p.deadline,
                max_input_bytes=p.max_input_bytes, max_output_bytes=p.max_output_bytes,
                max_attempts=p.max_attempts, description=specs[p.name].description,
                schema=specs[p.name].schema,
            )
            for p in sorted(sup.tools.values(), key=lambda p: p.name)
        ]  # fmt: skip
        self.send(
            wire.Ready(id=request.id, version=__version__, tools=tools, script=request.script)
        )

    async def _run_supervisor(
        self, sup: Supervisor, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The supervisor task: the supervisor, and the calls nursery inside it."""
        try:
            async with sup, trio.open_nursery() as calls:
                sup.add_audit_callback(_capture_audit)
                self._calls = calls
                self.sup = sup
                task_status.started()
                await self._stop.wait()
                for running in list(self._running.values()):
                    running.cancel()  # cooperatively; each still reports its end
        finally:
            self._calls = None
            self._supervisor_done.set()

    # -- calls ---------------------------------------------------------------------------------

    def _admit(self, request_id: Any) -> _Running:
        if request_id is None:
            raise wire.RequestError("bad_request", "this request needs an id")
        if request_id in self._running:
            raise wire.RequestError("duplicate_id", f"request {request_id!r} is still running")
        if len(self._running) >= MAX_RUNNING:
            raise wire.RequestError("busy", f"{MAX_RUNNING} requests are running; wait")
        if self._calls is None or self._stop.is_set():
            raise wire.RequestError("shutting_down", "the service is shutting down")
        running = self._running[request_id] = _Running(self._calls)
        return running

    def _spawn(self, request_id: Any, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run ``fn(*args)`` as request ``request_id`` (cancellable by its scope)."""
        running = self._admit(request_id)

        async def run() -> None:
            try:
                with running.scope:
                    await fn(*args)
                if running.scope.cancelled_caught:
                    self.error(request_id, "cancelled", "cancelled before it finished")
            finally:
                self._running.pop(request_id, None)

        running.calls.start_soon(run)

    def start_invoke(self, sup: Supervisor, request: wire.Invoke) -> None:
        running = self._admit(request.id)
        run = self._invoke_started if request.started else self._invoke
        running.calls.start_soon(run, sup, request, running)

    def _chunks(self, request: wire.Invoke) -> Callable[[str], None] | None:
        if not request.stream:
            return None
        rid, index = request.id, 0

        def on_chunk(text: str) -> None:
            nonlocal index
            index += 1
            self.send(wire.ChunkEvent(id=rid, index=index, text=text))

        return on_chunk

    async def _invoke(self, sup: Supervisor, request: wire.Invoke, running: _Running) -> None:
        """``Supervisor.invoke`` in this task (the fast path). If ``cancel`` (or the end of
        the session) cancels it, the outcome comes from the call's audit event, which the
        supervisor emits in this very task as the call ends."""
        rid = request.id
        capture = _Capture()
        token = _CAPTURE.set(capture)
        try:
            with running.scope:
                outcome = await sup.invoke(
                    request.tool, request.input, deadline=request.deadline,
                    on_chunk=self._chunks(request), idempotency_key=request.idempotency_key,
                )  # fmt: skip
                self.send(wire.OutcomeEvent(id=rid, outcome=outcome))
                return
            if capture.event is None:  # cancelled before the ledger took it
                self.error(rid, "cancelled", "cancelled before it started")
            else:
                outcome = outcome_of_event(capture.event, sup)
                self.send(wire.OutcomeEvent(id=rid, outcome=outcome))
        except Exception as exc:
            code, message = refusal(exc)
            self.error(rid, code, message)
        finally:
            _CAPTURE.reset(token)
            self._running.pop(rid, None)

    async def _invoke_started(
        self, sup: Supervisor, request: wire.Invoke, running: _Running
    ) -> None:
        """The same through ``Supervisor.start``, to report ``started`` with the op_id."""
        rid = request.id
        try:
            try:
                handle = running.handle = await sup.start(
                    request.tool, request.input, deadline=request.deadline,
                    on_chunk=self._chunks(request), idempotency_key=request.idempotency_key,
                )  # fmt: skip
            except Exception as exc:
                code, message = refusal(exc)
                self.error(rid, code, message)
                return
            self.send(wire.Started(id=rid, op_id=handle.op_id))
            if running.scope.cancel_called:
                outcome = await handle.cancel()
            else:
                try:
                    outcome = await handle.outcome()
                except trio.Cancelled:  # shutting down: cancel it, and still report
                    with trio.CancelScope(shield=True):
                        self.send(wire.OutcomeEvent(id=rid, outcome=await handle.cancel()))
                    raise
            self.send(wire.OutcomeEvent(id=rid, outcome=outcome))
        finally:
            self._running.pop(rid, None)

    def start_script(self, request: wire.Script) -> None:
        scripted = self.scripted
        if scripted is None:
            raise wire.RequestError("not_configured", "hello did not ask for a script tool")
        self._spawn(request.id, self._script, scripted, request)

    async def _script(self, scripted: ScriptedTool, request: wire.Script) -> None:
        arguments: dict[str, Any] = {"commands": request.commands}
        if request.timeout_ms is not None:
            arguments["timeout_ms"] = request.timeout_ms
        result = await scripted.execute_request(arguments)
        self.send(wire.ResultEvent(id=request.id, result=wire.ScriptResult(
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code,
            error=result.error, stdout_truncated=result.stdout_truncated,
            stderr_truncated=result.stderr_truncated,
        )))  # fmt: skip

    async def reconcile(self, sup: Supervisor, request: wire.Reconcile) -> None:
        try:
            outcome = await sup.reconcile(request.op_id)
        except Exception as exc:  # unknown operation, no worker, ...
            self.error(request.id, "reconcile_failed", f"{type(exc).__name__}: {exc}")
            return
        described = None
        if outcome is not None:
            described = {"status": outcome.status, **msgspec.to_builtins(outcome)}
        self.send(
            wire.Reconciled(
                id=request.id, op_id=request.op_id, resolved=outcome is not None, outcome=described
            )
        )

    def cancel(self, request: wire.Cancel) -> None:
        running = self._running.get(request.target)
        if running is None:
            raise wire.RequestError("unknown_target", f"no request {request.target!r} is running")
        running.cancel()
        self.send(wire.Ok(id=request.id))

    # -- audit ----------------------------------------------------------------------------------

    def audit(self, sup: Supervisor, enable: bool) -> None:
        """Send (or stop sending) every call's audit event, and every connection a
        sandbox makes through the network proxy."""
        if enable and self._unsubscribe is None:
            calls = sup.add_audit_callback(self._on_audit)
            network = sup.add_network_callback(self._on_network)

            def unsubscribe() -> None:
                calls()
                network()

            self._unsubscribe = unsubscribe
        elif not enable and self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _on_audit(self, event: CallEvent) -> None:
        self.send(wire.AuditEvent(audit=event))

    def _on_network(self, event: NetEvent) -> None:
        self.send(wire.NetAuditEvent(net=event))

    # -- the end --------------------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel what runs (each reports), close the supervisor, say bye if asked."""
        self.shutting_down = True
        self._stop.set()
        if self.sup is not None:
            with trio.CancelScope(shield=True):
                await self._supervisor_done.wait()
        if self.bye_wanted:
            self.send(wire.Bye(id=self.bye_for))


def refusal(exc: BaseException) -> tuple[str, str]:
    """The error code and message for a call the supervisor refused to start."""
    if isinstance(exc, UnknownTool):
        return "unknown_tool", str(exc)
    if isinstance(exc, InvalidInput):
        return "invalid_input", str(exc)
    if isinstance(exc, DuplicateOperation):
        return "duplicate_operation", str(exc)
    if isinstance(exc, DeadlineElapsed):
        return "deadline", str(exc)
    if isinstance(exc, LedgerError | ValueError):
        return "refused", f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SupervisorError):
        return "unavailable", str(exc)
    return "internal", f"{type(exc).__name__}: {exc}"


def make_supervisor(hello: wire.Hello, defaults: ServeDefaults) -> Supervisor:
    """The `Supervisor` a ``hello`` asks for, over the command line's defaults."""
    options = dict(defaults.supervisor_options)
    if hello.cancel_grace is not None:
        options["cancel_grace"] = hello.cancel_grace
    if defaults.groups is not None:
        asked = [name for name in ("adapters", "policy", "pool_size", "max_in_flight")
                 if getattr(hello, name) is not None]  # fmt: skip
        if asked:
            raise ValueError(
                f"the server's --config names the groups; hello may not set {', '.join(asked)}"
            )
        return Supervisor(groups=defaults.groups, **options)
    adapters = hello.adapters if hello.adapters is not None else defaults.adapters
    if not adapters:
        raise ValueError('no adapters: hello needs "adapters": ["MODULE:ATTR", ...]')
    policy = defaults.policy
    if hello.policy is not None:
        changes = {
            k: v for k, v in msgspec.structs.asdict(hello.policy).items()
            if v is not msgspec.UNSET
        }  # fmt: skip
        policy = policy.replace(**_with_allowlist(changes))
    return Supervisor(
        adapters=adapters,
        policy=policy,
        pool_size=hello.pool_size or defaults.pool_size,
        max_in_flight=hello.max_in_flight or defaults.max_in_flight,
        **options,
    )


_ALLOWLIST_KEYS = {
    "network_max_connections": "max_connections",
    "network_max_bytes": "max_bytes",
    "network_hosts": "hosts",
}


def _with_allowlist(changes: dict[str, Any]) -> dict[str, Any]:
    """hello's ``policy`` as `SandboxPolicy` fields: a ``network`` list and its
    ``network_*`` options become one `NetworkAllowlist`."""
    options = {field: changes.pop(key) for key, field in _ALLOWLIST_KEYS.items() if key in changes}
    network = changes.get("network")
    if not isinstance(network, list):
        if options:
            given = ", ".join(k for k, f in _ALLOWLIST_KEYS.items() if f in options)
            raise ValueError(f'policy {given}: only with "network": ["HOST[:PORT]", ...]')
        return changes
    from sandbox.netproxy import NetworkAllowlist

    return {**changes, "network": NetworkAllowlist(tuple(network), **options)}


async def serve_stream(
    source: trio.abc.ReceiveStream,
    sink: trio.abc.SendStream,
    defaults: ServeDefaults,
    *,
    task_status: trio.TaskStatus[ServeSession] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one client over a pair of streams until it is done. `ServeSession.request_stop`
    (through ``task_status``) ends it in order: the running calls still report."""
    out = OutQueue(_fd_of(sink))
    session = ServeSession(defaults, out)
    async with trio.open_nursery() as writers:
        writers.start_soon(_write_events, out, sink)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(session)
                try:
                    await session.read_requests(source, nursery)
                finally:
                    with trio.CancelScope(shield=True):
                        await session.close()
        finally:
            out.close()


def _fd_of(sink: trio.abc.SendStream) -> int | None:
    """The fd under a pipe or socket stream (trio made it non-blocking), else None."""
    if isinstance(sink, trio.lowlevel.FdStream):
        return sink.fileno()
    if isinstance(sink, trio.SocketStream):
        return sink.socket.fileno()
    return None


async def _write_events(out: OutQueue, sink: trio.abc.SendStream) -> None:
    """The writer: the only task that writes to the client."""
    while (data := await out.take()) is not None:
        try:
            await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            log.info("the client stopped reading; dropping further events")
            out.closed = True
            return
