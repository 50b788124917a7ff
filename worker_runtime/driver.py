"""The worker session loop: frames on the main thread, each call on a thread of its own.

The main thread reads fd-in, splits lines and feeds `WorkerConnection`, so a `cancel` is
read and delivered while synchronous adapters run. Call threads are reused: starting a
thread costs more than a whole trivial call, so an idle one takes the next call.

One lock guards the connection and the queue of sealed frames (sealing and queueing
happen together, so frames leave in sequence order); one writer at a time drains the
queue with an ``os.write`` loop. A fatal error
sets every token, runs the calls' abort hooks and ends the process at once (exit 2),
without waiting for adapters that ignore their token.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from .adapters import Adapter, AdapterError, AdapterRegistry, Cancelled, Context
from .bootstrap import read_bootstrap
from .errors import BootstrapError, ProtocolError, Refused
from .framing import LineReader
from .keys import derive_keys
from .rules import CANCEL_REQUESTED
from .worker import (
    CancelReceived,
    CloseReceived,
    InvokeReceived,
    Opened,
    PingReceived,
    ReconcileReceived,
    WorkerConnection,
    WorkerEvent,
)

EXIT_CLOSED = 0
EXIT_VIOLATION = 2
EXIT_BOOTSTRAP = 3

IMPL = "sandvisor-worker-python"
READ_CHUNK = 65536


class WorkerDriver:
    """Runs one session of a worker over two file descriptors."""

    def __init__(
        self,
        registry: AdapterRegistry,
        fd_in: int = 3,
        fd_out: int = 4,
        *,
        version: str = "0",
    ) -> None:
        self._registry = registry
        self._fd_in = fd_in
        self._fd_out = fd_out
        self._version = version
        self._lock = threading.Lock()  # the connection, the queue, the contexts
        self._write_lock = threading.Lock()  # one writer drains the queue at a time
        self._queue: list[bytes] = []
        self._contexts: dict[str, Context] = {}
        self._conn: WorkerConnection | None = None
        self._dying = False
        self._idle: list[_CallThread] = []  # list.append/pop are atomic: no lock needed

    # -- the main thread ---------------------------------------------------------------

    def run(self) -> int:
        """Serve the session; returns the exit status (0 after close, 3 on bad bootstrap).

        A fatal violation does not return: it ends the process with status 2.
        """
        for fd in (self._fd_in, self._fd_out):  # no child process inherits the protocol
            try:
                os.set_inheritable(fd, False)
            except OSError as exc:
                _diag(f"protocol fd {fd} is not usable: {exc}")
                return EXIT_BOOTSTRAP
        try:
            boot = read_bootstrap(self._read_exact)
        except (BootstrapError, OSError) as exc:
            _diag(f"bad bootstrap: {exc}")
            return EXIT_BOOTSTRAP
        conn = WorkerConnection(
            boot.session_id, derive_keys(boot.session_key), self._registry.formats()
        )
        self._conn = conn
        reader = LineReader()
        try:
            while True:
                line = reader.next_line()
                if line is None:
                    data = os.read(self._fd_in, READ_CHUNK)
                    if data:
                        reader.feed(data)
                        continue
                    reader.feed_eof()
                    line = reader.next_line()
                    if line is None:
                        with self._lock:
                            conn.receive_eof()
                        return EXIT_CLOSED  # not reached: EOF before close raises
                with self._lock:
                    event = conn.receive(line)
                    closing = self._handle(conn, event)
                self._flush()
                if closing:
                    return EXIT_CLOSED
        except ProtocolError as exc:
            self._die(f"protocol violation ({exc.code}): {exc}")
        except OSError as exc:
            self._die(f"reading the host's frames failed: {exc}")
        except KeyboardInterrupt:
            self._die("interrupted")
        except Exception as exc:  # a bug here must still end the session closed
            _diag_exception("driver", exc)
            self._die(f"internal error: {type(exc).__name__}")

    def _read_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = os.read(self._fd_in, n - len(out))
            if not chunk:
                break
            out += chunk
        return out

    def _handle(self, conn: WorkerConnection, event: WorkerEvent) -> bool:
        """Act on one event (lock held); True when the session closed cleanly."""
        if isinstance(event, InvokeReceived):
            self._start_call(event)
        elif isinstance(event, CancelReceived):
            if event.finished:
                self._queue.append(conn.too_late(event.cid))
            else:
                adapter = self._adapter(event.tool)
                if adapter.cancellable:
                    self._contexts[event.rid]._cancel()
                else:
                    self._queue.append(conn.unsupported(event.rid))
        elif isinstance(event, PingReceived):
            self._queue.append(conn.pong(event.nonce))
        elif isinstance(event, ReconcileReceived):
            self._queue.append(conn.reconciled(event.rid))
        elif isinstance(event, Opened):
            self._queue.append(conn.ready(IMPL, self._version))
        elif isinstance(event, CloseReceived):
            return True
        return False

    # -- calls ---------------------------------------------------------------------------

    def _adapter(self, tool: str) -> Adapter:
        adapter = self._registry.get(tool)
        assert adapter is not None  # the connection refused grants of tools not served
        return adapter

    def _start_call(self, event: InvokeReceived) -> None:
        adapter = self._adapter(event.tool)
        rid = event.rid
        deadline = None
        if event.deadline_ms is not None:
            deadline = time.monotonic() + event.deadline_ms / 1000

        def emit(text: str) -> bool:
            return self._emit(rid, text)

        ctx = Context(
            rid=rid,
            tool=event.tool,
            attempt=event.attempt,
            idempotency_key=event.idempotency_key,
            deadline=deadline,
            emit=emit,
        )
        self._contexts[rid] = ctx
        runner = self._idle.pop() if self._idle else _CallThread(self._run_call)
        runner.submit(adapter, ctx, event.value)

    def _run_call(self, runner: _CallThread, adapter: Adapter, ctx: Context, value: Any) -> None:
        """On a call thread: run the adapter, then seal exactly its legal frames."""
        outcome = _outcome(adapter, ctx, value)
        with self._lock:
            if self._dying or self._conn is None or self._conn.dead:
                return
            try:
                self._queue.append(self._terminal_frames(self._conn, ctx.rid, outcome))
            except Exception as exc:  # a bug here must not leave the call hanging
                _diag_exception("driver", exc)
                self._die(f"internal error ending {ctx.rid}: {type(exc).__name__}")
            del self._contexts[ctx.rid]
        # Idle before the frame leaves: the host's next invoke then finds this thread.
        self._idle.append(runner)
        self._flush()

    def _terminal_frames(self, conn: WorkerConnection, rid: str, outcome: tuple[str, Any]) -> bytes:
        kind, detail = outcome
        if kind == "cancelled":
            call = conn.call(rid)
            if call is not None and call.cancel == CANCEL_REQUESTED:
                return conn.acknowledge(rid)
            return conn.error(rid, "adapter_error", "adapter raised Cancelled without a cancel")
        if kind == "result":
            try:
                return conn.result(rid, detail)
            except Refused as exc:
                code = (
                    "output_too_large"
                    if exc.code in ("output_too_large", "frame_too_large")
                    else "invalid_output"
                )
                return conn.error(rid, code, str(exc))
        code, message, retryable = detail
        try:
            return conn.error(rid, code, message, retryable)
        except Refused:  # an adapter error class with a code outside the id grammar
            return conn.error(rid, "adapter_error", message, retryable)

    def _emit(self, rid: str, text: str) -> bool:
        with self._lock:
            if self._dying or self._conn is None or self._conn.dead:
                return False
            line = self._conn.chunk(rid, text)
            if line is None:
                return False
            self._queue.append(line)
        self._flush()
        return True

    # -- output and death ---------------------------------------------------------------

    def _flush(self) -> None:
        """Write queued frames in order; whoever holds the write lock drains for everyone."""
        with self._write_lock:
            while True:
                with self._lock:
                    if not self._queue or self._dying:
                        return
                    data = b"".join(self._queue)
                    self._queue.clear()
                view = memoryview(data)
                try:
                    while view:
                        view = view[os.write(self._fd_out, view) :]
                except OSError as exc:
                    self._die(f"writing frames to the host failed: {exc}")

    def _die(self, reason: str) -> NoReturn:
        """Fatal: write nothing more, set every token, run abort hooks, exit 2 now."""
        self._dying = True
        for ctx in list(self._contexts.values()):
            ctx._abort()
        _diag(reason)
        os._exit(EXIT_VIOLATION)


class _CallThread:
    """A daemon thread that runs one call at a time, parked on a lock between calls."""

    __slots__ = ("_go", "_job", "_run")

    def __init__(self, run: Callable[[_CallThread, Adapter, Context, Any], None]) -> None:
        self._run = run
        self._job: tuple[Adapter, Context, Any] | None = None
        self._go = threading.Lock()
        self._go.acquire()
        threading.Thread(target=self._loop, name="call", daemon=True).start()

    def submit(self, adapter: Adapter, ctx: Context, value: Any) -> None:
        self._job = (adapter, ctx, value)
        self._go.release()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            job, self._job = self._job, None
            assert job is not None
            self._run(self, *job)


def _outcome(adapter: Adapter, ctx: Context, value: Any) -> tuple[str, Any]:
    """Run the adapter; what it did, as ("result", value), ("cancelled", None) or
    ("error", (code, message, retryable)). Never raises."""
    try:
        return ("result", adapter.fn(value, ctx))
    except Cancelled:
        return ("cancelled", None)
    except AdapterError as exc:
        message = getattr(exc, "message", None)
        if not isinstance(message, str):
            message = _describe(exc, "adapter error")
        return ("error", (str(exc.code), message, bool(exc.retryable)))
    except BaseException as exc:  # an adapter failure is a normal outcome
        _diag_exception(adapter.tool, exc)
        message = _describe(exc, "adapter failed") if adapter.expose_errors else "adapter failed"
        return ("error", ("adapter_error", message, False))


def _describe(exc: BaseException, fallback: str) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return fallback


def _diag(message: str) -> None:
    """A line on stderr (diagnostics only); never blocks the exit path for long."""
    with contextlib.suppress(OSError):
        os.write(2, f"worker_runtime: {message}\n".encode(errors="replace"))


def _diag_exception(tool: str, exc: BaseException) -> None:
    import traceback

    text = "".join(traceback.format_exception(exc))
    _diag(f"adapter {tool!r} raised:\n{text[-4000:]}")


def exit_now(status: int) -> NoReturn:
    """End the process without waiting for adapter threads (daemon threads may still run)."""
    if status == EXIT_CLOSED:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(status)
