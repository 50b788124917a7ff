"""The few Linux system calls the standard library lacks, through ctypes.

Used on the host side to pin bind sources (``openat2`` + ``open_tree``), in the fork
server to fork sandboxes (``clone3``), and in the child before bwrap starts (``unshare``,
``mount``, ``move_mount``, ``prctl``). Every call raises `OSError` with the errno, never
returns a silent failure. The syscall numbers >= 424 are the same on every architecture.
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_mount = _libc.mount
_mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_mount.restype = ctypes.c_int
_unshare = _libc.unshare
_unshare.argtypes = [ctypes.c_int]
_unshare.restype = ctypes.c_int
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int
# A second handle whose calls keep the GIL: a clone3 child continues in Python holding it.
_clone3 = ctypes.PyDLL(None, use_errno=True).syscall
_clone3.restype = ctypes.c_long

NR_OPEN_TREE = 428
NR_MOVE_MOUNT = 429
NR_CLONE3 = 435
NR_OPENAT2 = 437

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 0x4
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04

CLONE_NEWNS = 0x00020000
CLONE_PARENT = 0x00008000
CLONE_INTO_CGROUP = 0x200000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_SLAVE = 1 << 19

PR_SET_PDEATHSIG = 1


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _CloneArgs(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def open_path_no_symlinks(path: str) -> int:
    """An ``O_PATH`` fd for ``path``, refusing any symlink on the way (``openat2``)."""
    how = _OpenHow(os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
    fd = _syscall(NR_OPENAT2, AT_FDCWD, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    return _check(fd, f"openat2 {path}")


def clone_tree(fd: int) -> int:
    """A detached copy of the mount tree at ``fd`` (``open_tree(OPEN_TREE_CLONE)``)."""
    flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE
    return _check(_syscall(NR_OPEN_TREE, fd, b"", flags), "open_tree")


def attach_tree(tree_fd: int, target: str) -> None:
    """Attach a detached tree from `clone_tree` at ``target`` (``move_mount``)."""
    result = _syscall(
        NR_MOVE_MOUNT, tree_fd, b"", AT_FDCWD, os.fsencode(target), MOVE_MOUNT_F_EMPTY_PATH
    )
    _check(result, f"move_mount {target}")


def unshare_mount_namespace() -> None:
    _check(_unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")


def make_mounts_private_slaves() -> None:
    """Nothing mounted afterwards propagates back to the host's mount namespace."""
    _check(_mount(None, b"/", None, MS_REC | MS_SLAVE, None), "mount --make-rslave /")


def mount_tmpfs(target: str, options: str) -> None:
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    result = _mount(b"sandvisor", os.fsencode(target), b"tmpfs", flags, options.encode())
    _check(result, f"mount tmpfs {target}")


def set_parent_death_signal(signum: int) -> None:
    _check(_prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def clone_parent(cgroup_fd: int | None = None) -> int:
    """Fork, but the child is a sibling: the child of the caller's parent (its thread), as
    if that thread had forked it (``CLONE_PARENT``; its exit signal is the caller's own).
    With ``cgroup_fd`` (a cgroup v2 directory) the child is born in that cgroup
    (``CLONE_INTO_CGROUP``, Linux >= 5.7): it never runs outside it, and it need not move
    itself there through ``cgroup.procs``, which takes the kernel's global threadgroup lock
    and waits for an RCU grace period. Returns the child's pid, and 0 in the child.

    Only for a single-threaded process (the fork server): no atfork handler runs, so the
    child must only set itself up and exec."""
    flags = CLONE_PARENT | (CLONE_INTO_CGROUP if cgroup_fd is not None else 0)
    args = _CloneArgs(flags=flags, cgroup=cgroup_fd if cgroup_fd is not None else 0)
    return _check(_clone3(NR_CLONE3, ctypes.byref(args), ctypes.sizeof(args)), "clone3")
