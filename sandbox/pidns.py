"""A sandbox's pid namespace, seen from the host: what finds and proves its processes
when there is no cgroup to list them and no uid of its own to scan for.

Every process of a sandbox lives in the pid namespace bwrap made for it (nested ones are
refused: ``--disable-userns`` and the seccomp filter), and none can leave it. When the
namespace's init dies the kernel kills everything else in it before the init is reaped,
so the init's pidfd says when nothing is left. While the init lives, an fd on its
namespace pins the namespace (its inode number cannot be reused by another one), and
the processes whose ``/proc/PID/ns/pid`` is that inode are exactly the sandbox's.
"""

from __future__ import annotations

import contextlib
import os

from .fdwait import wait_readable


def inode_of(pid: int) -> int | None:
    """The inode of ``pid``'s pid namespace, or None if it cannot be read (gone)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def parent_of(pid: int) -> int | None:
    """``pid``'s parent, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat.rpartition(b")")[2].split()[1])


def children(pid: int) -> list[int]:
    """The children of single-threaded ``pid`` (bwrap), as /proc lists them."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(child) for child in f.read().split()]
    except OSError:
        return []


def pin(pid: int, pidfd: int, expected: int | None) -> int | None:
    """An fd on the pid namespace of ``pid`` (whose ``pidfd`` the caller holds), or None.
    It is checked to be the namespace of that very process: its inode is ``expected``
    (bwrap's word), or, without one, the process still runs after the open (so the pid
    was not reused in between), and never the host's own namespace."""
    try:
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    same = os.fstat(fd).st_ino == expected if expected is not None else alive(pidfd)
    if not same or os.fstat(fd).st_ino == inode_of(os.getpid()):  # never the host's own
        os.close(fd)
        return None
    return fd


def alive(pidfd: int) -> bool:
    """The process of ``pidfd`` has not exited (a pidfd reads as ready once it has)."""
    return not wait_readable(pidfd, 0)


def members(ns_fd: int) -> set[int]:
    """Every process in the pid namespace held by ``ns_fd`` (one ``stat`` per process of
    the machine, about a millisecond for a few hundred)."""
    held = os.fstat(ns_fd)
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                st = os.stat(f"/proc/{entry.name}/ns/pid")
                if st.st_ino == held.st_ino and st.st_dev == held.st_dev:
                    found.add(int(entry.name))
    return found
