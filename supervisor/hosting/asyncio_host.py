"""`AsyncioSupervisor`: the `Supervisor` for asyncio code, on the caller's own loop.

```python
async with AsyncioSupervisor(adapters=["worker_runtime.examples:registry"]) as sup:
    out = await sup.invoke("text.upper", "hi", deadline=2.0, on_chunk=print)
```

The supervisor's code is written against anyio, so it runs on asyncio as it runs on
trio: its sessions read and write the workers' pipes from this loop, and a call costs no
hop to another thread. The supervisor's tasks (the pool, every session's reader and
writer, the expiry sweep, calls started with `start`) live in one task group, held by
one runner task that the `AsyncioSupervisor` owns from ``__aenter__`` to `aclose`; a call
runs in the task that awaits it. ``on_chunk`` runs in this loop, in order, before the call
returns. Cancelling the task that awaits ``invoke`` (``task.cancel()``,
``asyncio.timeout``) cancels the call cooperatively, waits for its end as a trio caller
would, then raises `asyncio.CancelledError`: the call's outcome (``cancelled``, or whatever
won the race) is in the ledger and the audit events.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio

from supervisor.ledger import ToolPolicy
from supervisor.workers.call_audit import AuditStream
from supervisor.workers.calls import CallHandle, ChunkCallback
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import SHUTDOWN_TIMEOUT, Supervisor, SupervisorError
from supervisor.workers.tool_callbacks import Decoder, Encoder, ExternalCallback

T = TypeVar("T")

#: A call started with `AsyncioSupervisor.start` is the supervisor's own handle: its
#: ``outcome`` and ``cancel`` are coroutines of this loop already.
AsyncioCallHandle = CallHandle
#: The audit events, ``async for`` in this loop; bounded, counting what it drops.
AsyncioAuditStream = AuditStream


class AsyncioSupervisor:
    """A `Supervisor` (same arguments) for asyncio: ``async with``, then ``await``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._supervisor = Supervisor(*args, **kwargs)  # bad arguments fail here, at once
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._calls: set[anyio.CancelScope] = set()  # `invoke`s running, for `aclose`
        self._idle = asyncio.Event()  # set while no `invoke` runs
        self._idle.set()

    @property
    def supervisor(self) -> Supervisor:
        """The `Supervisor` itself, running on this loop."""
        return self._supervisor

    @property
    def running(self) -> bool:
        return self._supervisor.state == "running"

    @property
    def tools(self) -> dict[str, ToolPolicy]:
        """The tools the workers serve (fixed once started)."""
        self._check_running()
        return self._supervisor.tools

    # -- life ---------------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncioSupervisor:
        if self._runner is not None:
            raise SupervisorError("an AsyncioSupervisor is entered once")
        entered = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._runner = asyncio.create_task(self._run(entered), name="sandvisor-supervisor")
        try:
            await asyncio.shield(entered)
        except asyncio.CancelledError:
            self._stop.set()
            await _through_cancellation(self._runner)
            raise
        return self

    async def _run(self, entered: asyncio.Future[None]) -> None:
        """The runner task: the supervisor's task group lives (and ends) here."""
        assert self._stop is not None
        try:
            async with self._supervisor:
                entered.set_result(None)
                await self._stop.wait()
        except Exception as exc:
            if entered.done():
                raise
            entered.set_exception(exc)
        finally:
            if not entered.done():  # cancelled while it started: the loop is closing
                entered.cancel()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel the calls still running (cooperatively, each waits for its end), close
        every worker. Waits for all of it, even if the waiting task is cancelled meanwhile."""
        runner = self._runner
        if runner is None:
            return
        closing = asyncio.ensure_future(self._close(runner))
        await _through_cancellation(closing)
        closing.result()  # a failure of the close itself is not swallowed
        if not runner.cancelled() and runner.exception() is not None:
            raise SupervisorError("the supervisor failed") from runner.exception()

    async def _close(self, runner: asyncio.Task[None]) -> None:
        for scope in list(self._calls):
            scope.cancel()
        if self._calls:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), SHUTDOWN_TIMEOUT)
        assert self._stop is not None
        self._stop.set()
        await asyncio.wait([runner])  # however it ends: `aclose` reads how

    def _check_running(self) -> None:
        if not self.running:
            raise SupervisorError(f"the supervisor is {self._supervisor.state}")

    def _check_loop(self) -> None:
        """Its state belongs to one loop (and thread): refuse any other, clearly."""
        self._check_running()
        if self._runner is not None and asyncio.get_running_loop() is not self._runner.get_loop():
            raise SupervisorError(
                "called from another event loop than the supervisor's: use one "
                "AsyncioSupervisor per loop (a SyncSupervisor serves any thread)"
            )

    # -- calls ----------------------------------------------------------------------------------

    async def invoke(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> Outcome:
        """Run one call to its `Outcome` (see `Supervisor.invoke`), in this task."""
        self._check_loop()
        scope = anyio.CancelScope()
        self._calls.add(scope)
        self._idle.clear()
        try:
            with scope:
                return await self._supervisor.invoke(
                    tool, value, deadline=deadline, on_chunk=on_chunk,
                    idempotency_key=idempotency_key,
                )  # fmt: skip
        finally:
            self._calls.discard(scope)
            if not self._calls:
                self._idle.set()
        raise SupervisorError("the supervisor stopped while the call ran")  # `aclose` did

    async def start(
        self,
        tool: str,
        value: Any,
        *,
        deadline: float | None = None,
        on_chunk: ChunkCallback | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncioCallHandle:
        """Start a call in the supervisor's task group; the handle's ``cancel`` and
        ``outcome`` (see `Supervisor.start`; cancelling a wait for the outcome leaves the
        call running). ``on_chunk`` runs in this loop as chunks arrive."""
        self._check_loop()
        return await self._supervisor.start(
            tool, value, deadline=deadline, on_chunk=on_chunk, idempotency_key=idempotency_key
        )

    async def call_in_host(self, fn: Callable[[Supervisor], Awaitable[T]]) -> T:
        """``await fn(supervisor)`` (to read its ledger, or ``lambda s: s.reconcile(op)``).
        The supervisor lives on this loop, so this is a plain call; it is kept so that
        code written for `SyncSupervisor` and older hosts reads the same."""
        self._check_loop()
        return await fn(self._supervisor)

    def audit_events(self, capacity: int = 1024) -> AsyncioAuditStream:
        """The call audit events, as ``async for`` in this loop; it drops events (and
        counts them in ``dropped``) when ``capacity`` are waiting. Close it when done;
        it ends by itself when the supervisor stops."""
        self._check_running()
        return self._supervisor.audit_events(capacity)

    # -- scripts ------------------------------------------------------------------------------

    def tool_callback(
        self,
        tool: str,
        *,
        deadline: float | None = None,
        encode: Encoder | None = None,
        decode: Decoder | None = None,
    ) -> ExternalCallback:
        """An async ``(params, stdin) -> str`` callback for `ScriptedTool.add_tool` (see
        `Supervisor.tool_callback`): direct from this loop, through the loop's token
        from another thread or loop; cancelling the script cancels the call."""
        self._check_running()
        return self._supervisor.tool_callback(tool, deadline=deadline, encode=encode, decode=decode)


async def _through_cancellation(task: asyncio.Future[Any]) -> None:
    """Wait for ``task`` to end even if the waiter is cancelled meanwhile (then re-raise)."""
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if task.done() and task.cancelled() and cancelled is None:
                break  # the task itself was cancelled (the loop is closing): not ours
            cancelled = exc
        except BaseException:
            break  # the task's own failure: `aclose` reports it
    if cancelled is not None:
        raise cancelled
    with contextlib.suppress(BaseException):
        task.result()  # retrieved: asyncio logs none as "never retrieved"
