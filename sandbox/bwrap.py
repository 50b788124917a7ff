"""bwrap's argv from a description of the sandbox. Pure: no I/O, so tests pin it exactly.

bwrap is mechanism only (its own README: the protection "is entirely determined by the
arguments passed"); this is where the mechanism is turned into our policy. The fixed part
is never optional: every namespace unshared (the network only unless allowed), nested
user namespaces disabled, capabilities dropped, a new session (no controlling tty for
TIOCSTI), death with the parent, an empty environment plus the allowlist, our seccomp
filter, the status channel, and a read-only root. Mounts come in the order given, later
ones on top of earlier ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The uid and gid the program sees inside (it maps to a non-root host uid outside).
INSIDE_UID = 1000
INSIDE_GID = 1000


@dataclass(frozen=True)
class RoBind:
    source: str
    dest: str


@dataclass(frozen=True)
class RwBind:
    source: str
    dest: str


@dataclass(frozen=True)
class RoBindFd:
    """A read-only bind of what the ``O_PATH`` fd ``fd`` (bwrap's number) refers to: bwrap
    resolves it, binds the path, then checks the mount is that very file (device and
    inode) and fails the launch otherwise, so a path swapped meanwhile is never mounted."""

    fd: int
    dest: str


@dataclass(frozen=True)
class RwBindFd:
    fd: int
    dest: str


@dataclass(frozen=True)
class DataFile:
    """A file at ``dest``, mode 0444, in bwrap's root tmpfs (read-only with the root),
    with the contents bwrap reads from fd ``fd``. A plain file, not a bind mount as
    ``--ro-bind-data`` makes: each mount bwrap adds costs it a scan of the mount table, and
    the mount namespace's teardown more (four of them: about 1 ms of every start-up here).
    It must come before any bind that could cover its directory: bwrap writes the file
    into whatever is at ``dest`` then."""

    fd: int
    dest: str


@dataclass(frozen=True)
class Symlink:
    target: str
    dest: str


@dataclass(frozen=True)
class Proc:
    dest: str = "/proc"


@dataclass(frozen=True)
class Dev:
    dest: str = "/dev"


@dataclass(frozen=True)
class Tmpfs:
    dest: str
    size_bytes: int


@dataclass(frozen=True)
class RemountRo:
    dest: str


MountOp = (
    RoBind | RwBind | RoBindFd | RwBindFd | DataFile | Symlink | Proc | Dev | Tmpfs | RemountRo
)


@dataclass(frozen=True)
class BwrapInvocation:
    """Everything the argv depends on."""

    mounts: Sequence[MountOp]
    command: Sequence[str]
    env: Mapping[str, str]
    seccomp_fd: int
    status_fd: int
    network: bool = False
    hostname: str = "sandbox"
    cwd: str = "/tmp"
    #: bwrap's argv[0] (the executable is given apart); "": its path. A sandbox without
    #: a cgroup carries its host's tag there (`sandbox.lifeline.tag`).
    argv0: str = ""
    #: An fd bwrap reads more arguments from (NUL-separated): what must not be seen on
    #: its command line, which every process of the host can read (secrets' --setenv).
    args_fd: int | None = None


def _mount_args(op: MountOp) -> list[str]:
    if isinstance(op, RoBind):
        return ["--ro-bind", op.source, op.dest]
    if isinstance(op, RwBind):
        return ["--bind", op.source, op.dest]
    if isinstance(op, RoBindFd):
        return ["--ro-bind-fd", str(op.fd), op.dest]
    if isinstance(op, RwBindFd):
        return ["--bind-fd", str(op.fd), op.dest]
    if isinstance(op, DataFile):
        return ["--perms", "0444", "--file", str(op.fd), op.dest]
    if isinstance(op, Symlink):
        return ["--symlink", op.target, op.dest]
    if isinstance(op, Proc):
        return ["--proc", op.dest]
    if isinstance(op, Dev):
        return ["--dev", op.dest]
    if isinstance(op, Tmpfs):
        return ["--size", str(op.size_bytes), "--tmpfs", op.dest]
    return ["--remount-ro", op.dest]


def build_argv(inv: BwrapInvocation, bwrap: str = "bwrap") -> list[str]:
    """The full argv, ``bwrap`` first and the command after ``--``."""
    if not inv.command:
        raise ValueError("empty command")
    argv = [inv.argv0 or bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
    argv += ["--unshare-cgroup"]
    if not inv.network:
        argv += ["--unshare-net"]
    argv += ["--disable-userns", "--uid", str(INSIDE_UID), "--gid", str(INSIDE_GID)]
    argv += ["--hostname", inv.hostname]
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    argv += ["--seccomp", str(inv.seccomp_fd), "--json-status-fd", str(inv.status_fd)]
    for op in inv.mounts:
        argv += _mount_args(op)
    argv += ["--remount-ro", "/", "--chdir", inv.cwd]
    for key, value in sorted(inv.env.items()):
        argv += ["--setenv", key, value]
    if inv.args_fd is not None:
        argv += ["--args", str(inv.args_fd)]
    argv += ["--", *inv.command]
    return argv
