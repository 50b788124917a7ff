"""One worker session: spawn, bootstrap, handshake, then move bytes until it ends.

`Session.run` owns one nursery, the session's, whose tasks each own one thing:

- ``_reader``: fd 4; a bounded `LineReader`, then `HostConnection.receive`, then routes
  each event to its call's owner (`CallOwner`: the disarm and the ledger transition
  happen there, with no checkpoint in between); what the calls send meanwhile (the next
  call in line takes the slot a result freed) leaves in one write per wake-up;
- ``_writer``: fd 3; writes queued lines in order, coalescing what is queued together;
- ``_drain`` x2: stdout and stderr into bounded captures (diagnostics only);
- ``_wait_process``: the exit of the worker; an exit we did not ask for poisons;
- ``_timer``: the session's lifetime deadline (from spawn) and idle ``ping`` liveness.

A call's watchdog is its owner's (`supervisor.workers.calls`): the session queues its
``invoke`` and its ``cancel`` and reports what arrives. `kill` poisons the session for
good: every call in flight ends ``indeterminate`` at once and the sandbox is torn down;
the pool replaces the session with a fresh id and key.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import anyio.abc

from supervisor._fdwrite import write_now
from supervisor._loop import current_loop
from supervisor.workers.launcher import Launcher, SpawnedWorker, StartedWorker, start_worker
from supervisor.workers.pipes import PipeStream
from supervisor.workers.secrets import Redactor
from supervisor.workers.session_keys import derive_keys, new_session_id, new_session_key
from supervisor.workers.watchdog import DEFAULT_CANCEL_GRACE, DEFAULT_HOST_CANCEL_GRACE
from supervisor.workers.worker_journal import GroupJournal
from worker_runtime.protocol.bootstrap import encode_bootstrap
from worker_runtime.protocol.errors import ConnectionDead, ProtocolError, Refused
from worker_runtime.protocol.framing import LineReader
from worker_runtime.protocol.host import (
    CancelAcknowledged,
    CancelUnsupported,
    ChunkReceived,
    ErrorReceived,
    HostConnection,
    HostEvent,
    PongReceived,
    ReconcileAnswered,
    ResultReceived,
    WorkerReady,
)
from worker_runtime.protocol.messages import Grant, Status, ToolSpec
from worker_runtime.protocol.payloads import payload_size

log = logging.getLogger(__name__)

READ_BYTES = 65536
#: Diagnostics kept per stream; the rest is counted and dropped (protocol.md section 1).
KEEP_DIAGNOSTICS = 64 * 1024
#: Seconds between two readings of a running worker's peak memory.
PEAK_MEMORY_INTERVAL = 1.0
#: After the worker exits, how long its stdout/stderr may take to reach EOF.
DRAIN_AFTER_EXIT = 0.2


class SessionError(Exception):
    """A session could not do what was asked; the message says why."""


class SessionStartError(SessionError):
    """The worker never became ready (it failed to start, or the start-up deadline)."""


class SessionUnusable(SessionError):
    """The session is poisoned, closing or closed: it takes no new calls, ever."""


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """What every session of one supervisor shares. Times are seconds."""

    grants: tuple[Grant, ...]
    max_in_flight: int = 1
    start_timeout: float = 10.0
    #: after a deadline (``deadline``, ``session_deadline``)
    cancel_grace: float = DEFAULT_CANCEL_GRACE
    #: after the caller's cancel (``host_cancel``)
    host_cancel_grace: float = DEFAULT_HOST_CANCEL_GRACE
    lifetime: float | None = 3600.0
    ping_interval: float | None = 30.0
    ping_timeout: float = 5.0
    frame_timeout: float | None = 5.0
    close_timeout: float = 2.0
    reap_timeout: float = 5.0
    keep_diagnostics: int = KEEP_DIAGNOSTICS
    #: What the worker says passes it before anything else sees it (a tool group's
    #: secrets: chunks, results, error texts, reconcile answers, start diagnostics).
    redact: Redactor | None = None
    #: Hears what the worker writes on its stdout, besides the capture (diagnostics, but
    #: the MCP bridge says there that its server's tools changed; never the protocol).
    on_stdout: Callable[[bytes], None] | None = None
    #: The group's worker journal: each effectful call's journal key, and the check of
    #: reconcile answers that relay entries (spec section 11).
    journal: GroupJournal | None = None


class CallOwner(Protocol):
    """Who hears about one call in flight; called synchronously from the session's
    reader (or from `Session.kill`), exactly one end per call."""

    tool: str

    def on_chunk(self, index: int, text: str) -> None: ...

    def on_result(self, value: Any, size: int, now: float) -> None: ...

    def on_error(self, code: str, message: str, retryable: bool, size: int, now: float) -> None:
        """An adapter error; ``size`` is its message's bytes."""

    def on_acknowledged(self, now: float) -> None: ...

    def on_killed(self, reason: str, now: float) -> None: ...


class Capture:
    """A bounded diagnostics buffer: the first ``limit`` bytes, and a count of the rest."""

    __slots__ = ("done", "kept", "limit", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0
        self.done = anyio.Event()

    def feed(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    @property
    def dropped(self) -> int:
        return self.total - len(self.kept)

    def text(self) -> str:
        return self.kept.decode(errors="replace")


State = Literal["new", "ready", "closing", "failing", "closed", "dead"]


class Session:
    """One worker process and its authenticated protocol session."""

    def __init__(
        self,
        launcher: Launcher,
        config: SessionConfig,
        *,
        on_dead: Callable[[Session], None] | None = None,
        worker: StartedWorker | None = None,
    ) -> None:
        """``on_dead(session)`` is called (synchronously) once the session stops taking
        calls: killed, or closing. ``worker``: started already (the MCP describer, waiting
        for its bootstrap), run instead of spawning one."""
        self.id = new_session_id()
        key = new_session_key()
        self._bootstrap: bytes | None = encode_bootstrap(self.id, key)
        self.conn = HostConnection(self.id, derive_keys(key), config.grants, config.max_in_flight)
        del key
        self.config = config
        self._launcher = launcher
        self._started = worker
        self._on_dead = on_dead
        self.state: State = "new"
        #: Each tool as the worker's ``ready`` described it (None until then).
        self.tools: dict[str, ToolSpec] | None = None
        #: Why the session ended: ``closed`` after a graceful close, else the kill reason.
        self.end_reason: str | None = None
        self.calls_started = 0
        self.spawned_at: float | None = None
        self.expires_at = math.inf
        self.returncode: int | None = None
        self.termination: str | None = None
        self.peak_memory: int | None = None
        self._peak_read_at = -math.inf
        self.stdout = Capture(config.keep_diagnostics)
        self.stderr = Capture(config.keep_diagnostics)
        self._calls: dict[str, CallOwner] = {}
        self._pings: dict[str, anyio.Event] = {}
        self._reconciles: dict[str, tuple[anyio.Event, list[ReconcileAnswered]]] = {}
        self._outbox, self._outbox_recv = anyio.create_memory_object_stream[bytes](math.inf)
        self._unsent = 0  # chunks queued for the writer task, not yet written
        #: While the reader handles what one read brought: lines to send, written once.
        self._batch: list[bytes] | None = None
        self._write_fd = -1  # fd 3's host end, for direct writes while nothing is queued
        self._settled = anyio.Event()  # ready, or dead before ready
        self._exited = anyio.Event()
        self._reaped = anyio.Event()
        self._spawned: SpawnedWorker | None = None
        self._run_entered = False  # until then nothing can have been spawned
        self._scope: anyio.CancelScope | None = None
        self._loop = loop = current_loop()
        self._now = loop.now

    # -- what the pool and the supervisor read ------------------------------------------

    @property
    def usable(self) -> bool:
        return self.state == "ready"

    @property
    def dead(self) -> bool:
        return self.state == "dead"

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    @property
    def can_send(self) -> bool:
        """Whether a ``cancel`` can still be sent (ready, or closing)."""
        return self.state == "ready" or self.state == "closing"

    @property
    def pid(self) -> int | None:
        return None if self._spawned is None else self._spawned.pid

    def survivors(self, *, thorough: bool = True) -> list[int]:
        """Live processes of this session's sandbox (none once it was reaped)."""
        return [] if self._spawned is None else self._spawned.survivors(thorough=thorough)

    def peak_memory_now(self, now: float | None = None) -> int | None:
        """Peak memory of the worker so far (read at most once a second while it runs);
        ``now`` is the loop's clock if the caller has read it already."""
        if self.returncode is not None or self._spawned is None:
            return self.peak_memory
        if now is None:
            now = self._now()
        if now - self._peak_read_at >= PEAK_MEMORY_INTERVAL:
            self._peak_read_at = now
            try:
                self.peak_memory = self._spawned.peak_memory()
            except Exception:
                log.debug("session %s: peak memory unavailable", self.id, exc_info=True)
        return self.peak_memory

    # -- the session's life --------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[Session] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Spawn and handshake (``task_status.started`` once ready), then serve to the end.

        Raises `SessionStartError` if the worker never becomes ready; after that it never
        raises: whatever goes wrong poisons the session, which then ends.
        """
        self._run_entered = True
        held, self._started = self._started, None
        if self.end_reason is not None:  # killed before it ran (the pool shut down)
            if held is not None:
                await held.discard(self.end_reason)
            raise SessionStartError(f"the session was killed before it started ({self.end_reason})")
        try:
            if held is not None:
                self.stderr.feed(held.stderr)
                spawned, host_ends = held.take()
            else:
                spawned, host_ends = await start_worker(self._launcher)
        except BaseException as exc:  # the sandbox said no, or a cancellation: fail closed
            self.state = "dead"
            self.end_reason = self.end_reason or "launch_failed"
            self._reaped.set()  # nothing of it runs: a spawn is never orphaned
            if isinstance(exc, Exception):
                raise SessionStartError(f"the worker could not be started: {exc}") from exc
            raise
        self._spawned = spawned
        if self.state == "dead":  # killed (e.g. the pool shut down) while it was starting
            spawned.kill(self.end_reason or "host_shutdown")
        self.spawned_at = self._now()
        if self.config.lifetime is not None:
            self.expires_at = self.spawned_at + self.config.lifetime
        streams = tuple(PipeStream(fd) for fd in host_ends)
        to_worker, from_worker, stdout, stderr = streams
        self._write_fd = to_worker.fileno()
        started = False
        try:
            async with anyio.create_task_group() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._reader, from_worker)
                nursery.start_soon(self._writer, to_worker)
                nursery.start_soon(self._drain, stdout, self.stdout, self.config.on_stdout)
                nursery.start_soon(self._drain, stderr, self.stderr, None)
                nursery.start_soon(self._wait_process, spawned)
                nursery.start_soon(self._timer)
                bootstrap, self._bootstrap = self._bootstrap, None
                assert bootstrap is not None
                if self.state == "new":
                    self._send(bootstrap + self.conn.open())
                    with anyio.move_on_after(self.config.start_timeout):
                        await self._settled.wait()
                if self.state == "ready":
                    started = True
                    task_status.started(self)
                else:  # the process waiter ends the nursery once the worker is reaped
                    self.kill("start_timeout" if not self._settled.is_set() else "start_failed")
        finally:
            with anyio.CancelScope(shield=True):
                await self._teardown(spawned, streams)
        if not started:
            raise SessionStartError(self._start_failure())

    def calls_in_flight(self) -> list[tuple[str, str]]:
        """(tool, rid) of each call in flight (the network proxy charges them)."""
        return [(call.tool, rid) for rid, call in self._calls.items()]

    def _start_failure(self) -> str:
        why = self.end_reason or "unknown"
        detail = self.stderr.text().strip().splitlines()[-3:]
        tail = f"; worker stderr: {' | '.join(detail)}" if detail else ""
        if self.config.redact is not None:
            tail = self.config.redact.text(tail)
        return f"the worker did not become ready ({why}, exit status {self.returncode}){tail}"

    async def _teardown(self, spawned: SpawnedWorker, streams: tuple[PipeStream, ...]) -> None:
        """Whatever happened: kill if alive, reap, close every fd, release the container."""
        if self.state != "closed":
            self.kill(self.end_reason or "host_shutdown")
            spawned.kill(self.end_reason or "host_shutdown")
        if self.returncode is None:
            with anyio.move_on_after(self.config.reap_timeout):
                self.returncode = await spawned.wait()
        self._write_fd = -1
        for stream in streams:
            with contextlib.suppress(Exception):
                await stream.aclose()
        self._outbox.close()
        if self.returncode is None:
            log.error("session %s: worker pid %s was not reaped", self.id, spawned.pid)
        try:
            await spawned.cleanup()
        except Exception:
            log.exception("session %s: sandbox cleanup failed", self.id)
        self._reaped.set()

    def kill(self, reason: str) -> None:
        """Poison for good: end every call in flight as indeterminate, kill the sandbox."""
        if self.state in ("dead", "closed"):
            return
        self.state = "dead"
        self.end_reason = reason
        self._write_fd = -1
        self.conn.fail(ConnectionDead(f"session killed: {reason}"))
        if self._spawned is not None:
            try:
                self._spawned.kill(reason)
            except Exception:
                log.exception("session %s: kill failed", self.id)
        if self._on_dead is not None:  # out of the pool before its slots come back
            self._on_dead(self)
        now = self._now()
        calls = list(self._calls.values())
        self._calls.clear()
        for call in calls:
            try:
                call.on_killed(reason, now)
            except Exception:
                log.exception("session %s: a call's owner failed", self.id)
        self._settled.set()
        for event in self._pings.values():
            event.set()
        for event, _ in self._reconciles.values():
            event.set()
        self._outbox.close()
        if not self._run_entered:
            self._reaped.set()  # nothing was spawned, nothing will be

    async def wait_reaped(self, timeout: float | None = None) -> bool:
        """Wait until nothing of the worker's sandbox is alive; False on timeout."""
        with anyio.move_on_after(self.config.reap_timeout if timeout is None else timeout):
            await self._reaped.wait()
        return self._reaped.is_set()

    async def close(self) -> None:
        """The graceful end, when nothing is in flight; kills on refusal or timeout.
        Returns once the worker is reaped."""
        if self.state == "new":
            self.kill("host_shutdown")
        elif self.state == "ready":
            await self._close_and_wait()
        await self.wait_reaped()

    async def _close_and_wait(self) -> None:
        """Send ``close`` (or kill if calls are in flight) and wait for the exit."""
        try:
            line = self.conn.close()
        except Refused:
            self.kill("host_shutdown")
            return
        self.state = "closing"
        self._send(line)
        if self._on_dead is not None:
            self._on_dead(self)
        with anyio.move_on_after(self.config.close_timeout):
            await self._exited.wait()
        if not self._exited.is_set():
            self.kill("close_timeout")

    # -- calls ---------------------------------------------------------------------------

    def begin(
        self,
        owner: CallOwner,
        tool: str,
        value: Any,
        idempotency_key: str,
        attempt: int,
        deadline: float | None,
    ) -> tuple[str, int]:
        """Queue a call's ``invoke``; ``owner`` hears what becomes of it. Returns the rid
        and the input's size. Raises `Refused` (nothing sent, the session lives on) or
        `SessionUnusable`."""
        if self.state != "ready":
            raise SessionUnusable(f"session {self.id} is {self.state}")
        deadline_ms = None
        if deadline is not None:
            deadline_ms = max(0, math.ceil((deadline - self._now()) * 1000))
        journal = self.config.journal
        journal_key = None if journal is None else journal.key_for(tool, idempotency_key)
        conn = self.conn
        try:
            rid, line = conn.invoke(
                tool,
                value,
                idempotency_key=idempotency_key,
                attempt=attempt,
                deadline_ms=deadline_ms,
                journal_key=journal_key,
            )
        except ProtocolError as exc:  # the connection died and the session is going
            raise SessionUnusable(f"session {self.id}: {exc}") from exc
        if journal is not None and journal_key is not None and attempt == 1:
            journal.note_new()
        sent = conn.call(rid)
        assert sent is not None
        self._calls[rid] = owner
        self.calls_started += 1
        self._send(line)
        return rid, sent.input_bytes

    def send_cancel(self, rid: str) -> None:
        """Queue a cooperative ``cancel`` of call ``rid`` (nothing if it cannot be sent:
        the caller's grace then runs into the kill)."""
        try:
            _, line = self.conn.cancel(rid)
        except (Refused, ProtocolError) as exc:
            log.debug("session %s: cancel of %s refused: %s", self.id, rid, exc)
        else:
            self._send(line)

    # -- liveness and reconciliation -------------------------------------------------------

    async def ping(self, timeout: float | None = None) -> float:
        """Round-trip seconds of a ``ping``; kills the session if no ``pong`` in time."""
        if self.state != "ready":
            raise SessionUnusable(f"session {self.id} is {self.state}")
        started = self._now()
        try:
            nonce, line = self.conn.ping()
        except ProtocolError as exc:
            raise SessionUnusable(f"session {self.id}: {exc}") from exc
        event = self._pings[nonce] = anyio.Event()
        self._send(line)
        with anyio.move_on_after(self.config.ping_timeout if timeout is None else timeout):
            await event.wait()
        self._pings.pop(nonce, None)
        if not event.is_set():
            self.kill("ping_timeout")
        if self.dead:
            raise SessionUnusable(f"session {self.id} died: {self.end_reason}")
        return self._now() - started

    async def reconcile(
        self, tool: str, operation_key: str, timeout: float, *, attempt: int = 1
    ) -> Status:
        """What this worker knows of an operation key (a ``reconcile`` frame). For an
        effectful tool, a terminal answer counts only as its journal entries record it
        (checked with the operation's journal key; ``attempt``: the one last dispatched):
        `JournalTampered` otherwise."""
        if self.state != "ready":
            raise SessionUnusable(f"session {self.id} is {self.state}")
        try:
            rid, line = self.conn.reconcile(tool, operation_key)
        except ProtocolError as exc:
            raise SessionUnusable(f"session {self.id}: {exc}") from exc
        event, answer = self._reconciles[rid] = (anyio.Event(), [])
        self._send(line)
        with anyio.move_on_after(timeout):
            await event.wait()
        self._reconciles.pop(rid, None)
        if not answer:
            self.kill("reconcile_timeout")
            raise SessionUnusable(f"session {self.id}: no answer to reconcile ({self.end_reason})")
        got = answer[0]
        status = got.status
        journal = self.config.journal
        if journal is not None:
            status = journal.check(tool, operation_key, status, got.journal, attempt)
        redact = self.config.redact
        return status if redact is None else redact.status(status)

    # -- tasks -----------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        """Queue bytes for fd 3, in order. When nothing is queued and at most one call is
        in flight, write at once (non-blocking) from the calling task and queue only what
        the pipe did not take: a lone call then costs no task switch. With more calls in
        flight the writer task coalesces what they queue into one write (fewer syscalls
        and fewer wake-ups of the worker)."""
        batch = self._batch
        if batch is not None:  # the reader writes it with the rest of this wake-up
            batch.append(data)
            return
        if len(self._calls) <= 1 and self._unsent == 0 and self._write_fd >= 0:
            data = write_now(self._write_fd, data)  # `_write`, inline: every call comes here
            if not data:
                return
        self._queue(data)

    def _write(self, data: bytes) -> None:
        """Write at once what the pipe takes, if nothing waits for the writer task."""
        if self._unsent == 0 and self._write_fd >= 0:
            data = write_now(self._write_fd, data)
            if not data:
                return
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        self._unsent += 1
        with contextlib.suppress(anyio.ClosedResourceError):
            self._outbox.send_nowait(data)

    async def _writer(self, stream: PipeStream) -> None:
        """Owns fd 3: writes what `_send` queued, coalescing what is queued together."""
        recv = self._outbox_recv
        try:
            async for data in recv:
                batch = [data]
                while True:
                    try:
                        batch.append(recv.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                await stream.send_all(batch[0] if len(batch) == 1 else b"".join(batch))
                self._unsent -= len(batch)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._write_fd = -1
            if self.state != "dead":
                await self._exit_reason_or("write_failed")

    async def _reader(self, stream: PipeStream) -> None:
        """Owns fd 4. It waits for readability before it reads, with the loop's own wait
        (a stream's ``receive_some`` would first yield, then try a read that fails with
        EAGAIN: a scheduling pass and a syscall per wake-up). It ends with the session's
        task group, which is cancelled once the worker is gone, before any fd closes."""
        reader = LineReader()
        frame_timeout = self.config.frame_timeout
        fd = stream.fileno()
        wait_readable = self._loop.wait_readable
        read = os.read
        held = False  # part of a frame waits for the rest (the frame timeout runs)
        try:
            while True:
                if held and frame_timeout is not None:
                    with anyio.move_on_after(frame_timeout) as scope:
                        await wait_readable(fd)
                    if scope.cancelled_caught:
                        self.kill("protocol:frame_timeout")
                        return
                else:
                    await wait_readable(fd)
                try:
                    data = read(fd, READ_BYTES)
                except BlockingIOError:
                    continue
                if not data:
                    reader.feed_eof()
                    self._take_lines(reader.next_line(), reader)
                    await self._on_eof()
                    return
                line = reader.feed_line(data)
                if line is None:
                    self._take_lines(reader.next_line(), reader)
                    held = reader.buffered > 0
                else:  # exactly one whole frame: nothing more is held
                    self._take_lines(line, None)
                    held = False
                if self.state == "dead":
                    return
        except ProtocolError as exc:
            self.kill(f"protocol:{exc.code}")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            if self.state != "dead":
                await self._exit_reason_or("eof")

    def _take_lines(self, line: bytes | None, reader: LineReader | None) -> None:
        """Handle ``line`` and every further line ``reader`` holds (None: it holds none);
        what the calls send meanwhile leaves in one write."""
        receive = self.conn.receive
        route = self._route
        batch: list[bytes] = []
        self._batch = batch
        try:
            while line is not None and self.state != "dead":
                event = receive(line)
                if event is not None:
                    route(event)
                line = None if reader is None else reader.next_line()
        finally:
            self._batch = None
            if batch and self.state != "dead":
                self._write(batch[0] if len(batch) == 1 else b"".join(batch))

    async def _on_eof(self) -> None:
        try:
            self.conn.receive_eof()
        except ProtocolError:
            await self._exit_reason_or("eof")

    async def _exit_reason_or(self, reason: str) -> None:
        """The pipe broke: no new call or cancel from now on; wait briefly for the exit,
        whose cause is the better reason, then kill."""
        if self.state in ("new", "ready", "closing"):
            self.state = "failing"
        with anyio.move_on_after(0.5):
            await self._exited.wait()
        self.kill(reason)

    def _route(self, event: HostEvent) -> None:
        kind = type(event)
        try:
            if kind is ResultReceived:
                assert isinstance(event, ResultReceived)
                call = self._calls.pop(event.rid, None)
                if call is not None:  # the connection only returns calls it tracks
                    now = self._now()
                    payload = event.payload
                    value = payload.value
                    if type(value) is str and value.isascii():  # the common case inline
                        size = len(value)  # (a text payload's value is its only str)
                    else:
                        size = payload_size(payload)
                    redact = self.config.redact
                    if redact is not None:
                        value = redact.value(value)
                    call.on_result(value, size, now)
            elif kind is ChunkReceived:
                assert isinstance(event, ChunkReceived)
                call = self._calls.get(event.rid)
                if call is not None:
                    redact = self.config.redact
                    text = event.text if redact is None else redact.text(event.text)
                    call.on_chunk(event.index, text)
            elif kind is ErrorReceived:
                assert isinstance(event, ErrorReceived)
                call = self._calls.pop(event.rid, None)
                if call is not None:
                    now = self._now()
                    code, message = event.code, event.message
                    size = len(message.encode())
                    redact = self.config.redact
                    if redact is not None:
                        code, message = redact.text(code), redact.text(message)
                    call.on_error(code, message, event.retryable, size, now)
            elif kind is CancelAcknowledged:
                assert isinstance(event, CancelAcknowledged)
                call = self._calls.pop(event.rid, None)
                if call is not None:
                    call.on_acknowledged(self._now())
            elif kind is CancelUnsupported:
                pass  # the call runs on; its watchdog kills it when the grace is over
            elif kind is PongReceived:
                assert isinstance(event, PongReceived)
                waiter = self._pings.get(event.nonce)
                if waiter is not None:
                    waiter.set()
            elif kind is ReconcileAnswered:
                assert isinstance(event, ReconcileAnswered)
                waiting = self._reconciles.get(event.rid)
                if waiting is not None:  # checked and redacted by `reconcile`
                    waiting[1].append(event)
                    waiting[0].set()
            elif kind is WorkerReady and self.state == "new":
                assert isinstance(event, WorkerReady)
                self.tools = {spec.name: spec for spec in event.tools}
                self.state = "ready"
                self._settled.set()
        except Exception:
            log.exception("session %s: a call's owner failed on %s", self.id, kind.__name__)

    async def _drain(
        self, stream: PipeStream, capture: Capture, hear: Callable[[bytes], None] | None
    ) -> None:
        try:
            while data := await stream.receive_some(READ_BYTES):
                capture.feed(data)
                if hear is not None:
                    hear(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            capture.done.set()

    async def _wait_process(self, spawned: SpawnedWorker) -> None:
        code = await spawned.wait()
        self.returncode = code
        self._exited.set()
        try:
            self.termination = spawned.termination(
                deadline_fired=self.end_reason in ("deadline", "session_deadline")
            )
            self.peak_memory = spawned.peak_memory()
        except Exception:
            log.exception("session %s: termination classification failed", self.id)
        if self.state == "closing" and code == 0:
            self.state = "closed"
            self.end_reason = "closed"
        else:
            self.kill(self._crash_reason(code))
        await self._confirm_gone(spawned)
        with anyio.move_on_after(DRAIN_AFTER_EXIT):
            await self.stdout.done.wait()
            await self.stderr.done.wait()
        if self._scope is not None:
            self._scope.cancel()

    async def _confirm_gone(self, spawned: SpawnedWorker) -> None:
        """Once nothing of the sandbox is alive, let the calls that wait for the reap go
        (the container's own cleanup comes after, in the teardown)."""
        with anyio.move_on_after(self.config.reap_timeout):
            while spawned.survivors(thorough=False):
                spawned.kill(self.end_reason or "reap")
                await anyio.sleep(0.001)
            self._reaped.set()

    def _crash_reason(self, code: int) -> str:
        if self.termination in ("memory", "pids", "cpu"):
            return self.termination
        if code < 0:
            return f"crash:{_signal_name(-code)}"
        if code > 128 and code - 128 < signal.NSIG:
            return f"crash:{_signal_name(code - 128)}"
        return f"crash:exit:{code}"

    async def _timer(self) -> None:
        """The lifetime deadline from spawn, and a ``ping`` after each idle interval.

        At the end of its life an idle session is closed cleanly, one closing already is
        left to its close (``close_timeout`` bounds it), and any other is killed
        (``session_deadline``: calls in flight, still starting, or failing)."""
        interval = self.config.ping_interval
        while True:
            wake = self.expires_at
            if interval is not None:
                wake = min(wake, self._now() + interval)
            await anyio.sleep_until(wake)
            if self._now() >= self.expires_at:
                if self.state == "ready" and not self._calls:
                    await self._close_and_wait()  # idle: no call is hurt by a clean end
                elif self.state != "closing":
                    self.kill("session_deadline")
                return
            if self.state == "ready" and not self._calls:
                with contextlib.suppress(SessionUnusable, Refused):
                    await self.ping()
            if self.state == "dead":
                return


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal:{number}"


__all__ = [
    "CallOwner",
    "Capture",
    "Session",
    "SessionConfig",
    "SessionError",
    "SessionStartError",
    "SessionUnusable",
]
