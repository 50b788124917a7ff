"""`SyncSupervisor`: the `Supervisor` for plain synchronous code and thread pools.

```python
with SyncSupervisor(adapters=["worker_runtime.examples:registry"], pool_size=4) as sup:
    out = sup.invoke("text.upper", "hi", deadline=2.0, on_chunk=print)
    handle = sup.start("sleep", "5"); handle.cancel().status   # "cancelled"
```

(``open()``/``close()`` are the ``with`` statement's two halves.)

Every method blocks the calling thread only; any number of threads may call at once
(each call has its own mailbox). ``on_chunk`` runs in the calling thread, in order,
before ``invoke`` returns. An interrupt in the waiting thread (Ctrl-C) cancels the call
cooperatively and re-raises once the call has ended (a second interrupt stops waiting).
``close`` (or leaving the ``with``, or the interpreter exiting) cancels what still runs,
closes every worker and joins the supervisor's thread.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from supervisor.hosting.host_thread import JOIN_TIMEOUT, Chunk, Ended, Failed, RemoteCall, Started
from supervisor.hosting.hosted import HostedSupervisor, Result
from supervisor.hosting.mailbox import BlockingMailbox
from supervisor.hosting.waiting import ChunkDispatch, ChunkSink, outcome_of, wait_blocking
from supervisor.workers.call_audit import CallEvent
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import Supervisor, SupervisorError

T = TypeVar("T")


class SyncSupervisor(HostedSupervisor):
    """A `Supervisor` (same arguments) for synchronous code: ``with``, then call."""

    def __enter__(self) -> SyncSupervisor:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> SyncSupervisor:
        """Start the workers; raises what stopped them (e.g. `SandboxUnavailable`)."""
        box = BlockingMailbox()
        self._host.start(box)
        first = box.get()
        if isinstance(first, Failed):
            self._host.join()
            raise first.error
        return self

    def close(self, timeout: float = JOIN_TIMEOUT) -> None:
        """Cancel the calls still running (cooperatively), close every worker, and join
        the supervisor's thread. Idempotent."""
        self._check_caller()
        self._finalizer.detach()
        self._host.close(timeout)

    # -- calls ----------------------------------------------------------------------------------

    def invoke(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkSink = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run one call to its `Outcome` (see `Supervisor.invoke`)."""
        box = BlockingMailbox()
        call = self._remote(
            tool, value, box, deadline, idempotency_key, stream=on_chunk is not None
        )
        end = wait_blocking(box, call, on_chunk)
        if end.cancelled and end.error is None:
            raise SupervisorError("the supervisor stopped while the call ran")
        return outcome_of(end)

    def start(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkSink = None,
        idempotency_key: str | None = None,
    ) -> SyncCallHandle:
        """Start a call and return at once with its handle (see `Supervisor.start`).
        ``on_chunk`` runs in the thread that waits in ``outcome``/``cancel``."""
        box = BlockingMailbox()
        call = self._remote(
            tool,
            value,
            box,
            deadline,
            idempotency_key,
            stream=on_chunk is not None,
            handle=True,
        )
        return SyncCallHandle(call, box, on_chunk)

    def call_in_host(self, fn: Callable[[Supervisor], Awaitable[T]]) -> T:
        """``await fn(supervisor)`` in the supervisor's thread; its value or exception
        comes back here (e.g. ``sup.call_in_host(lambda s: s.reconcile(op_id))``)."""
        box = BlockingMailbox()
        self._job(fn, box)
        item = box.get()
        if isinstance(item, Ended):
            assert item.error is not None
            raise item.error
        assert isinstance(item, Result)
        value: T = item.value
        return value

    def audit_events(self, capacity: int = 1024) -> SyncAuditStream:
        """The call audit events for this thread: ``get(timeout)`` or iterate; it drops
        events (and counts them) when ``capacity`` are waiting. Close it when done."""
        self._check_running()
        return SyncAuditStream(self, capacity)


class SyncCallHandle:
    """A call started with `SyncSupervisor.start`; safe to share between threads."""

    def __init__(self, call: RemoteCall, box: BlockingMailbox, on_chunk: ChunkSink) -> None:
        self._call = call
        self._box = box
        self._chunks = ChunkDispatch(on_chunk)
        self._lock = threading.Lock()
        self._end: Ended | None = None
        self.tool = call.tool
        self.op_id: int | None = None
        self.idempotency_key: str | None = None
        started = box.get()
        if isinstance(started, Ended):
            outcome_of(started)  # raises the refusal
            raise SupervisorError("the call ended before it started")
        assert isinstance(started, Started)
        self.op_id, self.idempotency_key = started.op_id, started.idempotency_key

    @property
    def done(self) -> bool:
        return self._end is not None

    def outcome(self, timeout: float | None = None) -> Outcome:
        """Wait for the call's `Outcome`; `TimeoutError` after ``timeout`` seconds (the
        call goes on)."""
        limit = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError(f"the call did not end within {timeout} s")
        try:
            while self._end is None:
                left = None if limit is None else max(0.0, limit - time.monotonic())
                try:
                    item = self._box.get(left)
                except queue.Empty:
                    raise TimeoutError(f"the call did not end within {timeout} s") from None
                if isinstance(item, Ended):
                    self._end = item
                elif isinstance(item, Chunk):
                    self._chunks(item.text)
        finally:
            self._lock.release()
        return outcome_of(self._end)

    def cancel(self, timeout: float | None = None) -> Outcome:
        """Cancel cooperatively and return the `Outcome`: ``cancelled`` if the adapter
        acknowledged (it may also have completed first)."""
        self._call.cancel()
        return self.outcome(timeout)


class SyncAuditStream:
    """Audit events for synchronous code, bounded; ``get``, or iterate until closed."""

    def __init__(self, owner: SyncSupervisor, capacity: int) -> None:
        self.capacity = capacity
        self.dropped = 0
        self._owner = owner
        self._events: queue.Queue[CallEvent | None] = queue.Queue()
        self._remove: Callable[[], None] | None = None
        self._closed = False
        owner._host.call_soon(self._subscribe)
        owner._host.on_stopped(self)

    def _subscribe(self) -> None:  # in the supervisor's thread
        if not self._closed:
            self._remove = self._owner.supervisor.add_audit_callback(self._from_host)

    def _from_host(self, event: CallEvent) -> None:  # in the supervisor's thread
        if self._events.qsize() >= self.capacity:
            self.dropped += 1
        else:
            self._events.put_nowait(event)

    def post(self, item: Any) -> None:
        """The supervisor stopped: iteration ends after the events already here."""
        self._events.put_nowait(None)

    def get(self, timeout: float | None = None) -> CallEvent:
        """The next event; `TimeoutError` after ``timeout``, `EOFError` once closed."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("no audit event") from None
        if event is None:
            self._events.put_nowait(None)
            raise EOFError("the audit stream is closed")
        return event

    def __iter__(self) -> Iterator[CallEvent]:
        while True:
            try:
                yield self.get()
            except EOFError:
                return

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._events.put_nowait(None)
        with contextlib.suppress(SupervisorError):
            self._owner._host.call_soon(self._unsubscribe)

    def _unsubscribe(self) -> None:
        if self._remove is not None:
            self._remove()
