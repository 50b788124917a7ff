"""Backstops that take sandboxes down with their host thread or host, whatever bwrap does.

``PR_SET_PDEATHSIG`` (ours, and bwrap's ``--die-with-parent``) is the first line, but
bwrap 0.8.0 arms it in the sandbox's init only at the end of its set-up (bwrap #700): if
bwrap's monitor dies during those milliseconds, the init is orphaned and runs the program
anyway. Measured: a sandbox whose spawning thread exited right after the spawn survived,
now and then, under load. Two backstops close that window:

- `ThreadSandboxes`: every sandbox is recorded on the thread that spawned it; when that
  thread ends, what is still running is killed through its cgroup (a ``threading.local``
  value whose finaliser runs at thread exit). So "a sandbox dies with the thread that
  spawned it" holds exactly, including for a `Spawner` being closed.
- the lifeline: one small ``sh`` per host process, in a session of its own, blocked on a
  pipe whose write end only the host holds. The host's death, however it dies, closes the
  pipe; the lifeline then kills and removes every cgroup named after this host (the
  sandboxes' cgroups say whose they are), so no process and no cgroup is left behind.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .cgroups import CgroupLayout, host_start_time

if TYPE_CHECKING:
    from .handle import Sandbox

# Runs as root; "$1" is this host's cgroup name prefix ([a-z0-9-] only), then the parents.
LIFELINE_SCRIPT = r"""
trap '' INT TERM HUP QUIT PIPE
prefix=$1; shift
while read -r _; do :; done
for round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  left=0
  for parent in "$@"; do
    for d in "$parent/$prefix"*; do
      [ -d "$d" ] || continue
      [ -e "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null
      for p in $(cat "$d/cgroup.procs" 2>/dev/null); do
        kill -CONT "$p"; kill -KILL "$p"
      done 2>/dev/null
      rmdir "$d" 2>/dev/null || left=1
    done
  done
  [ "$left" = 0 ] && exit 0
  sleep 0.05
done
"""

_lock = threading.Lock()
_lifeline: tuple[int, int, int] | None = None  # (host pid, lifeline pid, write end)


def host_prefix() -> str:
    pid = os.getpid()
    return f"sv-{pid}-{host_start_time(pid)}-"


def ensure_lifeline(layout: CgroupLayout) -> None:
    """Start this process's lifeline once (again after a fork: it watches one pid)."""
    global _lifeline
    if not layout.hierarchies:
        return
    with _lock:
        if _lifeline is not None and _lifeline[0] == os.getpid():
            return
        read_end, write_end = os.pipe()  # both close-on-exec: no one else holds the write end
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            pid = os.posix_spawn(
                "/bin/sh",
                [
                    "/bin/sh",
                    "-c",
                    LIFELINE_SCRIPT,
                    "sandvisor-lifeline",
                    host_prefix(),
                    *parents(layout),
                ],
                {"PATH": "/usr/bin:/bin"},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_DUP2, devnull, 1),
                    (os.POSIX_SPAWN_DUP2, devnull, 2),
                ],
                setsid=True,  # a Ctrl-C meant for the host must not reach it
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(devnull)
        _lifeline = (os.getpid(), pid, write_end)


def parents(layout: CgroupLayout) -> Sequence[str]:
    return [h.parent for h in layout.hierarchies]


class _ThreadRecord:
    """Held in a ``threading.local``: finalised when its thread ends.

    Also finalised in every forked child (CPython discards the other threads' states
    after a fork), where it must do nothing: only the process that made it acts."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.sandboxes: list[Sandbox] = []  # strong: a dropped handle is still killed

    def add(self, sandbox: Sandbox) -> None:
        self.sandboxes = [s for s in self.sandboxes if not s.finished]
        self.sandboxes.append(sandbox)

    def __del__(self) -> None:
        if os.getpid() != self.pid:
            return
        for sandbox in self.sandboxes:
            with contextlib.suppress(Exception):
                if sandbox.returncode is None:
                    sandbox.kill("the thread that spawned it ended")


class ThreadSandboxes(threading.local):
    record: _ThreadRecord | None = None


_per_thread = ThreadSandboxes()


def track(sandbox: Sandbox) -> None:
    """Tie ``sandbox`` to the calling thread's lifetime (the thread that spawned it)."""
    if _per_thread.record is None:
        _per_thread.record = _ThreadRecord()
    _per_thread.record.add(sandbox)
