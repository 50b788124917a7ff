"""What a sandbox's first process does before it becomes bwrap: in the child, as the host.

Two callers run it: the child a fork server clones (`sandbox.forkserver_main`), and the
``preexec_fn`` of the raw `subprocess.Popen` protocol (`ChildSetup`). In order: put the
given fds on their exact numbers, join the cgroups (so nothing of the sandbox ever runs
outside them), set rlimits, stage pinned trees in a private mount namespace, drop to the
sandbox uid, arm ``PR_SET_PDEATHSIG`` (after the uid change, which clears it) and check
the parent is still there (bwrap #633).

This module imports only ``os``, ``fcntl``, ``resource`` and `sandbox.linux`: the fork
server imports it, and every module it holds makes each of its forks dearer.
"""

from __future__ import annotations

import fcntl
import os
import resource

from . import linux

#: In the child's private mount namespace a tmpfs here holds the staged mounts. bwrap
#: mounts its own root over /tmp and finds them again at /oldroot/tmp.
STAGE = "/tmp"

#: The status-channel key of a set-up error (`sandbox.termination.BwrapStatus` reads it).
SETUP_ERROR_KEY = "sandvisor-setup-error"

#: SIGKILL's number on every architecture the seccomp filter supports (x86_64, aarch64);
#: a constant, so the fork server need not import ``signal`` (and with it ``enum``).
SIGKILL = 9

FdMap = tuple[tuple[int, int], ...]  # (child fd, parent fd)
Limits = tuple[tuple[int, int, int], ...]  # (resource, soft, hard)
Trees = tuple[tuple[str, int, bool], ...]  # (stage path, tree fd, is dir)


def above_targets(fd_map: FdMap) -> int:
    """The lowest fd number above every child fd (and above 63)."""
    return max(64, max((target for target, _ in fd_map), default=2) + 1)


def lift(fd: int, above: int) -> int:
    """A close-on-exec copy of ``fd`` numbered ``above`` or higher."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above)


def remap_fds(fd_map: FdMap) -> None:
    """Each parent fd onto its child number, inheritable. A source below the top target is
    first copied above every target, so no source is overwritten before it is used."""
    top = above_targets(fd_map) - 1
    if any(src <= top for _, src in fd_map):
        fd_map = tuple((target, lift(src, top + 1)) for target, src in fd_map)
    for target, src in fd_map:
        os.dup2(src, target, inheritable=True)


def enter_cgroups(join_fds: tuple[int, ...]) -> None:
    """Write ``0`` (this process, or on v1 ``tasks`` this thread) to each join file."""
    for fd in join_fds:
        os.write(fd, b"0")


def set_limits(rlimits: Limits) -> None:
    for res, soft, hard in rlimits:
        resource.setrlimit(res, (soft, hard))


def stage_trees(trees: Trees) -> None:
    """Attach the pinned bind sources at their stage paths, in a private mount namespace."""
    if not trees:
        return
    linux.unshare_mount_namespace()
    linux.make_mounts_private_slaves()
    linux.mount_tmpfs(STAGE, "mode=0755,size=64k")
    for path, tree_fd, is_dir in trees:
        if is_dir:
            os.mkdir(path)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        linux.attach_tree(tree_fd, path)


def become(uid: int, parent_pid: int) -> None:
    """Drop to the sandbox uid for good (root's fresh uid: a rootless host's sandbox keeps
    the host's own, which it already is), then die with the parent (checked alive)."""
    if uid != os.geteuid():
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    linux.set_parent_death_signal(SIGKILL)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), SIGKILL)  # the parent died before we armed it


def set_up(
    fd_map: FdMap,
    join_fds: tuple[int, ...],
    rlimits: Limits,
    trees: Trees,
    uid: int,
    parent_pid: int,
) -> None:
    """Every step, in order."""
    remap_fds(fd_map)
    enter_cgroups(join_fds)
    set_limits(rlimits)
    stage_trees(trees)
    become(uid, parent_pid)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ChildSetup:
    """The ``preexec_fn`` of the raw `subprocess.Popen` protocol: `set_up`, and on failure
    a set-up error on the status channel (the parent's fd number, still open) first."""

    __slots__ = ("cgroup_fds", "fd_map", "parent_pid", "rlimits", "status_fd", "trees", "uid")

    def __init__(
        self,
        *,
        fd_map: FdMap,
        cgroup_fds: tuple[int, ...],
        rlimits: Limits,
        trees: Trees,
        uid: int,
        parent_pid: int,
        status_fd: int,
    ) -> None:
        self.fd_map = fd_map
        self.cgroup_fds = cgroup_fds
        self.rlimits = rlimits
        self.trees = trees
        self.uid = uid
        self.parent_pid = parent_pid
        self.status_fd = status_fd

    def __call__(self) -> None:
        # What is still used once the fds are remapped goes above every child fd number
        # first: in the host it may sit on one (only the fd map itself is moved by remap).
        above = above_targets(self.fd_map)
        status_fd = lift(self.status_fd, above)
        try:
            joins = tuple(lift(fd, above) for fd in self.cgroup_fds)
            trees = tuple((path, lift(fd, above), is_dir) for path, fd, is_dir in self.trees)
            set_up(self.fd_map, joins, self.rlimits, trees, self.uid, self.parent_pid)
        except BaseException as exc:
            import contextlib  # loaded already in a host; never in the fork server
            import json

            line = json.dumps({SETUP_ERROR_KEY: describe(exc)}) + "\n"
            with contextlib.suppress(OSError):
                os.write(status_fd, line.encode())
            raise
