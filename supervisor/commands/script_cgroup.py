"""The services' script children in cgroups (the sandbox's own cgroup code).

``serve`` and ``mcp`` run scripts in a ``ScriptPool`` (``supervisor.scripted.isolation``),
whose children have rlimits of their own (``RLIMIT_AS``, no core, few fds). Where this
host can make cgroups as it does for sandboxes (root, or a delegated subtree: see
docs/sandbox.md), each child also gets a cgroup of its own from ``sandbox.cgroups``,
named as a sandbox's (so a later host collects it if this one dies), with a memory limit
(the pool's ``memory_bytes``, resident) and a pids limit, joined right after the child
starts and removed once the child is reaped (whatever is left in it, the child's own jq
engines, is killed first). Where none can be made, the children keep their rlimits only.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from sandbox.cgroups import SandboxCgroup, detect_layout, sandbox_cgroup_name
from sandbox.errors import SandboxError
from supervisor.scripted.isolation import ScriptPool, default_script_pool
from supervisor.scripted.isolation.pool import DEFAULT_MEMORY

#: A child's processes and threads: the interpreter's few threads, its jq engines.
CHILD_PIDS = 64


def cgroup_confine(
    memory_bytes: int = DEFAULT_MEMORY, pids: int = CHILD_PIDS
) -> Callable[[int], Callable[[], None]] | None:
    """A ``ScriptPool`` ``confine`` that puts each child in a cgroup of its own with these
    limits; None where this host can make no cgroup with memory and pids limits."""
    try:
        layout = detect_layout()
    except (OSError, SandboxError):
        return None
    if not (layout.provides("memory") and layout.provides("pids")):
        return None

    def confine(pid: int) -> Callable[[], None]:
        group = SandboxCgroup.create(
            layout, sandbox_cgroup_name(os.getuid()), memory_bytes=memory_bytes, pids=pids
        )
        try:
            for fd in group.join_fds:  # v1 ``tasks``, v2 ``cgroup.procs``: the pid moves
                os.write(fd, str(pid).encode())
        except BaseException:
            group.remove()
            raise
        finally:
            group.close_join_fds()
        once = threading.Lock()

        def release() -> None:
            if once.acquire(blocking=False):  # kill what is left, remove the directories
                group.remove()

        return release

    return confine


def service_script_pool() -> ScriptPool:
    """This process's script pool, its children in cgroups where the host gives them."""
    return default_script_pool(confine=cgroup_confine())
