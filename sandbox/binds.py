"""Bind sources: checked on the filesystem, and either reachable or pinned.

Each source must exist, be a directory or a regular file, have no symlink anywhere on its
path (``openat2(RESOLVE_NO_SYMLINKS)``), and be readable (writable, for a writable bind) by
the sandbox's own non-root uid: a bind the sandbox could not use fails the launch with
the reason instead of an EACCES inside. bwrap runs as that uid, so it can bind a source
by path only if the uid can reach it; a source behind a directory it cannot enter (the
interpreter under ``/root`` here) is pinned instead: a detached ``open_tree`` clone of
exactly what was checked, attached for bwrap in the child's private mount namespace.
"""

from __future__ import annotations

import errno
import os
import stat

from . import linux
from .errors import LaunchError, PolicyError, SandboxUnavailable
from .policy import Bind


def permits(st: os.stat_result, uid: int, *, write: bool = False, enter: bool = False) -> bool:
    """Whether the mode bits let ``uid`` (group ``uid``, no other groups) use the object:
    read it (or ``write`` it), and enter it if it is a directory (or ``enter`` only)."""
    if enter:
        need = 0o1
    else:
        need = 0o2 if write else 0o4
        if stat.S_ISDIR(st.st_mode):
            need |= 0o1
    if st.st_uid == uid:
        return (st.st_mode >> 6) & need == need
    if st.st_gid == uid:
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
                f"writable bind {bind.source} is not writable by the sandbox (host uid {uid}; "
                "sandboxes never run as host root): make it writable for others, or give "
                "the policy a sandbox_uid that owns it"
            )
        if not permits(st, uid):
            raise PolicyError(
                f"bind source {bind.source} is not readable by the sandbox (host uid {uid}; "
                "sandboxes never run as host root): make it readable for others "
                "(chmod o+rX), or give the policy a sandbox_uid that owns it"
            )
    except BaseException:
        os.close(path_fd)
        raise
    return path_fd, st


def pin(path_fd: int, source: str) -> int:
    """A detached clone of the mount tree at ``path_fd`` (close it when done)."""
    try:
        return linux.clone_tree(path_fd)
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            raise SandboxUnavailable("open_tree (Linux >= 5.2)", "upgrade the kernel") from None
        raise LaunchError(f"cannot pin bind source {source}: {exc.strerror}") from None
