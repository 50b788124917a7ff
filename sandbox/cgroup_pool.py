"""Warm cgroups: a sandbox's cgroups made before it is asked for, each used once.

Making a sandbox's cgroups (a directory per hierarchy, its limits, the join files opened)
is the largest part of `prepare_launch` (0.3-0.45 ms here). So the next set is made while
the host waits anyway (`run` while bwrap starts; a `Spawner`'s thread between sandboxes),
and `prepare_launch` takes it instead of making one.

Each set is taken once, by one sandbox: it is named with the uid it was made for, which
becomes that sandbox's uid, and it is only taken by a policy with exactly its limits (and
no uid of its own). A set waiting here holds no fd (its join files are opened when it is
taken) but a lifeline lease, like a sandbox's cgroups: the host's death removes it with
the rest; `drain` removes them all, which `sandbox.spawn.retire` does when no sandbox is
left.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

from . import lifeline
from .cgroups import CgroupLayout, SandboxCgroup, sandbox_cgroup_name

#: Sets kept ready. One covers a host launching one sandbox at a time, or a supervisor's
#: spawner between two sandboxes; more would only hold cgroups nobody uses.
SIZE = 1


@dataclass(frozen=True)
class Shape:
    """What a set is made for: the layout and the limits."""

    layout: CgroupLayout
    memory_bytes: int | None
    pids: int | None


@dataclass
class _Warm:
    shape: Shape
    cgroup: SandboxCgroup
    uid: int


class _Pool:
    def __init__(self) -> None:
        self.owner = os.getpid()
        self.ready: list[_Warm] = []
        self.wanted: Shape | None = None


_lock = threading.Lock()
_pool = _Pool()


def _mine() -> _Pool:
    global _pool
    if _pool.owner != os.getpid():
        _pool = _Pool()  # a forked child: the parent's sets are the parent's
    return _pool


def take(shape: Shape) -> tuple[SandboxCgroup, int] | None:
    """A ready set of exactly ``shape``, with its uid, or None (the next `refill` makes
    one of this shape)."""
    with _lock:
        pool = _mine()
        pool.wanted = shape
        taken = next((w for w in pool.ready if w.shape == shape), None)
        if taken is None:
            return None
        pool.ready.remove(taken)
    try:
        taken.cgroup.open_joins()
    except OSError:
        _remove(taken)  # gone under us: the launch makes its own
        return None
    return taken.cgroup, taken.uid


def refill(new_uid: int) -> None:
    """Make the wanted set if none is ready (``new_uid`` is the uid it will have); drop
    sets of another shape. For when the host would wait anyway. A failure is left to the
    launch that would have made the set itself (it raises there, with the reason)."""
    with _lock:
        pool = _mine()
        shape = pool.wanted
        stale = [w for w in pool.ready if w.shape != shape]
        pool.ready = [w for w in pool.ready if w.shape == shape]
        needed = shape is not None and len(pool.ready) < SIZE
    for warm in stale:
        _remove(warm)
    if not needed or shape is None:
        return
    try:
        cgroup = make(shape, new_uid, open_joins=False)
    except Exception:
        return
    with _lock:
        if _mine() is pool and len(pool.ready) < SIZE:
            pool.ready.append(_Warm(shape, cgroup, new_uid))
            return
    _remove(_Warm(shape, cgroup, new_uid))


def make(shape: Shape, uid: int, *, open_joins: bool = True) -> SandboxCgroup:
    """A new set of ``shape`` named for ``uid``, holding a lifeline lease until removed."""
    generation = lifeline.acquire(shape.layout)
    try:
        cgroup = SandboxCgroup.create(
            shape.layout,
            sandbox_cgroup_name(uid, generation),
            memory_bytes=shape.memory_bytes,
            pids=shape.pids,
            open_joins=open_joins,
        )
    except BaseException:
        lifeline.release()
        raise
    cgroup.on_removed = lifeline.release
    return cgroup


def drain() -> None:
    """Remove every ready set (their leases go with them)."""
    with _lock:
        pool = _mine()
        ready, pool.ready = pool.ready, []
        pool.wanted = None
    for warm in ready:
        _remove(warm)


def ready() -> int:
    """How many sets are ready (for tests and accounting)."""
    with _lock:
        return len(_mine().ready)


def _remove(warm: _Warm) -> None:
    with contextlib.suppress(Exception):  # nothing ever ran in it; the lifeline backs this
        warm.cgroup.remove(timeout=0.5)
