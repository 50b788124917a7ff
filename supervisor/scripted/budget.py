"""What one execution may spend: time (fuel, checked against its deadline) and memory.

A script runs in the host's process, so no signal can stop a loop that never looks at the
clock. Every loop that can run long (parsing, expansion, arithmetic, the text tools, regex
matching) spends *fuel*: ``spend(n)`` is one subtraction from a module-level counter, and
once every ``FUEL_CHECK`` units it asks the current execution's ``Budget`` to check its
deadlines (a unit is about one step of Python work, so the clock is read every few
milliseconds at most). The budget is found through a context variable that the engine
sets for the duration of a run, so code deep in a text tool needs no handle on it.

Memory is one byte budget per execution (``ExecutionLimits.max_memory_bytes``): what the
script holds (variables and arrays) is *charged* as it is stored and released as it is
dropped; what it is about to build (an expansion, a pipe, a tool's output, an arithmetic
or parse work list) is checked with ``need`` against what is left. Past the budget the
execution ends with ``resource limit exceeded: memory limit exceeded (N bytes)``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar

from .errors import LimitExceeded

#: fuel units between two looks at the clock
FUEL_CHECK = 4096


class MemoryLimit(LimitExceeded):
    def __init__(self, limit: int) -> None:
        super().__init__(f"memory limit exceeded ({limit} bytes)")


def resident_bytes() -> int:
    """This process's resident memory (``/proc/self/statm``, kept open; 0 where there is
    none)."""
    try:
        fd = _statm[0]
        if fd < 0:
            fd = _open_statm()
        return int(os.pread(fd, 128, 0).split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _open_statm() -> int:
    """Open it once: two threads that both found it closed keep one fd, not two."""
    with _statm_lock:
        if _statm[0] < 0:
            _statm[0] = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        return _statm[0]


#: the open /proc/self/statm (-1: not yet); a forked child opens its own
_statm = [-1]
_statm_lock = threading.Lock()


def _forget_statm() -> None:
    """In a forked child: the inherited fd reads the parent's numbers. (A lock held by
    another thread at the fork stays held in the child: it gets a new one.)"""
    global _statm_lock
    _statm_lock = threading.Lock()
    if _statm[0] >= 0:
        with contextlib.suppress(OSError):
            os.close(_statm[0])
    _statm[0] = -1


os.register_at_fork(after_in_child=_forget_statm)


_PAGE = os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    """This process's peak resident memory (never less than its resident memory)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Budget:
    """The time and memory of one execution (shared by its subshells and jobs).

    Besides what is charged, the process's resident memory is sampled (``check``, every
    few milliseconds of fuel and every few commands): growth past the budget since the
    execution began ends it, whatever built it. In a process that runs several
    executions at once the growth is theirs together (it fails closed); a child process
    of a ``ScriptPool`` runs one at a time."""

    __slots__ = ("base", "check_time", "expire", "held", "limit", "stop_at")

    def __init__(
        self,
        check_time: Callable[[], None],
        limit: int,
        stop_at: Callable[[], float] = lambda: float("inf"),
        expire: Callable[[], None] | None = None,
    ) -> None:
        self.check_time = check_time
        #: raises now what the deadline will raise (a step that cannot end before it)
        self.expire = expire or check_time
        self.limit = limit
        self.held = 0
        #: when the execution stops (``time.monotonic``), for a wait that takes a timeout
        self.stop_at = stop_at
        self.base = resident_bytes()

    def check(self) -> None:
        """The deadline, then the process's memory growth."""
        self.check_time()
        self.check_memory()

    def check_memory(self) -> None:
        # the peak (one cheap system call) bounds the current size: read /proc only when
        # the peak says the growth may be past the budget
        if peak_bytes() - self.base <= self.limit:
            return
        if resident_bytes() - self.base > self.limit:
            raise MemoryLimit(self.limit)

    def charge(self, nbytes: int) -> None:
        """Bytes the script now holds (negative: released)."""
        held = self.held = self.held + nbytes
        if nbytes > 0 and held > self.limit:
            raise MemoryLimit(self.limit)

    def need(self, nbytes: int) -> None:
        """Bytes about to be built on top of what is held (checked, not kept)."""
        if self.held + nbytes > self.limit:
            raise MemoryLimit(self.limit)


current_budget: ContextVar[Budget | None] = ContextVar("current_budget", default=None)

_fuel = [FUEL_CHECK]


def spend(units: int = 1) -> None:
    """Spend fuel; every ``FUEL_CHECK`` units, check the current execution's deadline
    (raises ``LimitExceeded`` or ``RequestTimeout`` past it)."""
    left = _fuel[0] - units
    if left > 0:
        _fuel[0] = left
        return
    _fuel[0] = FUEL_CHECK
    budget = current_budget.get()
    if budget is not None:
        budget.check()


def check_time() -> None:
    """Check the deadline now (before a step that cannot be interrupted)."""
    budget = current_budget.get()
    if budget is not None:
        budget.check_time()


def expire() -> None:
    """Raise now what the current execution's deadline will raise: for a step that
    cannot be interrupted and would not end before it. Nothing outside an execution."""
    budget = current_budget.get()
    if budget is not None:
        budget.expire()


def seconds_left() -> float | None:
    """Seconds until the current execution stops (at least a millisecond); None outside
    an execution or without a deadline."""
    budget = current_budget.get()
    if budget is None:
        return None
    left = budget.stop_at() - time.monotonic()
    return None if left == float("inf") else max(left, 0.001)


def need(nbytes: int) -> None:
    """``Budget.need`` of the current execution; nothing outside one."""
    budget = current_budget.get()
    if budget is not None:
        budget.need(nbytes)
