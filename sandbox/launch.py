"""A `LaunchPlan`: everything needed to start one sandbox, prepared before anything runs.

A sandbox runs bwrap unprivileged, as the host's own uid (rootless) or as a fresh host uid
of its own (a root host's; never root), inside its own cgroups (or, where the policy
accepts it and none can be had, with per-process limits: `sandbox.limits`), with its
rlimits, our seccomp filter and ``--die-with-parent``. The plan holds bwrap's argv,
bwrap's own (empty) environment, the fds to keep (the binds' checked fds among them), and
the ``preexec_fn`` (`sandbox.childsetup.ChildSetup`) that does, in the forked child and
before exec, what only the child can do: map the caller's fds onto exact numbers, join
the cgroups, set the rlimits (this machine's root lacks CAP_SYS_RESOURCE, so no one else
can), attach (as root) pinned bind sources the sandbox's uid cannot reach, drop to that
uid, and arm the death signal after checking the parent is alive.

Use: `popen_kwargs` for `subprocess.Popen`, then `started`, then wrap the Popen in a
`sandbox.handle.Sandbox` (`sandbox.spawn.spawn` does all three). A plan is used once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import binds, cgroup_pool, lifeline
from .bwrap import (
    BwrapInvocation,
    DataFile,
    Dev,
    MountOp,
    Proc,
    RemountRo,
    RoBind,
    RoBindFd,
    RwBind,
    RwBindFd,
    Tmpfs,
    build_argv,
)
from .cgroups import CgroupLayout, SandboxCgroup, detect_layout, limits_fix
from .childsetup import STAGE, ChildSetup
from .command import Command as Command  # re-exported: sandbox.launch.Command
from .errors import LaunchError, PolicyError, SandboxUnavailable
from .forkserver_main import PLUGGED
from .gate import bwrap_binds_by_fd, bwrap_path, check_bind_fd, require
from .layout import synthetic_etc, system_mounts
from .limits import UidKind, enforce
from .policy import Bind, SandboxPolicy, is_within
from .seccomp import build_filter
from .termination import BwrapStatus

#: Fresh sandbox host uids come from [UID_BASE, UID_BASE + UID_SPAN): above the ranges
#: systemd hands to users and containers (<= 0x6FFFFFFF), below its foreign range.
UID_BASE = 0x70000000
UID_SPAN = 1 << 24


def allocate_uid(policy: SandboxPolicy) -> tuple[int, UidKind]:
    """The host uid the sandbox runs as: as root a fresh one of its own (or the policy's
    ``sandbox_uid``); rootless the host's own (mapped to 1000 inside, as ever)."""
    euid = os.geteuid()
    if euid != 0:
        if policy.sandbox_uid not in (None, euid):
            raise SandboxUnavailable(
                f"a sandbox_uid ({policy.sandbox_uid}) other than the host's own",
                "leave sandbox_uid unset, or run the host as root (only root can run a "
                "sandbox as another uid)",
                f"the host runs as uid {euid}",
            )
        return euid, "host"
    if policy.sandbox_uid is not None:
        return policy.sandbox_uid, "fixed"
    return fresh_uid(), "fresh"


def fresh_uid() -> int:
    return UID_BASE + int.from_bytes(os.urandom(4), "little") % UID_SPAN


def warm_up() -> None:
    """Make the next sandbox's cgroups now (`sandbox.cgroup_pool`): for when the host
    would wait anyway."""
    cgroup_pool.refill(fresh_uid() if os.geteuid() == 0 else os.geteuid())


def _plug_free(numbers: Iterable[int]) -> list[int]:
    """A /dev/null plug on each of ``numbers`` that is not open; the plugs.

    For `subprocess.Popen`, which needs every ``pass_fds`` number open in the parent, and
    which then puts its own error pipe above them (so the child's remapping cannot
    overwrite it). The plan closes the plugs once the child exists."""
    plugs: list[int] = []
    for fd in sorted(numbers):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            plug = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            if plug != fd:  # a lower number was free after all: fill that one first
                os.dup2(plug, fd, inheritable=False)
                os.close(plug)
            plugs.append(fd)
    return plugs


def _memfd(name: str, content: str) -> int:
    fd = os.memfd_create(f"sandvisor-{name}", os.MFD_CLOEXEC)
    os.write(fd, content.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _close_all(fds: Iterable[int]) -> None:
    for fd in list(fds):
        with contextlib.suppress(OSError):
            os.close(fd)


class Lease:
    """A sandbox without a cgroup counted on the lifeline until `release` (once)."""

    def __init__(self, layout: CgroupLayout) -> None:
        lifeline.acquire(layout)
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            lifeline.release()


@dataclass
class LaunchPlan:
    """One sandbox, ready to spawn: `popen_kwargs`, then `started` (or `abort`)."""

    argv: list[str]
    executable: str
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    preexec_fn: ChildSetup  # also what a fork server's child does (its fields)
    uid: int
    cgroup: SandboxCgroup | None
    policy: SandboxPolicy
    weakened: tuple[str, ...]  # the guarantees it runs without (`sandbox.limits`)
    uid_kind: UidKind  # its uid: a fresh one of its own, the policy's, or the host's
    lease: Lease | None  # a sandbox without a cgroup: its count on the lifeline
    status_read_fd: int
    status: BwrapStatus
    _child_fds: list[int]
    _state: str = "ready"

    def claim(self) -> None:
        """Mark the plan as being spawned (once only)."""
        if self._state != "ready":
            raise LaunchError(f"launch plan already {self._state}")
        self._state = "spawning"

    def popen_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `subprocess.Popen` (add stdin, stdout and stderr)."""
        self.claim()
        self._child_fds += _plug_free(self.pass_fds)
        return {
            "executable": self.executable,
            "env": self.env,
            "pass_fds": self.pass_fds,
            "preexec_fn": self.preexec_fn,
            "close_fds": True,
        }

    def started(self) -> None:
        """The child exists: close the parent's copies of what only the child needs."""
        self._close_child_side()
        if self.cgroup is not None:
            self.cgroup.close_join_fds()
        self._state = "started"

    def abort(self) -> None:
        """Spawning failed: release everything, including the cgroups."""
        self._close_child_side()
        _close_all([self.status_read_fd])
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.lease is not None:
            self.lease.release()
        self._state = "aborted"

    def _close_child_side(self) -> None:
        _close_all(self._child_fds)
        self._child_fds.clear()


def prepare_launch(
    policy: SandboxPolicy,
    command: Command,
    *,
    fds: Mapping[int, int] | None = None,
    layout: CgroupLayout | None = None,
    network: str | None = None,
) -> LaunchPlan:
    """Check and allocate everything for one sandbox; nothing runs yet.

    ``fds`` maps child fd numbers (3 and up) to parent fds: ``{3: host_to_worker_read,
    4: worker_to_host_write}`` for a worker (the parent keeps its fds). ``network``: the
    directory of this sandbox's proxy endpoint (`sandbox.netproxy.server.Endpoint`),
    required by a policy with a network allowlist and refused without one.
    """
    require(policy)
    command = _with_network(policy, command, network)
    fd_targets = dict(fds or {})
    for target, source in fd_targets.items():
        if not 3 <= target < 64:
            raise PolicyError(f"child fd {target} must be in 3..63")
        try:
            fcntl.fcntl(source, fcntl.F_GETFD)
        except OSError:
            raise PolicyError(f"parent fd {source} (for child fd {target}) is not open") from None
    etc_files = synthetic_etc(policy.hostname)
    first_own = max(fd_targets, default=2) + 1  # bwrap's fds follow the caller's
    layout = layout if layout is not None else detect_layout()
    executable = bwrap_path()
    uid, uid_kind = allocate_uid(policy)
    enforcement = enforce(policy, layout, uid_kind)
    if enforcement.weakened and policy.limits != "per-process":
        raise SandboxUnavailable(
            "cgroups for the memory and pids limits",
            limits_fix(),
            "; ".join(layout.problems) or "no usable cgroup hierarchy",
        )
    shape = cgroup_pool.Shape(layout, enforcement.cgroup_memory, enforcement.cgroup_pids)
    warm = None
    if layout.hierarchies and policy.sandbox_uid is None:
        warm = cgroup_pool.take(shape)  # made ahead, for a fresh uid: it becomes ours
    uid = warm[1] if warm is not None else uid

    opened: list[int] = []
    cgroup: SandboxCgroup | None = warm[0] if warm is not None else None
    lease: Lease | None = None
    try:
        if cgroup is None and layout.hierarchies:
            cgroup = cgroup_pool.make(shape, uid)
        if cgroup is None:  # the lifeline finds it by the tag in bwrap's argv[0]
            lease = Lease(layout)
        # bwrap's own fds, remapped in the child to the numbers after the caller's
        own: list[tuple[int, str]] = []
        seccomp_read, seccomp_write = os.pipe()
        opened += [seccomp_read, seccomp_write]
        status_read, status_write = os.pipe()
        opened += [status_read, status_write]
        own += [(seccomp_read, "seccomp"), (status_write, "status")]
        for dest, content in {**etc_files, **command.files}.items():
            fd = _memfd(os.path.basename(dest), content)
            opened.append(fd)
            own.append((fd, dest))
        if command.private_env:
            fd = _memfd("args", _setenv_args(command.private_env))
            opened.append(fd)
            own.append((fd, "args"))
        trees: list[tuple[str, int, bool]] = []
        bound: list[tuple[Bind, int | str]] = []  # (bind, the checked fd or a staged path)
        pins = uid_kind != "host"  # only root can pin (open_tree) and stage
        for index, bind in enumerate(policy.binds + command.binds):
            path_fd, st = binds.check(bind, uid)
            opened.append(path_fd)
            # A pin for a source the sandbox's uid cannot reach (root's fresh uid; bwrap
            # resolves a bind's fd to a path), for one under STAGE (the stage would hide
            # its path), and for all where bwrap cannot bind an fd; else the checked fd.
            by_fd = bwrap_binds_by_fd()
            if pins and (
                not by_fd or is_within(bind.source, STAGE) or not binds.reachable(bind.source, uid)
            ):
                tree = binds.pin(path_fd, bind.source)
                opened.remove(path_fd)
                os.close(path_fd)  # the pin holds what it needs
                opened.append(tree)
                staged = f"{STAGE}/b{index}"
                trees.append((staged, tree, stat.S_ISDIR(st.st_mode)))
                bound.append((bind, staged))
            elif by_fd:
                own.append((path_fd, "bind"))
                bound.append((bind, path_fd))
            else:
                check = check_bind_fd()
                raise SandboxUnavailable(check.name, check.fix, f"to bind {bind.source}")
        numbers = {parent: first_own + i for i, (parent, _) in enumerate(own)}
        if numbers and max(numbers.values()) >= PLUGGED:  # the fork server's limit
            raise PolicyError(f"too many binds for one sandbox ({len(bound)})")

        mounts: list[MountOp] = list(system_mounts(policy.network is not False))
        # the fresh /etc files, before any bind: written into the root tmpfs, never into
        # a bound directory (a bind onto /etc/hosts then covers ours, as the policy said)
        mounts += [DataFile(numbers[fd], dest) for fd, dest in own if dest.startswith("/")]
        mounts += [Proc(), RoBind("/proc/sys", "/proc/sys"), Dev()]
        # /dev read-only but for a private, sized /dev/shm (shm_open, semaphores)
        mounts += [Tmpfs("/dev/shm", policy.tmpfs_bytes), RemountRo("/dev")]
        mounts.append(Tmpfs("/tmp", policy.tmpfs_bytes))
        for bind, where in bound:
            if isinstance(where, str):
                mounts.append((RwBind if bind.writable else RoBind)(where, bind.dest))
            else:
                mounts.append((RwBindFd if bind.writable else RoBindFd)(numbers[where], bind.dest))
        for mask in command.masks:
            mounts += [Tmpfs(mask, 4096), RemountRo(mask)]

        argv = build_argv(
            BwrapInvocation(
                mounts=mounts,
                command=command.argv,
                env={**policy.env, **command.env},
                seccomp_fd=numbers[seccomp_read],
                status_fd=numbers[status_write],
                network=policy.network is True,
                hostname=policy.hostname,
                cwd=command.cwd,
                argv0=lifeline.tag() if lease is not None else "",
                args_fd=next((numbers[fd] for fd, what in own if what == "args"), None),
            ),
            bwrap=executable,
        )
        opened.remove(seccomp_write)
        _hand_over_program(seccomp_write)
        fd_map = (*sorted(fd_targets.items()), *((numbers[fd], fd) for fd, _ in own))
        return LaunchPlan(
            argv=argv,
            executable=executable,
            env={},
            pass_fds=tuple(target for target, _ in fd_map),
            preexec_fn=ChildSetup(
                fd_map=tuple(fd_map),
                cgroup_fds=tuple(cgroup.join_fds if cgroup else ()),
                rlimits=enforcement.rlimits,
                trees=tuple(trees),
                uid=uid,
                parent_pid=os.getpid(),
                status_fd=status_write,
            ),
            uid=uid,
            cgroup=cgroup,
            policy=policy,
            weakened=enforcement.weakened,
            uid_kind=uid_kind,
            lease=lease,
            status_read_fd=status_read,
            status=BwrapStatus(),
            _child_fds=[fd for fd in opened if fd != status_read],
        )
    except BaseException:
        _close_all(opened)
        if cgroup is not None:
            with contextlib.suppress(Exception):
                cgroup.remove()
        if lease is not None:
            lease.release()
        raise


def _setenv_args(env: Mapping[str, str]) -> str:
    """``--setenv NAME VALUE`` for each, NUL-separated, as bwrap's ``--args`` reads them."""
    return "".join(f"--setenv\0{key}\0{value}\0" for key, value in sorted(env.items()))


def _with_network(policy: SandboxPolicy, command: Command, network: str | None) -> Command:
    """The command with the proxy's endpoint and the forwarder, under an allowlist."""
    if policy.allowlist is None:
        if network is not None:
            raise PolicyError("a proxy endpoint was given, but the policy has no network allowlist")
        return command
    if network is None:
        raise PolicyError(
            "this policy's network allowlist needs the host's proxy: launch it through a "
            "Supervisor, sandbox.run or `sandvisor exec --allow-net`"
        )
    from .netproxy.plan import with_forwarder

    return with_forwarder(command, network, forwards_itself=command.forwards_network)


def _hand_over_program(seccomp_write: int) -> None:
    """The program goes into the pipe now; bwrap reads it to EOF."""
    program = build_filter()
    try:
        if os.write(seccomp_write, program) != len(program):
            raise LaunchError("could not hand the seccomp program to bwrap")
    finally:
        os.close(seccomp_write)


def command_for(argv: Sequence[str]) -> Command:
    """A `Command` for a plain program and its arguments."""
    return Command(tuple(argv))
