"""A `Supervisor` in a dedicated trio thread, reachable from any thread or event loop.

The supervisor is trio. A host on asyncio, or plain synchronous code, reaches it through
one `HostThread`: a thread that runs ``trio.run`` with the supervisor entered and a
nursery (the *host nursery*) in which every call made from elsewhere runs as its own
task. A caller submits a `RemoteCall` with a `Mailbox`; the call posts its chunks and
its end there. Cancelling a `RemoteCall` cancels its task's scope, which the supervisor
turns into a cooperative ``cancel`` of the call (grace, then kill) exactly as for a trio
caller.

Why a thread and not trio's guest mode inside asyncio: measured on the reference machine
(docs/hosting.md), guest mode pays a thread hop for every trio I/O wait, several per call,
while the thread pays two per call (in and out); and synchronous callers need the thread
anyway. The sandboxes themselves are forked from the supervisor's spawner thread, which
outlives every call, so no sandbox dies with a caller's thread (``PR_SET_PDEATHSIG``).

Life: `start` (the caller waits for `Ready` or `Failed` in its mailbox), `stop` (every
call still running is cancelled cooperatively, the supervisor closes, the thread ends;
every mailbox given to `stop` then gets `Stopped`). Nothing runs detached: the thread is
joined by whoever stops it, and a forgotten one is stopped at interpreter exit.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from supervisor.hosting.mailbox import Mailbox
from supervisor.workers.calls import CallHandle, ChunkCallback
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import Supervisor, SupervisorError

log = logging.getLogger(__name__)

#: Seconds `stop` allows the supervisor to close (its own bound is 10 s) before giving up.
JOIN_TIMEOUT = 30.0
#: Runner tasks kept parked for the next calls (more end when their call does).
MAX_PARKED = 32
_names = itertools.count(1)


# -- what a mailbox receives -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Ready:
    """The supervisor started; its tools."""

    tools: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Failed:
    """The supervisor could not start (or the thread broke); the exception says why."""

    error: BaseException


@dataclasses.dataclass(frozen=True, slots=True)
class Stopped:
    """The thread has ended: every call ended and the supervisor is closed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Chunk:
    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Started:
    """A call made with ``handle=True`` was accepted by the ledger."""

    op_id: int
    idempotency_key: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Ended:
    """A call's end: its `Outcome`; or ``cancelled`` (an ``invoke`` whose caller
    cancelled it: the outcome went to the audit log, as for a trio caller); or the
    ``error`` the supervisor raised (a refusal such as an unknown tool)."""

    outcome: Outcome | None = None
    cancelled: bool = False
    error: BaseException | None = None


# -- one call ----------------------------------------------------------------------------------


class RemoteCall:
    """One supervisor call made from outside the supervisor's thread.

    ``handle=False`` runs ``Supervisor.invoke``: cancelling it ends with
    ``Ended(cancelled=True)`` once the cooperative cancel is over (the caller then
    raises its own cancellation). ``handle=True`` runs ``Supervisor.start``: it posts
    `Started`, and a cancel ends with the call's `Outcome` (``cancelled``, or whatever
    won the race).
    """

    __slots__ = (
        "_cancelled",
        "_final",
        "_handle",
        "_host",
        "_scope",
        "deadline",
        "handle",
        "idempotency_key",
        "mailbox",
        "stream",
        "tool",
        "value",
    )

    def __init__(
        self,
        host: HostThread,
        tool: str,
        value: Any,
        mailbox: Mailbox,
        *,
        deadline: float | None = None,
        idempotency_key: str | None = None,
        stream: bool = False,
        handle: bool = False,
    ) -> None:
        self._host = host
        self.tool = tool
        self.value = value
        self.mailbox = mailbox
        self.deadline = deadline
        self.idempotency_key = idempotency_key
        self.stream = stream
        self.handle = handle
        self._cancelled = False
        self._scope: trio.CancelScope | None = None
        self._handle: CallHandle | None = None
        self._final: Ended | None = None

    def cancel(self) -> None:
        """Cancel cooperatively; safe from any thread, any number of times. (A host that
        has stopped already cancelled every call it ran.)"""
        if not self._cancelled:
            self._cancelled = True
            with contextlib.suppress(SupervisorError):
                self._host.call_soon(self._cancel_here)

    def _cancel_here(self) -> None:
        if self._handle is not None:
            self._host.start_soon(self._handle.cancel)
        elif self._scope is not None:
            self._scope.cancel()

    async def run(self, sup: Supervisor) -> None:
        """In the host nursery: run the call and post its end (whatever happens)."""
        post = self.mailbox.post
        on_chunk: ChunkCallback | None = None
        if self.stream:

            def on_chunk(text: str) -> None:
                post(Chunk(text))

        end = Ended(cancelled=True)
        try:
            if self.handle:
                end = await self._run_handle(sup, on_chunk)
            else:
                end = await self._run_invoke(sup, on_chunk)
        except trio.Cancelled:  # the host is stopping; the call was cancelled cooperatively
            end = self._final or Ended(cancelled=True)
            raise
        except Exception as exc:  # a refusal (unknown tool, bad input...) for the caller
            end = Ended(error=exc)
        finally:
            post(end)

    async def _run_invoke(self, sup: Supervisor, on_chunk: ChunkCallback | None) -> Ended:
        scope = self._scope = trio.CancelScope()
        if self._cancelled:
            scope.cancel()
        with scope:
            return Ended(
                await sup.invoke(
                    self.tool,
                    self.value,
                    deadline=self.deadline,
                    on_chunk=on_chunk,
                    idempotency_key=self.idempotency_key,
                )
            )
        return Ended(cancelled=True)  # our own scope caught the cancellation

    async def _run_handle(self, sup: Supervisor, on_chunk: ChunkCallback | None) -> Ended:
        handle = self._handle = await sup.start(
            self.tool,
            self.value,
            deadline=self.deadline,
            on_chunk=on_chunk,
            idempotency_key=self.idempotency_key,
        )
        self.mailbox.post(Started(handle.op_id, handle.idempotency_key))
        if self._cancelled:
            return Ended(await handle.cancel())
        try:
            return Ended(await handle.outcome())
        except trio.Cancelled:  # the host is stopping: cancel the call and see it end
            with trio.CancelScope(shield=True):
                self._final = Ended(await handle.cancel())
            raise


# -- the thread --------------------------------------------------------------------------------


class HostThread:
    """The thread that runs ``supervisor`` (see the module docstring)."""

    def __init__(self, supervisor: Supervisor, name: str | None = None) -> None:
        self.supervisor = supervisor
        self.name = name or f"sandvisor-host-{next(_names)}"
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop_event: trio.Event | None = None
        self._lock = threading.Lock()
        self._state = "new"  # new -> starting -> running -> stopping -> stopped
        self._ready_box: Mailbox | None = None
        self._stopped_boxes: list[Mailbox] = []
        self._finished = threading.Event()
        # calls submitted from other threads, and the eventfd that wakes the intake task
        self._submitted: collections.deque[RemoteCall] = collections.deque()
        self._wakeup = -1
        # runner tasks (in the host nursery): one holds the intake, the others run a call
        # or are parked for the next one (a parked task costs less to wake than a spawn)
        self._parked: list[trio.lowlevel.Task] = []
        self._handoff: dict[trio.lowlevel.Task, RemoteCall | None] = {}
        self._intake_held = False

    # -- life ------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self._state

    @property
    def running(self) -> bool:
        return self._state == "running"

    def start(self, ready: Mailbox) -> None:
        """Start the thread; ``ready`` gets `Ready` or `Failed` (then `Stopped`)."""
        with self._lock:
            if self._state != "new":
                raise SupervisorError("a hosted supervisor is started once")
            self._state = "starting"
            self._ready_box = ready
            self._stopped_boxes.append(ready)
            thread = self._thread = threading.Thread(
                target=self._thread_main, name=self.name, daemon=True
            )
        thread.start()

    def stop(self, done: Mailbox | None = None) -> None:
        """Ask the thread to cancel its calls, close the supervisor and end; ``done``
        gets `Stopped` at the end (at once if it has ended). Safe from any thread."""
        if done is not None:
            self.on_stopped(done)
        with self._lock:
            if self._state in ("new", "stopped"):
                if self._state == "new":
                    self._state = "stopped"
                    self._finished.set()
                return
            if self._state == "stopping":
                return
            was = self._state
            self._state = "stopping"
        if was == "running":
            self.call_soon(self._request_stop)
        # "starting": the thread sees the state once the supervisor is up and stops then

    def on_stopped(self, box: Mailbox) -> None:
        """``box`` gets `Stopped` when the thread ends (at once if it has)."""
        with self._lock:
            if not self._finished.is_set():
                self._stopped_boxes.append(box)
                return
        box.post(Stopped())

    def join(self, timeout: float | None = JOIN_TIMEOUT) -> bool:
        """Wait for the thread to end; False if it is still running after ``timeout``."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return self._finished.is_set()

    def close(self, timeout: float | None = JOIN_TIMEOUT) -> None:
        """`stop` and `join` (for synchronous code and interpreter exit)."""
        self.stop()
        if not self.join(timeout):
            log.error("%s did not stop within %s s", self.name, timeout)

    # -- calls -------------------------------------------------------------------------------

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        """Run the quick, non-raising ``fn(*args)`` in the supervisor's thread."""
        token = self._token
        if token is None:
            raise SupervisorError("the hosted supervisor is not running")
        try:
            token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise SupervisorError("the hosted supervisor has stopped") from None

    def submit(self, call: RemoteCall) -> None:
        """Run ``call`` in the host nursery; its mailbox hears how it ends.

        While a runner holds the intake (waits on the eventfd), the eventfd wakes it and
        it runs the call itself, in that scheduling step. While none does (each runs a
        call), a runner that finishes takes the call, and a callback in the trio thread
        hands it to a parked (or new) runner meanwhile."""
        with self._lock:
            if self._state != "running":
                raise SupervisorError(f"the hosted supervisor is {self._state}")
            self._submitted.append(call)
            watched = self._intake_held
        if watched:
            os.eventfd_write(self._wakeup, 1)
        else:
            self.call_soon(self._kick)

    def spawn(self, job: Callable[[Supervisor], Awaitable[None]], box: Mailbox) -> None:
        """Run ``await job(supervisor)`` in the host nursery; ``box`` gets `Ended` with
        the error if it raises (a job reports its own results)."""
        if self._state != "running":
            raise SupervisorError(f"the hosted supervisor is {self._state}")
        self.call_soon(self._spawn_job, job, box)

    async def _runner(self, call: RemoteCall | None = None) -> None:
        """A task of the host nursery: runs calls; between them it takes a call that
        waits, or holds the intake (no runner does), or parks until it is handed one."""
        sup = self.supervisor
        while True:
            while call is None:
                with self._lock:
                    if self._submitted:
                        call = self._take_submitted()
                        break
                    intake = not self._intake_held
                    if intake:
                        self._intake_held = True
                if intake:
                    call = await self._intake()
                elif len(self._parked) >= MAX_PARKED:
                    return  # enough runners wait already
                else:
                    call = await self._park()
            await call.run(sup)
            call = None

    async def _intake(self) -> RemoteCall:
        """Hold the intake until calls are submitted: the first is returned (to run in
        this scheduling step), the others go to parked or new runners. The intake is
        re-armed by whichever runner is free next: no scheduling step to pass it on."""
        while True:
            await trio.lowlevel.wait_readable(self._wakeup)
            try:
                os.eventfd_read(self._wakeup)
            except BlockingIOError:
                continue
            with self._lock:
                if self._submitted:
                    self._intake_held = False
                    return self._take_submitted()

    async def _park(self) -> RemoteCall | None:
        """Wait until `_kick` hands this runner a call (None: look again)."""
        task = trio.lowlevel.current_task()
        self._parked.append(task)

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            if task in self._parked:
                self._parked.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        return self._handoff.pop(task, None)

    def _take_submitted(self) -> RemoteCall:
        """(Lock held, calls waiting.) The first submitted call; the others are handed
        to parked or new runners."""
        call = self._submitted.popleft()
        while self._submitted:
            self._hand(self._submitted.popleft())
        return call

    def _kick(self) -> None:
        """In the trio thread: calls submitted while no runner held the intake."""
        with self._lock:
            while self._submitted:
                self._hand(self._submitted.popleft())

    def _hand(self, call: RemoteCall) -> None:
        """Give ``call`` to a parked runner, or to a new one."""
        if self._parked:
            task = self._parked.pop()
            self._handoff[task] = call
            trio.lowlevel.reschedule(task)
        elif self._nursery is not None:
            self._nursery.start_soon(self._runner, call)
        else:  # the host nursery has ended: the call hears why
            call.mailbox.post(Ended(error=SupervisorError("the hosted supervisor stopped")))

    def _refuse_submitted(self) -> None:
        """After the host nursery: calls submitted too late to run hear why."""
        while self._submitted:
            call = self._submitted.popleft()
            call.mailbox.post(Ended(error=SupervisorError("the hosted supervisor stopped")))

    def start_soon(self, fn: Callable[[], Awaitable[object]]) -> None:
        """From inside the supervisor's thread: run ``fn()`` in the host nursery."""
        if self._nursery is not None:
            self._nursery.start_soon(fn)

    def _spawn_job(self, job: Callable[[Supervisor], Awaitable[None]], box: Mailbox) -> None:
        nursery = self._nursery
        if nursery is None or self._state != "running":
            box.post(Ended(error=SupervisorError("the hosted supervisor is stopping")))
            return

        async def run() -> None:
            try:
                await job(self.supervisor)
            except Exception as exc:
                box.post(Ended(error=exc))

        nursery.start_soon(run)

    # -- inside the thread ---------------------------------------------------------------------

    def _request_stop(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # never leave a caller waiting for Ready
            log.exception("%s failed", self.name)
            self._post_ready(Failed(exc))
        finally:
            with self._lock:
                self._state = "stopped"
                self._finished.set()
                boxes, self._stopped_boxes = self._stopped_boxes, []
            for box in boxes:
                box.post(Stopped())

    def _post_ready(self, item: Ready | Failed) -> None:
        box, self._ready_box = self._ready_box, None
        if box is not None:
            box.post(item)

    async def _main(self) -> None:
        sup = self.supervisor
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            await self._serve(sup)
        finally:
            with self._lock:
                self._state = "stopping"
            self._refuse_submitted()
            os.close(self._wakeup)

    async def _serve(self, sup: Supervisor) -> None:
        stop = self._stop_event = trio.Event()
        entered = False
        try:
            async with sup:
                entered = True
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self._token = trio.lowlevel.current_trio_token()
                    nursery.start_soon(self._runner)
                    with self._lock:
                        if self._state == "starting":
                            self._state = "running"
                        else:  # stop() was called while starting
                            stop.set()
                    self._post_ready(Ready(tuple(sorted(sup.tools))))
                    await stop.wait()
                    # every call still running: a cooperative cancel (shielded inside)
                    nursery.cancel_scope.cancel()
                self._nursery = None
        except Exception as exc:
            if entered:
                raise
            self._post_ready(Failed(exc))  # the supervisor could not start
