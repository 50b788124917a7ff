"""What the "nothing left" checks count as a live process and as a leaked fd (a module of
its own name: test directories share one import namespace)."""

from __future__ import annotations

import os
from collections.abc import Iterable

#: the kernel's flag of a task in do_exit (include/linux/sched.h)
PF_EXITING = 0x4
#: SIGKILL's bit in /proc/PID/status's masks of pending signals
SIGKILL_BIT = 1 << (9 - 1)


def dying(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, exiting, or has a SIGKILL pending: past the
    point where it runs any code of its own. A pid namespace's init that was SIGKILLed
    with the rest leaves its cgroup and then stays listed, sleeping, while the kernel
    reaps the namespace's other processes: a loaded host showed a fork bomb's one 0.16 s
    after its supervisor closed (the cgroup already empty and removed)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
        with open(f"/proc/{pid}/status") as status:
            pending = [line.split()[1] for line in status if line.startswith(("SigPnd", "ShdPnd"))]
    except OSError:
        return True
    fields = text[text.rindex(")") + 2 :].split()  # after the command's name
    state, flags = fields[0], int(fields[6])
    killed = any(int(mask, 16) & SIGKILL_BIT for mask in pending)
    return state in "ZXx" or bool(flags & PF_EXITING) or killed


def alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run code of their own."""
    return [pid for pid in pids if not dying(pid)]


def fd_table() -> dict[int, str]:
    """This process's open fds and what they point at."""
    table = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            table[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the directory's own fd, closed meanwhile
    return table


def fds_opened(before: dict[int, str], after: dict[int, str] | None = None) -> dict[int, str]:
    """Fds open now (or in ``after``) that were not before. Fds closed meanwhile are fine:
    an earlier test's cleanup, finishing in its daemon thread on a loaded host, closes
    its own; so is the scripted budget's /proc/self/statm, opened once and kept for the
    process's life by the first script that runs in it."""
    statm = f"/proc/{os.getpid()}/statm"
    now = fd_table() if after is None else after
    return {fd: t for fd, t in now.items() if before.get(fd) != t and t != statm}
