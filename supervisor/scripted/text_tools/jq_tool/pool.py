"""The jq engines of a host: started on demand, reused, replaced when killed.

`JqEnginePool` hands one idle engine to each call (the most recently used first: its
compiled filters are warm) and starts another while fewer than ``max_engines`` exist,
so concurrent callers (``execute_sync`` from a thread pool, several event loops) do not
queue behind one child; past that they wait for one, until their deadline.

`default_pool` is the host's pool, used by the ``jq`` command. It is closed at exit
(its children are killed and reaped), and a forked host starts afresh without touching
its parent's children. `configure` replaces its limits.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
import weakref
from collections.abc import Awaitable

from supervisor._loop import in_event_loop
from supervisor.scripted.contract import CommandResult, execution_deadline

from .calls import Call
from .engine import EngineFailure, JqEngine
from .limits import STOPPED_STATUS, JqLimits, mib
from .spawner import host_spawner
from .wire import request_frame


class JqEnginePool:
    """Engines for jq calls; thread-safe."""

    def __init__(self, limits: JqLimits | None = None) -> None:
        self.limits = limits or JqLimits()
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[JqEngine] = []
        self._busy: set[JqEngine] = set()
        self._starting = 0
        self._closed = False
        self._reapers: set[threading.Thread] = set()
        #: engines of calls that ended without their reply where no lock may be taken
        #: (see `abandon`), for the janitor thread; None ends it
        self._abandoned: queue.SimpleQueue[JqEngine | None] = queue.SimpleQueue()
        self._janitor: threading.Thread | None = None

    # ------------------------------------------------------------------ the command

    def jq(self, args: list[str], stdin: str | None) -> CommandResult | Awaitable[CommandResult]:
        """The jq command on an engine; an awaitable when called inside an event loop
        and the answer is not there at once (see ``calls.py``)."""
        start = time.monotonic()
        deadline = execution_deadline.get()
        if deadline is None:
            deadline = start + self.limits.default_timeout
        request = request_frame(args, stdin)
        if len(request) > self.limits.memory_bytes:
            text = f"jq: error: input too large for the jq engine ({mib(len(request))})\n"
            return CommandResult("", text, STOPPED_STATUS)
        call = Call(self, request, start, deadline)
        result = call.try_now()
        if result is not None:
            return result
        if not in_event_loop():
            return call.finish_sync()
        self._start_janitor()
        pending = call.finish_async()
        weakref.finalize(pending, call.abandon)  # dropped unawaited: no engine stays busy
        return pending

    # ------------------------------------------------------------------ engines

    def take(self) -> JqEngine | None:
        """An idle engine, or a new one if there is room; None when all are busy."""
        with self._cond:
            if self._closed:
                raise EngineFailure("jq: error: the jq engines are shut down\n")
            while self._idle:
                engine = self._idle.pop()
                if engine.alive():
                    self._busy.add(engine)
                    return engine
                engine.kill()  # died while idle (killed from outside): reap it
            if len(self._busy) + self._starting >= self.limits.max_engines:
                return None
            self._starting += 1
        try:
            engine = JqEngine(self.limits, host_spawner())
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify()
        with self._cond:
            self._busy.add(engine)
            return engine

    def take_waiting(self, deadline: float) -> JqEngine | None:
        """`take`, waiting for an engine to be handed back; None at the deadline."""
        while True:
            engine = self.take()
            if engine is not None:
                return engine
            with self._cond:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if len(self._busy) + self._starting >= self.limits.max_engines:
                    self._cond.wait(left)

    def give_back(self, engine: JqEngine) -> None:
        with self._cond:
            self._busy.discard(engine)
            if not self._closed:
                self._idle.append(engine)
                self._cond.notify()
                return
        engine.kill()

    def discard(self, engine: JqEngine) -> None:
        """Kill and reap an engine whose state is unknown; its slot is free again."""
        engine.kill()
        with self._cond:
            self._busy.discard(engine)
            self._cond.notify()

    def abandon(self, engine: JqEngine) -> None:
        """Kill an engine whose call was dropped, from where no lock may be taken: a
        ``weakref.finalize`` or a coroutine closed by the garbage collector, which may run
        inside a section of this same thread that holds the pool's (non-reentrant) lock.
        The signal takes no lock (``Popen.poll`` only tries its own) and a
        ``SimpleQueue.put`` is reentrant: the janitor thread reaps it and frees its slot."""
        engine.stop()
        self._abandoned.put(engine)

    def _start_janitor(self) -> None:
        with self._cond:
            if self._janitor is not None or self._closed:
                return
            self._janitor = threading.Thread(target=self._clean, name="jq-janitor", daemon=True)
        self._janitor.start()

    def _clean(self) -> None:
        while (engine := self._abandoned.get()) is not None:
            self.discard(engine)

    def discard_soon(self, engine: JqEngine) -> None:
        """Kill an engine now and reap it on a thread of the pool: the caller does not
        wait for its memory to be torn down; its slot is free once it is reaped."""
        engine.stop()
        reaper = threading.Thread(target=self._reap, args=(engine,), name="jq-reap", daemon=True)
        with self._cond:
            self._reapers.add(reaper)
        reaper.start()

    def _reap(self, engine: JqEngine) -> None:
        try:
            self.discard(engine)
        finally:
            with self._cond:
                self._reapers.discard(threading.current_thread())

    def engines(self) -> list[int]:
        """The pids of the children not yet reaped (idle, busy, being reaped)."""
        with self._cond:
            return [e.pid for e in (*self._idle, *self._busy) if e.proc.poll() is None]

    def close(self) -> None:
        """Kill the idle children now, the busy ones when their call ends."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for engine in idle:
            engine.kill()
        with self._cond:
            reapers = list(self._reapers)
            janitor, self._janitor = self._janitor, None
        if janitor is not None:  # it reaps what was abandoned before it stops
            self._abandoned.put(None)
            reapers.append(janitor)
        for reaper in reapers:
            reaper.join()

    def forget(self) -> None:
        """In a forked child: close the inherited pipe ends, leave the processes alone
        (they are the parent's)."""
        for engine in (*self._idle, *self._busy):
            engine.forget()
        self._idle, self._busy = [], set()
        self._closed = True


_default: JqEnginePool | None = None
_default_lock = threading.Lock()


def default_pool() -> JqEnginePool:
    """The host's pool (started on first use)."""
    global _default
    pool = _default
    if pool is not None:
        return pool
    with _default_lock:
        if _default is None:
            _default = JqEnginePool()
        return _default


def configure(limits: JqLimits) -> None:
    """Use ``limits`` from now on: the current children finish their calls and go."""
    global _default
    with _default_lock:
        old, _default = _default, JqEnginePool(limits)
    if old is not None:
        old.close()


def jq(args: list[str], stdin: str | None) -> CommandResult | Awaitable[CommandResult]:
    """The ``jq`` command of the scripted shell, on the host's engines."""
    pool = _default if _default is not None else default_pool()
    return pool.jq(args, stdin)


def _close_at_exit() -> None:
    pool = _default
    if pool is not None:
        pool.close()
    host_spawner().stop()


def _after_fork_in_child() -> None:
    global _default, _default_lock
    _default_lock = threading.Lock()
    pool, _default = _default, None
    if pool is not None:
        pool.forget()


atexit.register(_close_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
