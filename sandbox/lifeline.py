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
- the lifeline: one small ``sh`` per host process, started with its first sandbox, in a
  session of its own, blocked on a pipe whose write end only the host holds. The host's
  death, however it dies, closes the pipe; the lifeline then kills and removes every
  cgroup named after this host (the sandboxes' cgroups say whose they are), so no process
  and no cgroup is left behind. A sandbox without a cgroup (per-process limits) is found
  by its bwrap instead: its argv[0] carries this host's `tag`, and so does the sandbox's
  init, a fork of bwrap that never execs; the lifeline kills every process whose command
  line carries it, and a namespace's init takes everything in it along. A living host
  retires it by writing ``q`` first (then it touches nothing): `retire` does when no
  sandbox is left, and `Spawner.close` calls it, so a supervisor that has closed holds
  nothing of sandvisor open. Between sandboxes it stays, so a host launching one sandbox
  after another pays for it once.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .cgroups import CgroupLayout, detect_layout, own_start_time


def host_prefix() -> str:
    """The start of every cgroup name of this host, whatever its lifeline generation."""
    return f"sv-{os.getpid()}-{own_start_time()}-"


if TYPE_CHECKING:
    from .handle import Sandbox

#: bwrap's argv[0] in a sandbox without a cgroup: this prefix, then the host's tag.
TAG_PREFIX = "sandvisor-bwrap:"

# Runs as the host's user; "$1" is this host's cgroup name prefix ([a-z0-9-] only), "$2"
# its tag ([0-9a-f]), then the parents. "q" on the pipe: retired by a living host, exit
# quietly. EOF without it: the host died. The grep pattern's "[:]" keeps grep from
# finding itself (its own command line holds "[:]", not ":"). It looks for a second at
# least: the host's fds close before its children get their death signal, and a bwrap
# may clone its child in between (a child found in no cgroup until then).
LIFELINE_SCRIPT = r"""
trap '' INT TERM HUP QUIT PIPE
prefix=$1; tag=$2; shift 2
while read -r line; do [ "$line" = q ] && exit 0; done
for round in $(seq 40); do
  left=0
  for f in $(grep -la "sandvisor-bwrap[:]$tag" /proc/[0-9]*/cmdline 2>/dev/null); do
    p=${f#/proc/}; p=${p%/cmdline}
    kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null && left=1
  done
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
  [ "$left" = 0 ] && [ "$round" -ge 20 ] && exit 0
  sleep 0.05
done
"""

_lock = threading.Lock()
#: How long `retire` waits for the lifeline it told to exit, to reap it.
RETIRE_WAIT = 0.2


class _Lifeline:
    """This process's current lifeline, how many sandboxes rely on it (by their cgroups,
    or by their tag), and the ones retired (closed when their last sandbox went; reaped
    once they exit)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.tag = os.urandom(8).hex()  # this host's, whatever its lifeline generation
        self.generation = 0
        self.users = 0
        self.pid: int | None = None
        self.write_end: int | None = None
        self.retired: list[int] = []


_current = _Lifeline()


def acquire(layout: CgroupLayout) -> int:
    """Count one more sandbox of this host (a cgroup set, or a sandbox without one),
    starting the lifeline if none runs; the generation to name a cgroup with (which
    lifeline watched over it)."""
    with _lock:
        state = _mine()
        _reap(state)
        if state.pid is None:
            state.generation += 1
            state.pid, state.write_end = _start(layout, host_prefix(), state.tag)
        state.users += 1
        return state.generation


def tag() -> str:
    """bwrap's argv[0] for a sandbox of this host without a cgroup: what the lifeline
    looks for in command lines once the host is gone."""
    with _lock:
        return TAG_PREFIX + _mine().tag


def _mine() -> _Lifeline:
    global _current
    if _current.owner != os.getpid():
        _current = _Lifeline()  # a forked child: the parent's lifeline is not ours
    return _current


def users() -> int:
    """How many sandbox cgroups of this host rely on the lifeline now."""
    with _lock:
        return _current.users if _current.owner == os.getpid() else 0


def release() -> None:
    """One sandbox cgroup of this host is gone (the lifeline stays for the next one)."""
    with _lock:
        if _current.owner == os.getpid() and _current.users > 0:
            _current.users -= 1


def retire() -> bool:
    """End the lifeline if this host has no sandbox left; True if none runs afterwards."""
    with _lock:
        if _current.owner != os.getpid():
            return True
        if _current.users > 0:
            return False
        if _current.write_end is not None:
            with contextlib.suppress(OSError):
                os.write(_current.write_end, b"q\n")  # a living host: exit, touch nothing
            os.close(_current.write_end)
            if _current.pid is not None:
                _current.retired.append(_current.pid)
            _current.pid = _current.write_end = None
        _reap(_current, wait=RETIRE_WAIT)
        return True


def _reap(state: _Lifeline, wait: float = 0.0) -> None:
    """Reap the retired lifelines that exited; ``wait``: seconds to give them first
    (one told "q" exits within a millisecond or two; left unreaped it would stay a
    zombie child of the host until the next sandbox)."""
    deadline = time.monotonic() + wait
    while True:
        for pid in list(state.retired):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                state.retired.remove(pid)
        if not state.retired or time.monotonic() >= deadline:
            return
        time.sleep(0.001)


def _start(layout: CgroupLayout, prefix: str, tag: str) -> tuple[int, int]:
    read_end, write_end = os.pipe()  # both close-on-exec: no one else holds the write end
    devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        pid = os.posix_spawn(
            "/bin/sh",
            ["/bin/sh", "-c", LIFELINE_SCRIPT, "sandvisor-lifeline", prefix, tag, *parents(layout)],
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
    return pid, write_end


def parents(layout: CgroupLayout) -> Sequence[str]:
    """The parents to sweep: the layout's, and this machine's (a test may launch with a
    layout of its own; the lifeline serves every sandbox of the host)."""
    found = [h.parent for h in layout.hierarchies]
    found += [h.parent for h in detect_layout().hierarchies if h.parent not in found]
    return found


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
