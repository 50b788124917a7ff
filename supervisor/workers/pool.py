"""The pool: pre-warmed sessions, fair FIFO hand-out of call slots, replacement, retirement.

Every session lives in the pool's nursery. A slot is room for one more call in flight on
a session. Who wants one is a `SlotTaker`: a call (`supervisor.workers.calls.Call`) takes
a free slot at once (`give_now`) or waits in line (`wait_in_line`) and is handed the next
slot that frees, in the step that frees it (`release`: the call is dispatched there and
then, no task is woken for it); a task can also `acquire` a slot and `release` it. Slots
are handed strictly in arrival order; a call's wait is bounded by its own timer, a
task's by its deadline (`WorkerUnavailable`). A session that dies is dropped at once and
replaced; one that used its call budget (``max_calls``, the grant's per-session budget)
or nears the end of its lifetime is retired: it takes no new call and is closed
gracefully once idle.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Protocol

import anyio
import anyio.abc

from supervisor._loop import Signal, current_loop
from supervisor.workers.session import Session, SessionStartError

log = logging.getLogger(__name__)

#: Back-off after a session failed to start: doubles up to the maximum.
START_BACKOFF = 0.05
START_BACKOFF_MAX = 2.0
#: Ended sessions kept in `Pool.history` (each holds at most its bounded diagnostics).
HISTORY = 32


class WorkerUnavailable(Exception):
    """No worker could take the call in time (or workers fail to start); says why."""


class SlotTaker(Protocol):
    """Who waits in line for a slot."""

    @property
    def waiting(self) -> bool:
        """Still in line (one that is not is skipped)."""
        ...

    def take_slot(self, session: Session, now: float) -> bool:
        """Use a slot of ``session`` (``now``: the loop's clock); False if it did not
        (the slot goes on)."""
        ...

    def fail_slot(self, why: str) -> None:
        """No slot will come (no worker can start, or the pool closes)."""
        ...


class _Waiter:
    """A task waiting in `Pool.acquire`."""

    __slots__ = ("error", "event", "session")

    def __init__(self, event: Signal) -> None:
        self.event = event
        self.session: Session | None = None
        self.error: str | None = None

    @property
    def waiting(self) -> bool:
        return self.session is None and self.error is None

    def take_slot(self, session: Session, now: float) -> bool:
        self.session = session
        self.event.set()
        return True

    def fail_slot(self, why: str) -> None:
        self.error = why
        self.event.set()


class Pool:
    """Sessions made by ``factory``; between ``min_size`` and ``size`` of them alive."""

    def __init__(
        self,
        factory: Callable[[Callable[[Session], None]], Session],
        *,
        size: int,
        min_size: int,
        max_in_flight: int,
        max_calls: int,
        retire_margin: float = 0.0,
    ) -> None:
        if not 0 <= min_size <= size or size < 1:
            raise ValueError("pool sizes must satisfy 0 <= min_size <= size and size >= 1")
        self._factory = factory
        self.size = size
        self.min_size = min_size
        self.max_in_flight = max_in_flight
        self.max_calls = max_calls
        self.retire_margin = retire_margin
        self._nursery: anyio.abc.TaskGroup | None = None
        self._sessions: set[Session] = set()  # starting or alive, not retiring
        self._starting = 0
        self._retiring: set[Session] = set()
        self._load: dict[Session, int] = {}  # slots held by callers
        self._leases: dict[Session, int] = {}  # slots ever handed out
        self._free: deque[Session] = deque()  # one entry per free slot (may be stale)
        self._waiters: deque[SlotTaker] = deque()
        self._failures = 0
        self._last_error: str | None = None
        self._closing = False
        self.started_sessions = 0
        self.replaced_sessions = 0
        #: The last sessions that ended (reaped), newest last: why they ended, how.
        self.history: deque[Session] = deque(maxlen=HISTORY)
        self._now: Callable[[], float] = anyio.current_time  # the loop's own, once running
        self._event: Callable[[], Signal] = anyio.Event

    # -- life -----------------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[Pool] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Pre-warm ``min_size`` sessions (at least one must start), then keep the pool
        until cancelled. Raises `SessionStartError` if the first sessions cannot start."""
        loop = current_loop()
        self._now, self._event = loop.now, loop.event
        async with anyio.create_task_group() as nursery:
            self._nursery = nursery
            if self.min_size:
                async with anyio.create_task_group() as warm:
                    for _ in range(self.min_size):
                        warm.start_soon(self._start_one, self._new_session(), True)
                if not self.alive:
                    raise SessionStartError(self._last_error or "no session started")
            task_status.started(self)
            await anyio.sleep_forever()

    async def aclose(self) -> None:
        """Refuse new calls, then close every session (gracefully where idle)."""
        self._closing = True
        self._fail_waiters("the supervisor is shutting down")
        sessions = list(self._sessions | self._retiring)
        async with anyio.create_task_group() as nursery:
            for session in sessions:
                nursery.start_soon(session.close)

    @property
    def alive(self) -> int:
        return sum(1 for s in self._sessions if s.usable)

    @property
    def sessions(self) -> tuple[Session, ...]:
        return tuple(self._sessions | self._retiring)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    # -- slots ----------------------------------------------------------------------------

    def take(self, now: float) -> Session | None:
        """A free slot at once, if nobody waits for one (FIFO), else None: then wait in
        line with `acquire`. ``now`` is the loop's clock."""
        if self._closing or self._waiters or not self._free:
            return None
        return self._take_free(now)

    def give_now(self, taker: SlotTaker, now: float) -> bool:
        """Hand ``taker`` a free slot at once if nobody waits in line; True if it took
        one (False: it is still waiting, or it no longer wants one)."""
        if self._closing or self._waiters:
            return False
        while taker.waiting:
            session = self._take_free(now)
            if session is None:
                return False
            if taker.take_slot(session, now):
                return True
            self.release(session, now)  # not used: free again (or retired)
        return False

    def wait_in_line(self, taker: SlotTaker) -> None:
        """Queue ``taker`` for the next slot that frees (more sessions start if needed)."""
        if self._closing:
            taker.fail_slot("the supervisor is shutting down")
            return
        self._waiters.append(taker)
        self._grow()

    def withdraw(self, taker: SlotTaker) -> None:
        """``taker`` leaves the line (it gave up, or it was resolved otherwise)."""
        with _suppress_value_error():
            self._waiters.remove(taker)

    def unavailable(self) -> str:
        """Why a wait in line ran out: one line for the caller."""
        return (
            f"no worker became free in time ({len(self._waiters)} calls waiting, "
            f"{self.alive} of {self.size} sessions alive)"
            + (f"; last start failure: {self._last_error}" if self._last_error else "")
        )

    async def acquire(self, deadline: float = math.inf) -> Session:
        """One call slot, in FIFO order; `WorkerUnavailable` at ``deadline``."""
        if self._closing:
            raise WorkerUnavailable("the supervisor is shutting down")
        if not self._waiters:
            session = self._take_free(self._now())
            if session is not None:
                return session
        waiter = _Waiter(self._event())
        self.wait_in_line(waiter)
        try:
            with anyio.CancelScope(deadline=deadline):
                await waiter.event.wait()
        except BaseException:
            if waiter.session is not None:
                self.release(waiter.session)
            else:
                self.withdraw(waiter)
            waiter.error = "gave up"
            raise
        if waiter.session is not None:
            return waiter.session
        if waiter.error is not None:  # failed by the pool (start failures, shutdown)
            raise WorkerUnavailable(waiter.error)
        self.withdraw(waiter)
        waiter.error = "timed out"
        raise WorkerUnavailable(self.unavailable())

    def release(self, session: Session, now: float | None = None) -> None:
        """Give a slot back; retire or replace the session as needed. ``now``: the loop's
        clock, if the caller has read it already."""
        self._load[session] = self._load.get(session, 1) - 1
        if session.state != "ready" or session in self._retiring:  # dead, failing, closing
            self._maybe_close_retired(session)
            return
        if now is None:
            now = self._now()
        if (
            self._leases.get(session, 0) >= self.max_calls
            or now >= session.expires_at - self.retire_margin
        ):
            self._retire(session)
            return
        self._offer(session, now)

    def retire(self, session: Session) -> None:
        """Take a session out of rotation (e.g. it refused a call); closed once idle."""
        if session in self._sessions:
            self._retire(session)

    def _take_free(self, now: float) -> Session | None:
        free = self._free
        while free:
            session = free.popleft()
            if session.state != "ready" or session not in self._sessions:
                continue
            if now >= session.expires_at - self.retire_margin:
                self._retire(session)
                continue
            self._lease(session)
            return session
        return None

    def _lease(self, session: Session) -> None:
        self._load[session] = self._load.get(session, 0) + 1
        leases = self._leases[session] = self._leases.get(session, 0) + 1
        if leases >= self.max_calls:
            self._retire(session)

    def _offer(self, session: Session, now: float) -> None:
        """One free slot of ``session``: to the first taker in line (in this step), else
        to the free list."""
        waiters = self._waiters
        while waiters:
            taker = waiters.popleft()
            if not taker.waiting:
                continue
            self._lease(session)
            if taker.take_slot(session, now):
                return
            self._load[session] -= 1  # not used
            if taker.waiting:  # the session could not take it: the taker keeps its place
                waiters.appendleft(taker)
            if session.state != "ready" or session not in self._sessions:
                self._maybe_close_retired(session)
                return
        self._free.append(session)

    def _retire(self, session: Session) -> None:
        self._sessions.discard(session)
        self._retiring.add(session)
        self._grow()
        self._maybe_close_retired(session)

    def _maybe_close_retired(self, session: Session) -> None:
        if self._load.get(session, 0) > 0:
            return
        self._forget(session)
        if not session.dead and self._nursery is not None:
            self._nursery.start_soon(session.close)

    def _forget(self, session: Session) -> None:
        self._retiring.discard(session)
        self._sessions.discard(session)
        self._load.pop(session, None)
        self._leases.pop(session, None)

    # -- sessions -----------------------------------------------------------------------

    def _on_dead(self, session: Session) -> None:
        """Called synchronously when a session stops taking calls (killed, or closing):
        drop it, replace it if needed."""
        was_member = session in self._sessions or session in self._retiring
        self._sessions.discard(session)
        if self._load.get(session, 0) == 0:
            self._forget(session)
        if was_member and session.state == "dead":
            self.replaced_sessions += 1
        self._grow()

    def _grow(self) -> None:
        """Start sessions up to the minimum, and more (up to ``size``) for waiters."""
        live = len(self._sessions)
        if self._closing or self._nursery is None or live >= self.size:
            return
        want = max(self.min_size, min(self.size, live - self._starting + self._demand()))
        for _ in range(min(want, self.size) - live):
            self._nursery.start_soon(self._start_one, self._new_session(), False)

    def _demand(self) -> int:
        """Sessions the waiters need beyond the free slots."""
        waiting = len(self._waiters)
        return math.ceil(waiting / self.max_in_flight) if waiting else 0

    def _new_session(self) -> Session:
        """A session counted (live, starting) in the step that decides to start it, so
        that the next `_grow` before its task runs does not start another for the same
        demand (three waiters in a row made four sessions of a pool of three)."""
        session = self._factory(self._on_dead)
        self._sessions.add(session)
        self._starting += 1
        self.started_sessions += 1
        return session

    async def _start_one(self, session: Session, warming: bool) -> None:
        assert self._nursery is not None
        try:
            await self._nursery.start(self._serve, session)
        except SessionStartError as exc:
            self._sessions.discard(session)
            if self._closing:
                return  # killed by the shutdown while it started
            self._failures += 1
            self._last_error = str(exc)
            log.warning("a worker failed to start: %s", exc)
            if not self.alive:
                self._fail_waiters(f"workers fail to start: {exc}")
            if not warming:
                await anyio.sleep(min(START_BACKOFF * 2 ** (self._failures - 1), START_BACKOFF_MAX))
                self._grow()
            return
        finally:
            self._starting -= 1
        self._failures = 0
        if session.dead:
            return
        if self._closing:
            await session.close()
            return
        for _ in range(self.max_in_flight):
            if session not in self._sessions:
                break
            self._offer(session, self._now())

    async def _serve(
        self,
        session: Session,
        *,
        task_status: anyio.abc.TaskStatus[Session] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            await session.run(task_status=task_status)
        finally:
            self.history.append(session)

    def _fail_waiters(self, why: str) -> None:
        waiters, self._waiters = self._waiters, deque()
        for taker in waiters:
            if taker.waiting:
                taker.fail_slot(why)


class _suppress_value_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, value: object, tb: object) -> bool:
        return kind is ValueError
