"""One jq command through an engine of a pool: send, wait until the deadline, hand back.

The common case finishes synchronously: the request is written, the caller polls the
reply pipe for a moment (``spin_seconds``: a small filter answers in about a hundred
microseconds, and waking a sleeping process costs tens), and the result returns as a
plain `CommandResult`. Otherwise the call waits the way its caller can afford:

* inside an event loop (the interpreter), as an awaitable that sleeps on the pipe through
  anyio, so the loop keeps running; a cancellation kills the child;
* elsewhere, in ``poll(2)``.

Either way the wait ends at the deadline: the child is SIGKILLed and reaped (off the
event loop, by a thread of the pool: tearing down a 1 GiB process takes a tenth of a
second, which an awaiting script does not wait for), the pool starts a fresh one on the
next call, and the command fails with ``jq: error: ...``, status 5.
"""

from __future__ import annotations

import math
import os
import select
import time
from typing import TYPE_CHECKING

import anyio

from supervisor.scripted.contract import CommandResult

from .engine import EngineFailure, JqEngine
from .limits import STOPPED_STATUS, timeout_message
from .wire import JqReply, from_wire

if TYPE_CHECKING:
    from .pool import JqEnginePool

#: How long an async caller sleeps between looks for a free engine (all are busy).
_SLOT_POLL = 0.002


class _Timeout(Exception):
    pass


class Call:
    """The state of one command: its request, its engine once it has one, its deadline."""

    __slots__ = ("deadline", "engine", "pending", "pool", "request", "start")

    def __init__(self, pool: JqEnginePool, request: bytes, start: float, deadline: float) -> None:
        self.pool = pool
        self.request = request
        self.pending = memoryview(b"")
        self.engine: JqEngine | None = None
        self.start = start
        self.deadline = deadline

    # ------------------------------------------------------------------ the fast path

    def try_now(self) -> CommandResult | None:
        """The result if it comes within the spin; None when the caller must wait."""
        try:
            if time.monotonic() >= self.deadline:
                raise _Timeout
            engine = self.pool.take()
            if engine is None:
                return None
            self._attach(engine)
            if not engine.ready:
                return None  # a child still starting answers in tens of milliseconds
            reply = self._spin(self.pool.limits.spin_seconds)
        except BaseException as exc:
            return self._fail(exc)
        return None if reply is None else self._done(reply)

    def _attach(self, engine: JqEngine) -> None:
        self.engine = engine
        self.pending = engine.write_some(memoryview(self.request))

    def _step(self) -> JqReply | None:
        engine = self.engine
        assert engine is not None
        if self.pending:
            self.pending = engine.write_some(self.pending)
            if self.pending:
                return None
        return engine.read_reply()

    def _spin(self, seconds: float) -> JqReply | None:
        until = time.monotonic() + seconds
        while True:
            reply = self._step()
            if reply is not None or time.monotonic() >= until:
                return reply
            os.sched_yield()  # the child may share this CPU; other threads get the GIL

    # ------------------------------------------------------------------ blocking wait

    def finish_sync(self) -> CommandResult:
        try:
            while self.engine is None:
                engine = self.pool.take_waiting(self.deadline)
                if engine is None:
                    raise _Timeout
                self._attach(engine)
            while True:
                reply = self._step()
                if reply is not None:
                    return self._done(reply)
                self._poll()
        except BaseException as exc:
            return self._fail(exc)

    def _poll(self) -> None:
        engine = self.engine
        assert engine is not None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _Timeout
        poller = select.poll()
        if self.pending:
            poller.register(engine.req_w, select.POLLOUT)
        else:
            poller.register(engine.rep_r, select.POLLIN)
        poller.poll(math.ceil(left * 1000))

    # ------------------------------------------------------------------ awaiting

    async def finish_async(self) -> CommandResult:
        try:
            with anyio.move_on_after(max(0.0, self.deadline - time.monotonic())):
                while self.engine is None:
                    engine = self.pool.take()
                    if engine is None:
                        await anyio.sleep(_SLOT_POLL)
                    else:
                        self._attach(engine)
                while True:
                    reply = self._step()
                    if reply is not None:
                        if reply.retire:  # out of memory: its teardown must not block
                            await self._discard_async()
                        return self._done(reply)
                    await self._wait_async()
            raise _Timeout
        except GeneratorExit:  # closed, maybe by the garbage collector: no lock here
            self.abandon()
            raise
        except BaseException as exc:
            await self._discard_async()
            return self._fail(exc)

    async def _wait_async(self) -> None:
        engine = self.engine
        assert engine is not None
        if self.pending:
            await anyio.wait_writable(engine.req_w)
        else:
            await anyio.wait_readable(engine.rep_r)

    async def _discard_async(self) -> None:
        """Kill the engine now; the pool reaps it on a thread of its own, so that the
        command ends at its deadline, not when a large child has been torn down."""
        engine, self.engine = self.engine, None
        if engine is not None:
            self.pool.discard_soon(engine)

    def abandon(self) -> None:
        """The awaitable was dropped or closed before its end (a finaliser's or the
        garbage collector's call): the engine (if any) is killed at once and reaped by
        the pool's janitor, without taking a lock (``JqEnginePool.abandon``)."""
        engine, self.engine = self.engine, None
        if engine is not None:
            self.pool.abandon(engine)

    def _release(self) -> None:
        """Kill the engine (if any) and free its slot: the call ends without its reply."""
        engine, self.engine = self.engine, None
        if engine is not None:
            self.pool.discard(engine)

    # ------------------------------------------------------------------ outcomes

    def _done(self, reply: JqReply) -> CommandResult:
        engine, self.engine = self.engine, None
        if engine is not None:
            if reply.retire:
                self.pool.discard(engine)
            else:
                self.pool.give_back(engine)
        return CommandResult(from_wire(reply.stdout), from_wire(reply.stderr), reply.status)

    def _fail(self, exc: BaseException) -> CommandResult:
        """The engine (if any) is killed and its slot freed; the failure as a result, or
        the exception again when it is not ours (a cancellation, an interrupt)."""
        self._release()
        if isinstance(exc, _Timeout):
            return CommandResult("", timeout_message(time.monotonic() - self.start), STOPPED_STATUS)
        if isinstance(exc, EngineFailure):
            return CommandResult("", exc.message, STOPPED_STATUS)
        raise exc
