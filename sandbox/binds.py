"""Bind sources: checked on the filesystem, then mounted from what was checked.

Each source must exist, be a directory or a regular file, have no symlink anywhere on its
path (``openat2(RESOLVE_NO_SYMLINKS)``), and be readable (writable, for a writable bind) by
the uid the sandbox runs as (root's fresh uid, or a rootless host's own, with its groups):
a bind the sandbox could not use fails the launch with the reason instead of an EACCES
inside. The ``O_PATH`` fd of the check is what bwrap mounts (``--ro-bind-fd``). bwrap runs
as the sandbox's uid and resolves that fd to a path it must reach; as root, a source behind
a directory the fresh uid cannot enter (the interpreter under ``/root`` here) is pinned
instead: a detached ``open_tree`` clone of exactly what was checked, attached for bwrap
in the child's private mount namespace. A rootless sandbox runs as the host's own uid,
which reached the source for the check, so it never needs one (nor could it make one).
"""

from __future__ import annotations

import errno
import os
import stat

from . import linux
from .errors import LaunchError, PolicyError, SandboxUnavailable
from .policy import Bind


def groups_of(uid: int) -> frozenset[int]:
    """The groups a sandbox of ``uid`` has: a rootless host's own (the sandbox keeps them:
    only root may drop them), else its one group, numbered as the uid (root's drop)."""
    if uid == os.geteuid() and uid != 0:
        return frozenset({os.getegid(), *os.getgroups()})
    return frozenset({uid})


def permits(st: os.stat_result, uid: int, *, write: bool = False, enter: bool = False) -> bool:
    """Whether the mode bits let a sandbox of ``uid`` (and `groups_of` it) use the object:
    read it (or ``write`` it), and enter it if it is a directory (or ``enter`` only)."""
    if enter:
        need = 0o1
    else:
        need = 0o2 if write else 0o4
        if stat.S_ISDIR(st.st_mode):
            need |= 0o1
    if st.st_uid == uid:
        return (st.st_mode >> 6) & need == need
    if st.st_gid in groups_of(uid):
        return (st.st_mode >> 3) & need == need
    return st.st_mode & need == need


def reachable(path: str, uid: int) -> bool:
    """Whether ``uid`` can walk down to ``path`` (every ancestor enterable)."""
    parent = os.path.dirname(path)
    while True:
        try:
            if not permits(os.stat(parent), uid, enter=True):
                return False
        except OSError:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def check(bind: Bind, uid: int) -> tuple[int, os.stat_result]:
    """An ``O_PATH`` fd for the checked source (the caller closes it), and its stat."""
    try:
        path_fd = linux.open_path_no_symlinks(bind.source)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            real = os.path.realpath(bind.source)
            raise PolicyError(
                f"bind source {bind.source} is or passes through a symlink (it resolves to "
                f"{real}); bind the resolved path instead"
            ) from None
        if exc.errno == errno.ENOENT:
            raise PolicyError(f"bind source {bind.source} does not exist") from None
        if exc.errno == errno.ENOSYS:
            raise SandboxUnavailable("openat2 (Linux >= 5.6)", "upgrade the kernel") from None
        raise PolicyError(f"bind source {bind.source}: {exc.strerror}") from None
    try:
        st = os.fstat(path_fd)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise PolicyError(f"bind source {bind.source} is neither a directory nor a file")
        if bind.writable and not permits(st, uid, write=True):
            raise PolicyError(
                f"writable bind {bind.source} is not writable by the sandbox "
                f"({_who(uid)}): {_fix(uid, 'writable')}"
            )
        if not permits(st, uid):
            raise PolicyError(
                f"bind source {bind.source} is not readable by the sandbox "
                f"({_who(uid)}): {_fix(uid, 'readable')}"
            )
    except BaseException:
        os.close(path_fd)
        raise
    return path_fd, st


def _who(uid: int) -> str:
    if uid == os.geteuid():
        return f"it runs as this user, uid {uid}"
    return f"host uid {uid}; sandboxes never run as host root"


def _fix(uid: int, what: str) -> str:
    if uid == os.geteuid():
        return f"make it {what} for uid {uid}"
    flag = "o+rX" if what == "readable" else "o+w"
    return (
        f"make it {what} for others (chmod {flag}), or give the policy a sandbox_uid that owns it"
    )


def pin(path_fd: int, source: str) -> int:
    """A detached clone of the mount tree at ``path_fd`` (close it when done)."""
    try:
        return linux.clone_tree(path_fd)
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            raise SandboxUnavailable("open_tree (Linux >= 5.2)", "upgrade the kernel") from None
        raise LaunchError(f"cannot pin bind source {source}: {exc.strerror}") from None
