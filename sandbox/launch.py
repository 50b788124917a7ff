"""A `LaunchPlan`: everything needed to start one sandbox, for any way of spawning it.

The plan holds the bwrap argv, the (empty) environment of bwrap itself, the fds to keep,
and a ``preexec_fn`` that runs in the forked child before bwrap is exec'd, as root:

1. map the caller's fds onto exact child fd numbers (a worker sees its protocol pipes as
   3 and 4; bwrap's own seccomp and status fds sit just above and bwrap closes them);
2. join the sandbox's cgroups (so nothing of the sandbox ever runs outside them);
3. set the rlimits;
4. in a private mount namespace, attach the pinned bind sources (``open_tree`` clones
   taken in the parent after an ``openat2(RESOLVE_NO_SYMLINKS)`` check) and the fresh
   ``/etc`` files under a staging tmpfs where the unprivileged bwrap can reach them;
5. drop to the sandbox's own host uid (never root; fresh per sandbox by default), so
   bwrap runs unprivileged and the program is not host root at all;
6. set ``PR_SET_PDEATHSIG`` and check the parent is still alive (the die-with-parent
   start-up race, bwrap #633).

``PR_SET_PDEATHSIG`` follows the parent *thread* (bwrap #692): spawn from a thread that
lives as long as the sandbox should, which is what `Spawner` is for. A plan is used once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import secrets
import shutil
import signal
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

from . import linux
from .bwrap import (
    BwrapInvocation,
    Dev,
    MountOp,
    Proc,
    RemountRo,
    RoBind,
    RwBind,
    Tmpfs,
    build_argv,
)
from .cgroups import CgroupLayout, SandboxCgroup, detect_layout, sandbox_cgroup_name
from .errors import LaunchError, PolicyError, SandboxUnavailable
from .layout import synthetic_etc, system_mounts
from .policy import Bind, SandboxPolicy, check_path
from .probe import require
from .seccomp import build_filter
from .termination import SETUP_ERROR_KEY, BwrapStatus

#: Fresh sandbox host uids come from [UID_BASE, UID_BASE + UID_SPAN): above the ranges
#: systemd hands to users and containers (<= 0x6FFFFFFF), below its foreign range.
UID_BASE = 0x70000000
UID_SPAN = 1 << 24

#: In the child's private mount namespace a tmpfs here holds the staged mounts. bwrap
#: mounts its own root over /tmp and finds them again at /oldroot/tmp.
STAGE = "/tmp"
STAGE_SIZE = "1m"

_FIX_BWRAP = "install bubblewrap >= 0.8.0 (apt-get install bubblewrap)"


@dataclass(frozen=True)
class Command:
    """What to run in the sandbox, and what it needs beyond the policy."""

    argv: tuple[str, ...]
    binds: tuple[Bind, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    masks: tuple[str, ...] = ()  # paths hidden under an empty read-only directory
    cwd: str = "/tmp"

    def __post_init__(self) -> None:
        argv = tuple(self.argv)
        if not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
            raise PolicyError(f"command must be non-empty strings without NUL: {argv!r}")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "binds", tuple(self.binds))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        for mask in self.masks:
            check_path(mask, "mask")
        check_path(self.cwd, "working directory")


@cache
def bwrap_path() -> str:
    """``$SANDVISOR_BWRAP`` if set (exactly that file), else bwrap on PATH or in /usr/bin."""
    chosen = os.environ.get("SANDVISOR_BWRAP")
    if chosen is not None:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise SandboxUnavailable(
                "bubblewrap (bwrap)", _FIX_BWRAP, f"SANDVISOR_BWRAP={chosen} is not executable"
            )
        return chosen
    path = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else "")
    if not path:
        raise SandboxUnavailable("bubblewrap (bwrap)", _FIX_BWRAP, "not found on PATH")
    return path


# --- fds ---------------------------------------------------------------------------------

_plugs: list[int] = []


def _plug_low_fds(upto: int) -> None:
    """Make sure fds 3..upto are open in the parent (a /dev/null plug where one is free).

    subprocess keeps ``pass_fds`` by number and needs them open in the parent, and its own
    error pipe takes the lowest free numbers: with 3..upto occupied it can never land on
    a number the child remaps. The plugs stay open for the life of the process.
    """
    for fd in range(3, upto + 1):
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            plug = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            _plugs.append(plug)
            if plug != fd:  # something else took the hole meanwhile; keep both, retry
                _plug_low_fds(upto)
                return


# --- bind sources -----------------------------------------------------------------------


@dataclass
class _Pinned:
    bind: Bind
    tree_fd: int
    is_dir: bool


def _pin(bind: Bind, uid: int) -> _Pinned:
    """Check the source (exists, no symlink, dir or file, writable if asked) and pin it."""
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
        if bind.writable and not _permits(st, uid, write=True):
            raise PolicyError(
                f"writable bind {bind.source} is not writable by the sandbox (host uid {uid}; "
                "sandboxes never run as host root): make it writable for others, or give "
                "the policy a sandbox_uid that owns it"
            )
        if not _permits(st, uid, write=False):
            raise PolicyError(
                f"bind source {bind.source} is not readable by the sandbox (host uid {uid}; "
                "sandboxes never run as host root): make it readable for others "
                "(chmod o+rX), or give the policy a sandbox_uid that owns it"
            )
        try:
            tree = linux.clone_tree(path_fd)
        except OSError as exc:
            if exc.errno == errno.ENOSYS:
                raise SandboxUnavailable("open_tree (Linux >= 5.2)", "upgrade the kernel") from None
            raise LaunchError(f"cannot pin bind source {bind.source}: {exc.strerror}") from None
        return _Pinned(bind, tree, stat.S_ISDIR(st.st_mode))
    finally:
        os.close(path_fd)


def _permits(st: os.stat_result, uid: int, *, write: bool) -> bool:
    """Whether the mode bits let ``uid`` (group ``uid``) read, or write, the source."""
    need = 0o2 if write else 0o4
    if stat.S_ISDIR(st.st_mode):
        need |= 0o1  # and enter it
    if st.st_uid == uid:
        return (st.st_mode >> 6) & need == need
    if st.st_gid == uid:
        return (st.st_mode >> 3) & need == need
    return st.st_mode & need == need


# --- the child's side -------------------------------------------------------------------


@dataclass(frozen=True)
class _ChildSetup:
    """The ``preexec_fn``: runs in the forked child, as root, before bwrap is exec'd."""

    fd_map: tuple[tuple[int, int], ...]  # (target, source)
    cgroup_fds: tuple[int, ...]
    rlimits: tuple[tuple[int, int, int], ...]
    trees: tuple[tuple[str, int, bool], ...]  # (stage path, tree fd, is dir)
    files: tuple[tuple[str, str], ...]  # (stage path, content)
    empty_dir: str
    uid: int
    parent_pid: int
    status_fd: int

    def __call__(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            line = json.dumps({SETUP_ERROR_KEY: f"{type(exc).__name__}: {exc}"}) + "\n"
            with contextlib.suppress(OSError):
                os.write(self.status_fd, line.encode())
            raise

    def _run(self) -> None:
        temps = [(t, fcntl.fcntl(src, fcntl.F_DUPFD_CLOEXEC, 64)) for t, src in self.fd_map]
        for target, temp in temps:
            os.dup2(temp, target, inheritable=True)
        for fd in self.cgroup_fds:
            os.write(fd, b"0")
        for res, soft, hard in self.rlimits:
            resource.setrlimit(res, (soft, hard))
        linux.unshare_mount_namespace()
        linux.make_mounts_private_slaves()
        linux.mount_tmpfs(STAGE, f"mode=0755,size={STAGE_SIZE}")
        for path, tree_fd, is_dir in self.trees:
            if is_dir:
                os.mkdir(path)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            linux.attach_tree(tree_fd, path)
        for path, content in self.files:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            os.write(fd, content.encode())
            os.close(fd)
        os.mkdir(self.empty_dir, 0o555)
        os.setgroups([])
        os.setresgid(self.uid, self.uid, self.uid)
        os.setresuid(self.uid, self.uid, self.uid)
        linux.set_parent_death_signal(signal.SIGKILL)  # after the uid change, which clears it
        if os.getppid() != self.parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)  # the parent died before we armed it


# --- the plan ---------------------------------------------------------------------------


def rlimits_for(policy: SandboxPolicy) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) for the policy. CPU: soft < hard so SIGXCPU comes first."""
    inf = resource.RLIM_INFINITY
    limits = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, policy.open_files, policy.open_files),
    ]
    if policy.file_size_bytes is not None:
        limits.append((resource.RLIMIT_FSIZE, policy.file_size_bytes, policy.file_size_bytes))
    if policy.cpu_seconds is not None:
        limits.append((resource.RLIMIT_CPU, policy.cpu_seconds, policy.cpu_seconds + 1))
    if policy.address_space_bytes is not None:
        limits.append((resource.RLIMIT_AS, policy.address_space_bytes, policy.address_space_bytes))
    return tuple((r, s, h if h != inf else inf) for r, s, h in limits)


def allocate_uid(policy: SandboxPolicy) -> int:
    if policy.sandbox_uid is not None:
        return policy.sandbox_uid
    return UID_BASE + secrets.randbelow(UID_SPAN)


@dataclass
class LaunchPlan:
    """One sandbox, ready to spawn. Use `popen_kwargs` with `subprocess.Popen`, then call
    `started` with the pid (or `abort` if spawning failed). Single use."""

    argv: list[str]
    executable: str
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    preexec_fn: Callable[[], None]
    uid: int
    cgroup: SandboxCgroup | None
    policy: SandboxPolicy
    status_read_fd: int
    _child_fds: list[int]
    _state: str = "ready"

    def popen_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `subprocess.Popen` (add stdin, stdout and stderr)."""
        if self._state != "ready":
            raise LaunchError(f"launch plan already {self._state}")
        self._state = "spawning"
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
        self._state = "started"

    def abort(self) -> None:
        """Spawning failed: release everything, including the cgroups."""
        self._close_child_side()
        with contextlib.suppress(OSError):
            os.close(self.status_read_fd)
        if self.cgroup is not None:
            self.cgroup.remove()
        self._state = "aborted"

    def _close_child_side(self) -> None:
        for fd in self._child_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child_fds.clear()
        if self.cgroup is not None:
            self.cgroup.close_join_fds()

    def setup_error(self) -> str | None:
        """The child's own set-up error, if it wrote one (read without blocking)."""
        status = BwrapStatus()
        with contextlib.suppress(OSError):
            os.set_blocking(self.status_read_fd, False)
            status.feed(os.read(self.status_read_fd, 65536) + b"\n")
        return status.setup_error


def prepare_launch(
    policy: SandboxPolicy,
    command: Command,
    *,
    fds: Mapping[int, int] | None = None,
    layout: CgroupLayout | None = None,
) -> LaunchPlan:
    """Check, pin and allocate everything for one sandbox; nothing runs yet.

    ``fds`` maps child fd numbers (3 and up) to parent fds: ``{3: host_to_worker_read,
    4: worker_to_host_write}`` for a worker. The parent keeps ownership of its fds.
    """
    require(policy)
    fd_targets = dict(fds or {})
    for target, source in fd_targets.items():
        if not 3 <= target < 64:
            raise PolicyError(f"child fd {target} must be in 3..63")
        try:
            fcntl.fcntl(source, fcntl.F_GETFD)
        except OSError:
            raise PolicyError(f"parent fd {source} (for child fd {target}) is not open") from None
    seccomp_target = max(fd_targets, default=2) + 1
    status_target = seccomp_target + 1
    # Before opening anything: every fd opened below must sit above the remapped numbers.
    _plug_low_fds(status_target)
    layout = layout if layout is not None else detect_layout()
    executable = bwrap_path()

    uid = allocate_uid(policy)
    cleanups: list[Callable[[], None]] = []
    try:
        cgroup: SandboxCgroup | None = None
        if layout.hierarchies:
            cgroup = SandboxCgroup.create(
                layout,
                sandbox_cgroup_name(uid),
                memory_bytes=policy.memory_bytes,
                pids=policy.pids,
            )
            cleanups.append(cgroup.remove)
        elif policy.memory_bytes is not None or policy.pids is not None:
            raise SandboxUnavailable(
                "cgroups for the memory and pids limits",
                "run as root on a machine with cgroups (see `sandvisor doctor`)",
                "; ".join(layout.problems) or "no usable cgroup hierarchy",
            )

        pinned: list[_Pinned] = []
        cleanups.append(lambda: _close_all(p.tree_fd for p in pinned))
        mounts: list[MountOp] = list(system_mounts(policy.network))
        mounts += [Proc(), RoBind("/proc/sys", "/proc/sys"), Dev()]
        # /dev read-only but for a private, sized /dev/shm (shm_open, semaphores)
        mounts += [Tmpfs("/dev/shm", policy.tmpfs_bytes), RemountRo("/dev")]
        mounts.append(Tmpfs("/tmp", policy.tmpfs_bytes))
        trees: list[tuple[str, int, bool]] = []
        for index, bind in enumerate(policy.binds + command.binds):
            pin = _pin(bind, uid)
            pinned.append(pin)
            staged = f"{STAGE}/b{index}"
            trees.append((staged, pin.tree_fd, pin.is_dir))
            mounts.append(RwBind(staged, bind.dest) if bind.writable else RoBind(staged, bind.dest))
        files = []
        for dest, content in synthetic_etc(policy.hostname).items():
            staged = f"{STAGE}/etc-{os.path.basename(dest)}"
            files.append((staged, content))
            mounts.append(RoBind(staged, dest))
        empty_dir = f"{STAGE}/empty"
        mounts += [RoBind(empty_dir, mask) for mask in command.masks]

        seccomp_read, seccomp_write = os.pipe()
        cleanups.append(lambda: os.close(seccomp_read))
        program = build_filter()
        written = os.write(seccomp_write, program)
        os.close(seccomp_write)
        if written != len(program):
            raise LaunchError("could not hand the seccomp program to bwrap")
        status_read, status_write = os.pipe()
        cleanups.append(lambda: os.close(status_read))
        cleanups.append(lambda: os.close(status_write))

        env = {**policy.env, **command.env}
        argv = build_argv(
            BwrapInvocation(
                mounts=mounts,
                command=command.argv,
                env=env,
                seccomp_fd=seccomp_target,
                status_fd=status_target,
                network=policy.network,
                hostname=policy.hostname,
                cwd=command.cwd,
            ),
            bwrap=executable,
        )
        fd_map = (
            *sorted(fd_targets.items()),
            (seccomp_target, seccomp_read),
            (status_target, status_write),
        )
        setup = _ChildSetup(
            fd_map=fd_map,
            cgroup_fds=tuple(cgroup.join_fds if cgroup else ()),
            rlimits=rlimits_for(policy),
            trees=tuple(trees),
            files=tuple(files),
            empty_dir=empty_dir,
            uid=uid,
            parent_pid=os.getpid(),
            status_fd=status_write,
        )
        return LaunchPlan(
            argv=argv,
            executable=executable,
            env={},
            pass_fds=tuple(t for t, _ in fd_map),
            preexec_fn=setup,
            uid=uid,
            cgroup=cgroup,
            policy=policy,
            status_read_fd=status_read,
            _child_fds=[seccomp_read, status_write, *(p.tree_fd for p in pinned)],
        )
    except BaseException:
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        raise


def _close_all(fds: Iterable[int]) -> None:
    for fd in list(fds):
        with contextlib.suppress(OSError):
            os.close(fd)


def command_for(argv: Sequence[str]) -> Command:
    """A `Command` for a plain program and its arguments."""
    return Command(tuple(argv))
