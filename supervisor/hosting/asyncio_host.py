"""`AsyncioSupervisor`: the `Supervisor` for asyncio code.

```python
async with AsyncioSupervisor(adapters=["worker_runtime.examples:registry"]) as sup:
    out = await sup.invoke("text.upper", "hi", deadline=2.0, on_chunk=print)
```

Every method is a coroutine of the caller's loop; the supervisor runs in its own trio
thread. ``on_chunk`` runs in the loop's thread, in order, before the call returns.
Cancelling the task that awaits ``invoke`` (``task.cancel()``, ``asyncio.timeout``)
cancels the call cooperatively, waits for its end as a trio caller would, then raises
`asyncio.CancelledError`: the call's outcome (``cancelled``, or whatever won the race) is
in the ledger and the audit events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from supervisor.audit import CallEvent
from supervisor.hosting.host_thread import Chunk, Ended, Failed, RemoteCall, Started, Stopped
from supervisor.hosting.hosted import HostedSupervisor, Result
from supervisor.hosting.mailbox import AsyncioMailbox
from supervisor.hosting.waiting import ChunkDispatch, ChunkSink, outcome_of, wait_async
from supervisor.outcome import Outcome
from supervisor.supervisor import Supervisor, SupervisorError

T = TypeVar("T")


async def _until_stopped(box: AsyncioMailbox) -> None:
    """Wait for `Stopped` through any cancellation (then re-raise it)."""
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            if isinstance(await box.get(), Stopped):
                break
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        raise cancelled


class AsyncioSupervisor(HostedSupervisor):
    """A `Supervisor` (same arguments) for asyncio: ``async with``, then ``await``."""

    async def __aenter__(self) -> AsyncioSupervisor:
        box = AsyncioMailbox()
        self._host.start(box)
        try:
            first = await box.get()
        except asyncio.CancelledError:
            self._host.stop()
            await _until_stopped(box)
            self._host.join()
            raise
        if isinstance(first, Failed):
            await _until_stopped(box)
            self._host.join()  # it has posted Stopped: it is returning now
            raise first.error
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the calls still running (cooperatively), close every worker, stop the
        thread. Waits for all of it, even if the waiting task is cancelled meanwhile."""
        box = AsyncioMailbox()
        self._host.stop(box)
        await _until_stopped(box)
        self._host.join()  # it has posted Stopped: it is returning now

    # -- calls ----------------------------------------------------------------------------------

    async def invoke(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkSink = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run one call to its `Outcome` (see `Supervisor.invoke`)."""
        box = AsyncioMailbox()
        call = self._remote(
            tool, value, box, deadline, idempotency_key, stream=on_chunk is not None
        )
        end = await wait_async(box, call, on_chunk)
        if end.cancelled and end.outcome is None and end.error is None:
            raise SupervisorError("the supervisor stopped while the call ran")
        return outcome_of(end)

    async def start(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkSink = None,
        idempotency_key: str | None = None,
    ) -> AsyncioCallHandle:
        """Start a call; the handle's ``cancel``/``outcome`` (see `Supervisor.start`).
        ``on_chunk`` runs in this loop as chunks arrive."""
        loop = asyncio.get_running_loop()
        handle = AsyncioCallHandle(loop, tool, on_chunk)
        call = self._remote(
            tool,
            value,
            handle._box,
            deadline,
            idempotency_key,
            stream=on_chunk is not None,
            handle=True,
        )
        handle._call = call
        await handle._started()
        return handle

    async def call_in_host(self, fn: Callable[[Supervisor], Awaitable[T]]) -> T:
        """``await fn(supervisor)`` in the supervisor's thread (to read its ledger, or
        ``lambda s: s.reconcile(op_id)``); its value or exception comes back here."""
        box = AsyncioMailbox()
        self._job(fn, box)
        item = await box.get()
        if isinstance(item, Ended):
            assert item.error is not None
            raise item.error
        assert isinstance(item, Result)
        value: T = item.value
        return value

    def audit_events(self, capacity: int = 1024) -> AsyncioAuditStream:
        """The call audit events, as ``async for`` in this loop; it drops events (and
        counts them in ``dropped``) when ``capacity`` are waiting. Close it when done."""
        self._check_running()
        return AsyncioAuditStream(self, asyncio.get_running_loop(), capacity)


class AsyncioCallHandle:
    """A call started with `AsyncioSupervisor.start`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tool: str, on_chunk: ChunkSink) -> None:
        self.tool = tool
        self.op_id: int | None = None
        self.idempotency_key: str | None = None
        self._chunks = ChunkDispatch(on_chunk)
        self._end: asyncio.Future[Ended] = loop.create_future()
        self._box = AsyncioMailbox(loop, intercept=self._intercept)
        self._call: RemoteCall | None = None

    def _intercept(self, item: Any) -> bool:
        if isinstance(item, Chunk):
            self._chunks(item.text)
            return True
        if isinstance(item, Ended) and not self._end.done():
            self._end.set_result(item)
        return False  # queued too, for `_started`

    async def _started(self) -> None:
        while True:
            item = await self._box.get()
            if isinstance(item, Started):
                self.op_id, self.idempotency_key = item.op_id, item.idempotency_key
                return
            if isinstance(item, Ended):
                outcome_of(item)  # raises the refusal
                raise SupervisorError("the call ended before it started")

    @property
    def done(self) -> bool:
        return self._end.done()

    async def outcome(self) -> Outcome:
        """Wait for the call's `Outcome` (cancelling this wait leaves the call running)."""
        return outcome_of(await asyncio.shield(self._end))

    async def cancel(self) -> Outcome:
        """Cancel cooperatively and return the `Outcome`: ``cancelled`` if the adapter
        acknowledged (it may also have completed first)."""
        assert self._call is not None
        self._call.cancel()
        return await self.outcome()


class AsyncioAuditStream:
    """Audit events in an asyncio loop (``async for event in stream``), bounded."""

    def __init__(
        self, owner: AsyncioSupervisor, loop: asyncio.AbstractEventLoop, capacity: int
    ) -> None:
        self.capacity = capacity
        self.dropped = 0
        self._closed = False
        self._owner = owner
        self._events: asyncio.Queue[CallEvent | None] = asyncio.Queue()
        self._loop = loop
        self._remove: Callable[[], None] | None = None
        owner._host.call_soon(self._subscribe)
        owner._host.on_stopped(self)

    def _subscribe(self) -> None:  # in the supervisor's thread
        self._remove = self._owner.supervisor.add_audit_callback(self._from_host)

    def post(self, item: Any) -> None:
        """The supervisor stopped: the iteration ends after the events already here."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._offer, None)

    def _from_host(self, event: CallEvent) -> None:  # in the supervisor's thread
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._offer, event)

    def _offer(self, event: CallEvent | None) -> None:
        if self._closed:
            return
        if event is None:
            self._closed = True
        if event is not None and self._events.qsize() >= self.capacity:
            self.dropped += 1
            return
        self._events.put_nowait(event)

    def __aiter__(self) -> AsyncIterator[CallEvent]:
        return self

    async def __anext__(self) -> CallEvent:
        event = await self._events.get()
        if event is None:
            self._events.put_nowait(None)  # ended for every later call too
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        """Unsubscribe; iteration ends after the events already here."""
        if self._closed:
            return
        self._offer(None)
        with contextlib.suppress(SupervisorError):
            self._owner._host.call_soon(self._unsubscribe)

    def _unsubscribe(self) -> None:
        if self._remove is not None:
            self._remove()

    async def __aenter__(self) -> AsyncioAuditStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
