"""The CPU priority of a node's actor and its sandboxes.

Ray starts its worker processes at nice 15 (``RAY_worker_niceness``), the node's actor
with them, and every sandbox the actor forks inherits it: on a busy node they yield the
CPU to anything at the normal priority. `RaySupervisor(niceness=N)` has each actor set
its own niceness at start, before its supervisor starts any thread or sandbox; lowering
the value below what Ray gave needs ``CAP_SYS_NICE`` (or a ``RLIMIT_NICE``) on the node,
and without it the node is refused with the fix. Nice is a per-thread value on Linux, so
every thread of the process is set (threads and processes started later inherit it).
"""

from __future__ import annotations

import os

from supervisor.cluster.errors import NodeUnfit

#: Ray's setting of its workers' niceness (15 when unset), read by ``ray start``.
RAY_NICENESS = "RAY_worker_niceness"


def niceness() -> int:
    """This thread's nice value (the actor's loop thread, whose children the sandboxes
    are once its supervisor's threads have inherited it)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def check_niceness(value: object) -> int | None:
    """``niceness`` as `RaySupervisor` takes it: None (Ray's) or an int in -20..19."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -20 <= value <= 19:
        raise ValueError(f"niceness must be None or an int from -20 to 19, not {value!r}")
    return value


def set_niceness(value: int, label: str) -> None:
    """Every thread of this process at nice ``value``; a node that may not raises
    `NodeUnfit` naming it, with the fix."""
    was = niceness()
    for _ in range(3):  # a thread started during a pass may have copied the old value
        pending = False
        for tid in _threads():
            try:
                if os.getpriority(os.PRIO_PROCESS, tid) != value:
                    os.setpriority(os.PRIO_PROCESS, tid, value)
                    pending = True
            except ProcessLookupError:
                continue  # the thread ended meanwhile
            except OSError as exc:
                raise NodeUnfit(
                    f"node {label} cannot run its actor at nice {value} (Ray started it at "
                    f"nice {was}): {exc.strerror}; set {RAY_NICENESS}={value} in the "
                    f"environment of `ray start` on every node instead, or give niceness=None"
                ) from None
        if not pending:
            return


def advice(label: str, value: int) -> str | None:
    """What to say of a node whose actor runs at nice ``value`` when no niceness was
    asked for: nothing at the normal priority or better, else the fix in one line."""
    if value <= 0:
        return None
    return (
        f"node {label}: its actor and every sandbox run at nice {value} (Ray's "
        f"{RAY_NICENESS}, 15 unless set) and get little CPU on a busy node; set "
        f"{RAY_NICENESS}=0 for `ray start` on every node, or give RaySupervisor(niceness=0)"
    )


def _threads() -> list[int]:
    return [int(tid) for tid in os.listdir("/proc/self/task")]
