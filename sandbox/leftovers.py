"""What dead hosts left behind, for ``sandvisor doctor`` to report and ``--sweep`` to remove.

A host's sandboxes go with it three ways over (`sandbox.lifeline`); what a host whose
lifeline was killed too (``ray kill``, an OOM kill of both) leaves behind is:

- cgroups named after it (``sv-<pid>-<start time>-...``) in the parents a layout uses:
  the next host of the same user collects them on its first launch
  (`sandbox.cgroups.collect_orphans`); this finds them without launching anything, and
  as root also in the subtrees delegated to users (``sandvisor-USER``);
- a sandbox without a cgroup whose bwrap died in its first milliseconds: its init, a fork
  of bwrap, keeps bwrap's tagged command line (``sandvisor-bwrap:<tag>``), now under a
  parent that is not that bwrap.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

from . import pidns
from .cgroups import (
    DELEGATED_PREFIX,
    CgroupLayout,
    Hierarchy,
    cgroup_mounts,
    detect_layout,
    owner_alive,
    remove_stale,
    sandbox_dirs,
)
from .fdwait import wait_readable
from .lifeline import TAG_PREFIX


@dataclass(frozen=True)
class Leftovers:
    cgroups: tuple[str, ...]  # cgroup directories of dead hosts' sandboxes
    orphans: tuple[int, ...]  # pids of sandbox inits whose bwrap is gone

    def __bool__(self) -> bool:
        return bool(self.cgroups or self.orphans)

    def describe(self) -> str:
        parts = []
        if self.cgroups:
            shown = ", ".join(self.cgroups[:3]) + (" ..." if len(self.cgroups) > 3 else "")
            parts.append(f"{len(self.cgroups)} cgroups of dead hosts ({shown})")
        if self.orphans:
            pids = ", ".join(map(str, self.orphans[:5]))
            parts.append(f"{len(self.orphans)} orphaned sandboxes without a cgroup (pids {pids})")
        return "; ".join(parts) or "none"


def parents(layout: CgroupLayout | None = None) -> list[Hierarchy]:
    """Where sandboxes' cgroups live: the layout's parents, and, as root, every subtree
    delegated to a user at the root of a v1 hierarchy."""
    layout = layout if layout is not None else detect_layout()
    found = list(layout.hierarchies)
    if os.geteuid() == 0:
        for mount in cgroup_mounts():
            if mount.version != 1 or mount.root != "/":
                continue
            roles = frozenset(
                r for r, c in (("memory", "memory"), ("pids", "pids"), ("freeze", "freezer"))
                if c in mount.controllers
            )  # fmt: skip
            with contextlib.suppress(OSError):
                for entry in os.scandir(mount.mountpoint):
                    if entry.name.startswith(DELEGATED_PREFIX) and entry.is_dir():
                        found.append(Hierarchy(1, entry.path, roles))
    return found


def find(layout: CgroupLayout | None = None) -> Leftovers:
    cgroups = [
        os.path.join(h.parent, name)
        for h in parents(layout)
        for name in sandbox_dirs(h.parent)
        if not owner_alive(name)
    ]
    return Leftovers(tuple(sorted(set(cgroups))), tuple(orphaned_inits()))


def sweep(layout: CgroupLayout | None = None) -> Leftovers:
    """Kill and remove what `find` finds; what could not be removed is returned."""
    for pid in orphaned_inits():
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:  # the init: the kernel ends its whole pid namespace
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                wait_readable(pidfd, 1.0)
            finally:
                os.close(pidfd)
    left = [
        os.path.join(h.parent, name)
        for h in parents(layout)
        for name in sandbox_dirs(h.parent)
        if not owner_alive(name) and not remove_stale(h, name, timeout=1.0)
    ]
    return Leftovers(tuple(left), tuple(orphaned_inits()))


def orphaned_inits() -> list[int]:
    """Sandbox inits (pid 1 of their namespace, with a sandvisor bwrap's tagged command
    line) whose parent is not their bwrap: left behind when it died early."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        argv0 = _argv0(entry.name)
        if not argv0.startswith(TAG_PREFIX) or not _namespace_init(entry.name):
            continue
        parent = pidns.parent_of(int(entry.name))
        if parent is not None and _argv0(str(parent)) != argv0:
            found.append(int(entry.name))
    return sorted(found)


def _namespace_init(pid: str) -> bool:
    """pid 1 of a pid namespace nested in ours (bwrap's monitor is in ours)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next((ln for ln in f if ln.startswith("NSpid:")), "")
    except OSError:
        return False
    pids = line.split()[1:]
    return len(pids) > 1 and pids[-1] == "1"


def _argv0(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(256).split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return ""
