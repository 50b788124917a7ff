"""The worker session loop: one reader at a time, and each call run by the thread that read it.

Handing a call to another thread (waking it, passing it the GIL) costs more than a
trivial call, so the thread that reads an ``invoke`` runs the adapter itself, *inline*.
While it does, another thread must read fd-in, so that a ``cancel`` reaches the running
adapter: a *standby* thread watches the inline call and, once it has run for
`TAKEOVER_AFTER`, takes over the reading; the old reader finishes its call as a plain
runner and then becomes the standby (or a parked spare). When complete frames already
wait behind an ``invoke`` of a tool that has not proved quick, the reader hands its
role to the standby at once instead, so that those calls run concurrently from the
start. The standby looks at an inline call when its takeover would be due; while no
call runs inline, or one of a tool that has proved quick, it looks every `POLL_INTERVAL`,
doubling up to `MAX_POLL_INTERVAL` while it finds nothing to take over (each look wakes
a thread that takes the GIL from the one running calls, so a stream of quick calls is
best served by few looks); it sleeps once the session has been quiet for `IDLE_AFTER`
(the next inline call wakes it).

One lock guards the connection, the roles and the queue of sealed frames (sealing and
queueing happen together, so frames leave in sequence order); one writer at a time
drains the queue with an ``os.write`` loop. A fatal error sets every token, runs the
calls' abort hooks and ends the process at once (exit 2), without waiting for adapters
that ignore their token.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, NoReturn

from .adapters import Adapter, AdapterError, AdapterRegistry, Cancelled, Context
from .journal import Refusal, Replay, WorkerJournal, journal_outcome
from .protocol.bootstrap import read_bootstrap
from .protocol.errors import BootstrapError, OutputTooLarge, ProtocolError, Refused, StateViolation
from .protocol.framing import LineReader
from .protocol.journal import input_digest
from .protocol.keys import derive_keys
from .protocol.limits import MAX_JOURNALED_PAYLOAD_BYTES
from .protocol.messages import Payload
from .protocol.payloads import check_payload, make_payload
from .protocol.rules import CANCEL_REQUESTED
from .protocol.worker import (
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
#: Seconds an inline call runs before the standby takes over the reading.
TAKEOVER_AFTER = 0.001
#: Seconds between two looks of the standby while no call runs inline, at first; it
#: doubles up to `MAX_POLL_INTERVAL` while the looks find nothing to take over, so a call
#: that turns slow after a quiet spell is taken over within about that long.
POLL_INTERVAL = 0.001
MAX_POLL_INTERVAL = 0.004
#: Seconds without a new inline call after which the standby sleeps until woken.
IDLE_AFTER = 0.05
#: A tool whose last `QUICK_STREAK` calls each took less than `QUICK_CALL` seconds is
#: run inline even when more frames wait (they wait at most about that long).
QUICK_CALL = 0.0005
QUICK_STREAK = 4

_now = time.monotonic


class _Hand:
    """One session thread; its role lives in the driver (reader, standby, or neither)."""

    __slots__ = ("signalled", "wake")

    def __init__(self) -> None:
        self.wake = threading.Lock()  # released to wake the thread: see `_signal`
        self.wake.acquire()
        self.signalled = False


class _Job:
    """An invoke to run: the adapter, its context, its input value and its journal key."""

    __slots__ = ("adapter", "ctx", "journal_key", "value")

    def __init__(
        self, adapter: Adapter, ctx: Context, value: Any, journal_key: str | None = None
    ) -> None:
        self.adapter = adapter
        self.ctx = ctx
        self.value = value
        self.journal_key = journal_key


class WorkerDriver:
    """Runs one session of a worker over two file descriptors."""

    def __init__(
        self,
        registry: AdapterRegistry,
        fd_in: int = 3,
        fd_out: int = 4,
        *,
        version: str = "0",
        journal: WorkerJournal | None = None,
    ) -> None:
        self._registry = registry
        self._journal = journal
        self._fd_in = fd_in
        self._fd_out = fd_out
        self._version = version
        self._lock = threading.Lock()  # the connection, roles, queue, contexts
        self._write_lock = threading.Lock()  # one writer drains the queue at a time
        self._queue: list[bytes] = []
        self._contexts: dict[str, Context] = {}
        self._conn: WorkerConnection | None = None
        self._lines = LineReader()
        self._dying = False
        self._done = threading.Lock()  # released when the session closed cleanly
        self._done.acquire()
        # roles (under the lock)
        self._reader: _Hand | None = None
        self._standby: _Hand | None = None
        self._standby_sleeping = False
        self._spares: list[_Hand] = []
        self._inline: _Job | None = None  # the reader's own call, while it runs it
        self._inline_since = 0.0
        self._inline_count = 0
        self._quick: dict[str, int] = {}  # tool -> calls in a row under QUICK_CALL

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
        self._conn = WorkerConnection(
            boot.session_id, derive_keys(boot.session_key), self._registry.specs()
        )
        first = self._reader = _Hand()
        self._start(first)
        try:
            self._done.acquire()
        except KeyboardInterrupt:
            self._die("interrupted")
        return EXIT_CLOSED

    def _read_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = os.read(self._fd_in, n - len(out))
            if not chunk:
                break
            out += chunk
        return out

    # -- session threads -----------------------------------------------------------------

    def _start(self, hand: _Hand) -> None:
        threading.Thread(target=self._hand_main, args=(hand,), name="session", daemon=True).start()

    def _hand_main(self, hand: _Hand) -> None:
        try:
            while True:
                if self._reader is hand:
                    self._read(hand)
                elif self._standby is hand:
                    self._watch(hand)
                else:  # a spare: wait for a role
                    hand.wake.acquire()
                    with self._lock:
                        hand.signalled = False
        except ProtocolError as exc:
            self._die(f"protocol violation ({exc.code}): {exc}")
        except OSError as exc:
            self._die(f"reading the host's frames failed: {exc}")
        except BaseException as exc:  # a bug here must still end the session closed
            _diag_exception("driver", exc)
            self._die(f"internal error: {type(exc).__name__}")

    def _signal(self, hand: _Hand) -> None:
        """Wake ``hand`` to look at its role again (lock held)."""
        if not hand.signalled:
            hand.signalled = True
            hand.wake.release()

    def _read(self, hand: _Hand) -> None:
        """As the reader: frames in, events handled, invokes run; returns once ``hand``
        is no longer the reader."""
        conn = self._conn
        assert conn is not None
        lines = self._lines
        while True:
            line = lines.next_line()
            if line is None:
                data = os.read(self._fd_in, READ_CHUNK)
                if not data:
                    lines.feed_eof()
                    line = lines.next_line()
                    if line is None:
                        with self._lock:
                            conn.receive_eof()  # raises: EOF before close
                        _park_forever()  # not reached: nothing is read after close
                else:
                    line = lines.feed_line(data)  # one whole frame: at once
                    if line is None:
                        continue
            with self._lock:
                event = conn.receive(line)
                job = self._handle(conn, event)
            if self._queue:
                self._flush()
            if job is None:
                if type(event) is CloseReceived:
                    self._done.release()
                    _park_forever()  # the main thread ends the process
                elif type(event) is Opened:
                    self._ensure_standby()  # started while the host reads `ready`
                continue
            if self._run_read_job(hand, job):
                return

    def _run_read_job(self, hand: _Hand, job: _Job) -> bool:
        """Run a call the reader read; True if ``hand`` lost the reader's role meanwhile."""
        if self._standby is None:  # only the reader empties the slot: no race to None
            self._ensure_standby()
        tool = job.adapter.tool
        streak = self._quick.get(tool, 0)
        if streak < QUICK_STREAK and self._lines.has_line:
            # frames wait behind a call that may be slow: they are read now, elsewhere
            with self._lock:
                standby = self._standby
                assert standby is not None
                self._reader, self._standby = standby, None
                self._signal(standby)
            self._run(hand, job)
            return True
        # Published without the lock: `_inline_since` before `_inline` (the standby reads
        # them in the other order), and `_inline` before `_standby_sleeping` is read (the
        # standby sets that flag before it looks at `_inline` a last time).
        self._inline_since = started = _now()
        self._inline = job
        self._inline_count += 1
        if self._standby_sleeping:
            with self._lock:
                if self._standby_sleeping and self._standby is not None:
                    self._standby_sleeping = False
                    self._signal(self._standby)
        adapter = job.adapter  # `_call`, inline: the reader's quick calls come this way
        outcome = (
            _outcome(adapter, job.ctx, job.value) if not adapter.effectful else self._effect(job)
        )
        if _now() - started < QUICK_CALL:
            if streak < QUICK_STREAK:
                self._quick[tool] = streak + 1
        elif streak:
            self._quick[tool] = 0
        return self._end(hand, job.ctx, outcome)

    def _run(self, hand: _Hand, job: _Job) -> None:
        """Run a call on a thread that is not the reader."""
        self._end(hand, job.ctx, self._call(job))

    def _end(self, hand: _Hand, ctx: Context, outcome: tuple[str, Any]) -> bool:
        """Seal exactly the call's legal frames and send them; then, if ``hand`` is not
        the reader (any more), it becomes the standby or a spare. True in that case."""
        with self._lock:
            if self._dying or self._conn is None or self._conn.dead:
                return False
            try:
                self._queue.append(self._terminal_frames(self._conn, ctx.rid, outcome))
            except Exception as exc:  # a bug here must not leave the call hanging
                _diag_exception("driver", exc)
                self._die(f"internal error ending {ctx.rid}: {type(exc).__name__}")
            del self._contexts[ctx.rid]
            reading = self._reader is hand
            if reading:
                self._inline = None
            elif self._standby is None:
                self._standby = hand
            else:
                self._spares.append(hand)
        self._flush()
        return not reading

    def _ensure_standby(self) -> None:
        """The reader makes sure some thread can take over from it: a spare, or a new one."""
        with self._lock:
            if self._standby is not None:
                return
            if self._spares:
                self._standby = standby = self._spares.pop()
                self._signal(standby)
                return
            self._standby = standby = _Hand()
        self._start(standby)

    def _watch(self, hand: _Hand) -> None:
        """As the standby: take over the reading from a reader whose inline call has run
        for `TAKEOVER_AFTER`; returns once ``hand`` is no longer the standby."""
        interval = POLL_INTERVAL
        seen = -1
        quiet_since = _now()
        while True:
            with self._lock:
                if self._standby is not hand:
                    return
                now = _now()
                job = self._inline
                if job is not None:
                    age = now - self._inline_since
                    if age >= TAKEOVER_AFTER:
                        self._reader, self._standby = hand, None
                        self._inline = None  # the old reader finishes it as a runner
                        return
                    if self._quick.get(job.adapter.tool, 0) >= QUICK_STREAK:
                        wait = interval  # a quick tool's call: it most likely ends first
                        interval = min(interval * 2, MAX_POLL_INTERVAL)
                    else:
                        wait = TAKEOVER_AFTER - age  # look again when its takeover is due
                else:
                    wait = interval
                    interval = min(interval * 2, MAX_POLL_INTERVAL)
                if seen != self._inline_count:
                    seen = self._inline_count
                    quiet_since = now
                sleep = False
                if self._inline is None and now - quiet_since >= IDLE_AFTER:
                    self._standby_sleeping = True  # first the flag, then a last look
                    sleep = self._inline is None
                    self._standby_sleeping = sleep
            got = hand.wake.acquire(True, -1 if sleep else wait)
            if got or sleep:
                with self._lock:
                    if got:
                        hand.signalled = False
                    self._standby_sleeping = False
                interval = POLL_INTERVAL

    def _handle(self, conn: WorkerConnection, event: WorkerEvent) -> _Job | None:
        """Act on one event (lock held); an invoke comes back as the job to run."""
        kind = type(event)
        if kind is InvokeReceived:
            assert isinstance(event, InvokeReceived)
            return self._job(event)
        if kind is CancelReceived:
            assert isinstance(event, CancelReceived)
            if event.finished:
                self._queue.append(conn.too_late(event.cid))
            elif self._adapter(event.tool).cancellable:
                self._contexts[event.rid]._cancel()
            else:
                self._queue.append(conn.unsupported(event.rid))
        elif kind is PingReceived:
            assert isinstance(event, PingReceived)
            self._queue.append(conn.pong(event.nonce))
        elif kind is ReconcileReceived:
            assert isinstance(event, ReconcileReceived)
            journal = self._journal
            if journal is not None and self._adapter(event.tool).effectful:
                entries = journal.lookup(event.tool, event.operation_key)
                self._queue.append(conn.reconciled(event.rid, entries))
            else:
                self._queue.append(conn.reconciled(event.rid))
        elif kind is Opened:
            self._queue.append(conn.ready(IMPL, self._version))
        return None

    # -- calls ---------------------------------------------------------------------------

    def _adapter(self, tool: str) -> Adapter:
        adapter = self._registry.get(tool)
        assert adapter is not None  # the connection refused grants of tools not served
        return adapter

    def _job(self, event: InvokeReceived) -> _Job:
        rid = event.rid
        deadline = None
        if event.deadline_ms is not None:
            deadline = _now() + event.deadline_ms / 1000

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
        adapter = self._registry.get(event.tool)
        assert adapter is not None  # the connection refused grants of tools not served
        return _Job(adapter, ctx, event.value, event.journal_key)

    def _call(self, job: _Job) -> tuple[str, Any]:
        """Run one call to its outcome; an effectful one inside its journal entries."""
        if not job.adapter.effectful:
            return _outcome(job.adapter, job.ctx, job.value)
        return self._effect(job)

    def _effect(self, job: _Job) -> tuple[str, Any]:
        """Record the start (durably), run, settle what the answer will be, record it
        (durably), and only then let it be sent. A recorded answer is replayed instead."""
        adapter, ctx = job.adapter, job.ctx
        journal = self._journal
        if journal is None or job.journal_key is None:
            why = "the host bound no journal" if journal is None else "the invoke has no key"
            return (
                "error",
                (
                    "journal_unavailable",
                    f"{ctx.tool} is effectful and this session cannot journal it ({why}); "
                    "it was not run",
                    False,
                ),
            )
        assert self._conn is not None
        key = bytes.fromhex(job.journal_key)
        digest = input_digest(adapter.format, job.value)
        try:
            begun = journal.begin(
                ctx.tool, ctx.idempotency_key, key, ctx.attempt, digest, self._conn.session_id
            )
        except Replay as replay:
            return replay.outcome
        except Refusal as refusal:
            return refusal.outcome()
        outcome, payload = self._settle(ctx, _outcome(adapter, ctx, job.value))
        try:
            journal.end(begun, key, journal_outcome(outcome, payload))
        except OSError as exc:  # the answer still goes out; reconcile will say running
            _diag(f"cannot record the end of {ctx.tool} {ctx.idempotency_key}: {exc}")
        return outcome

    def _settle(
        self, ctx: Context, outcome: tuple[str, Any]
    ) -> tuple[tuple[str, Any], Payload | None]:
        """The outcome as the frames will state it (a result the grant refuses becomes its
        error, a ``Cancelled`` without a cancel an adapter error), and a result's payload."""
        kind, detail = outcome
        with self._lock:
            call = None if self._conn is None else self._conn.call(ctx.rid)
        if call is None:
            return outcome, None
        if kind == "cancelled":
            if call.cancel == CANCEL_REQUESTED:
                return outcome, None
            why = "adapter raised Cancelled without a cancel"
            return ("error", ("adapter_error", why, False)), None
        if kind != "result":
            return outcome, None
        grant = call.grant
        limit = min(grant.max_output_bytes, MAX_JOURNALED_PAYLOAD_BYTES)
        try:
            payload = make_payload(detail, grant.format, "result")
            check_payload(payload, grant.format, limit, OutputTooLarge, "result")
        except StateViolation as exc:
            code = "output_too_large" if isinstance(exc, OutputTooLarge) else "invalid_output"
            return ("error", (code, str(exc), False)), None
        return outcome, payload

    def _terminal_frames(self, conn: WorkerConnection, rid: str, outcome: tuple[str, Any]) -> bytes:
        kind, detail = outcome
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
        if kind == "cancelled":
            call = conn.call(rid)
            if call is not None and call.cancel == CANCEL_REQUESTED:
                return conn.acknowledge(rid)
            return conn.error(rid, "adapter_error", "adapter raised Cancelled without a cancel")
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
        """Write queued frames in order: whoever holds the write lock takes everything
        queued so far. Every thread that queues a frame flushes after it, so a frame
        queued while another thread writes leaves with that thread's next flush (or an
        earlier one): one pass each, no second look."""
        with self._write_lock:
            with self._lock:
                queue = self._queue
                if not queue or self._dying:
                    return
                data = queue[0] if len(queue) == 1 else b"".join(queue)
                queue.clear()
            try:
                written = os.write(self._fd_out, data)
                if written < len(data):
                    view = memoryview(data)[written:]
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


def _park_forever() -> NoReturn:
    """Block this (daemon) thread for good."""
    never = threading.Lock()
    never.acquire()
    while True:
        never.acquire()


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
