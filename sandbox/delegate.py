"""``sandvisor doctor --delegate USER``: cgroups for an ordinary user's sandboxes, set up
by root once, so that the user's sandboxes get their memory and pids limits.

- cgroup v1 (a hybrid machine, a container): a subtree ``sandvisor-USER`` at the root of
  the memory and pids hierarchies, owned by USER. A rootless host finds it by that name
  and makes each sandbox's cgroups in it (`sandbox.cgroups.detect_layout`). It holds no
  limit itself; one set on it by an administrator caps all of USER's sandboxes together.
- cgroup v2: a cgroup ``sandvisor-USER`` under the root, with memory and pids enabled for
  it, delegated to USER as the kernel's delegation model says (the directory and its
  ``cgroup.procs``, ``cgroup.subtree_control`` and ``cgroup.threads`` owned by USER). A
  process may only be moved within cgroups its mover may write, so the host must be
  started inside it by root (`Plan.notes` says how); on systemd, a user's own
  ``systemd-run --user --scope -p Delegate=yes`` gives the same without root.

`plan` says what would be done (shell commands, printed without ``--apply``), `Plan.apply`
does it, `removal` undoes it and is refused while processes are inside.
"""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from .cgroups import DELEGATED_PREFIX, CgroupMount, cgroup_mounts
from .errors import SandboxError


class DelegationError(SandboxError):
    """The set-up cannot be done (the line says why)."""


@dataclass(frozen=True)
class Step:
    command: str  # what a person would type
    action: Callable[[], None]


@dataclass
class Plan:
    user: str
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def apply(self) -> None:
        for step in self.steps:
            try:
                step.action()
            except OSError as exc:
                raise DelegationError(f"{step.command}: {exc.strerror or exc}") from None


def _account(user: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        raise DelegationError(f"no user named {user!r}") from None


def _roots(mounts: list[CgroupMount]) -> tuple[dict[str, str], str | None]:
    """({v1 controller: its hierarchy's root directory}, the v2 root) for memory and pids,
    where this process sees the whole hierarchy."""
    v1 = {}
    for controller in ("memory", "pids"):
        mount = next((m for m in mounts if m.version == 1 and controller in m.controllers), None)
        if mount is not None and mount.root == "/":
            v1[controller] = mount.mountpoint
    v2 = next((m.mountpoint for m in mounts if m.version == 2 and m.root == "/"), None)
    return v1, v2


def plan(user: str, mounts: list[CgroupMount] | None = None) -> Plan:
    """What gives ``user``'s sandboxes their cgroups on this machine."""
    account = _account(user)
    uid, gid = account.pw_uid, account.pw_gid
    if uid == 0:
        raise DelegationError("root needs no delegation: its sandboxes get cgroups of their own")
    mounts = cgroup_mounts() if mounts is None else mounts
    v1, v2 = _roots(mounts)
    name = DELEGATED_PREFIX + user
    result = Plan(user)
    owner = f"{user}:{gid}"
    if v1:
        for root in sorted(v1.values()):
            path = os.path.join(root, name)
            result.steps.append(Step(f"mkdir -p {shlex.quote(path)}", _mkdir(path)))
            result.steps.append(
                Step(f"chown -R {owner} {shlex.quote(path)}", _chown_tree(path, uid, gid))
            )
        missing = {"memory", "pids"} - set(v1)
        if missing:
            result.notes.append(f"no cgroup v1 {' or '.join(sorted(missing))} hierarchy here")
        return result
    if v2 is None:
        raise DelegationError("no cgroup hierarchy for memory and pids is mounted here")
    path = os.path.join(v2, name)
    control = os.path.join(v2, "cgroup.subtree_control")
    result.steps.append(
        Step(f"echo '+memory +pids' > {shlex.quote(control)}", _enable(control, "memory pids"))
    )
    result.steps.append(Step(f"mkdir -p {shlex.quote(path)}", _mkdir(path)))
    files = [path] + [
        os.path.join(path, f) for f in ("cgroup.procs", "cgroup.subtree_control", "cgroup.threads")
    ]
    result.steps.append(
        Step(f"chown {owner} {' '.join(map(shlex.quote, files))}", _chown(files, uid, gid))
    )
    procs = shlex.quote(os.path.join(path, "cgroup.procs"))
    result.notes.append(
        f"start {user}'s host inside it, as root: sh -c 'echo $$ > {procs} && exec runuser "
        f"-u {user} -- COMMAND'; on systemd, {user} can instead run the host in a scope of "
        "its own: systemd-run --user --scope -p Delegate=yes -- COMMAND"
    )
    return result


def removal(user: str, mounts: list[CgroupMount] | None = None) -> Plan:
    """What undoes `plan` (nothing of ``user``'s may still run inside)."""
    mounts = cgroup_mounts() if mounts is None else mounts
    v1, v2 = _roots(mounts)
    roots = list(v1.values()) or ([v2] if v2 else [])
    result = Plan(user)
    for root in sorted(roots):
        path = os.path.join(root, DELEGATED_PREFIX + user)
        if os.path.isdir(path):
            result.steps.append(Step(f"rmdir -p {shlex.quote(path)}/...", _remove_tree(path)))
    if not result.steps:
        result.notes.append(f"nothing delegated to {user} here")
    return result


def _mkdir(path: str) -> Callable[[], None]:
    return lambda: os.makedirs(path, exist_ok=True)


def _enable(control: str, controllers: str) -> Callable[[], None]:
    def enable() -> None:
        with open(control) as f:
            enabled = set(f.read().split())
        for controller in controllers.split():
            if controller not in enabled:
                with open(control, "w") as f:
                    f.write(f"+{controller}")

    return enable


def _chown(paths: list[str], uid: int, gid: int) -> Callable[[], None]:
    def chown() -> None:
        for path in paths:
            os.chown(path, uid, gid)

    return chown


def _chown_tree(path: str, uid: int, gid: int) -> Callable[[], None]:
    def chown() -> None:
        for top, dirs, files in os.walk(path):
            os.chown(top, uid, gid)
            for name in dirs + files:
                os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)

    return chown


def _remove_tree(path: str) -> Callable[[], None]:
    def remove() -> None:
        dirs = [top for top, _, _ in os.walk(path)]
        busy = set()
        for top in dirs:
            try:
                with open(os.path.join(top, "cgroup.procs")) as f:
                    busy.update(f.read().split())
            except FileNotFoundError:
                pass
        if busy:
            pids = ", ".join(sorted(busy, key=int)[:5])
            raise DelegationError(
                f"{path} still holds {len(busy)} processes ({pids}): stop them first"
            )
        for top in reversed(dirs):  # the deepest first
            os.rmdir(top)

    return remove
