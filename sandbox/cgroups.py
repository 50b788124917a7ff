"""Per-sandbox cgroups: limits that bwrap lacks, a clean kill, and the counters that say why.

Every sandbox gets cgroups of its own, named after it, under a ``sandvisor`` parent that is
created beside the host's own cgroup in each hierarchy and holds no limits itself (two
sandboxes never share a limit: snekbox #83). Nesting under the host's cgroup means a
sandbox can never escape a limit the host itself lives under.

Which hierarchy does what is chosen per machine:

- cgroup v2 (unified): ``cgroup.kill`` for an atomic kill of the whole tree, and, where its
  controllers are delegated to us, ``memory.max``/``pids.max`` and their event counters;
- cgroup v1 (hybrid machines, as root): ``memory.limit_in_bytes`` (+ memsw, so no swap
  escape), ``pids.max``, and the freezer when there is no ``cgroup.kill``.

The child joins before bwrap starts, so nothing of the sandbox ever runs outside, through
fds opened here: on v1 it writes ``0`` to ``tasks`` (it is a single thread, and moving one
thread skips the kernel's global threadgroup lock, Linux >= 6.0); on v2 a fork server's
child is born in its directory (``CLONE_INTO_CGROUP``), and only a child forked otherwise
writes ``0`` to ``cgroup.procs``, which takes that lock and waits for an RCU grace period
(8-10 ms measured here). The parsing and the choice are pure functions; `SandboxCgroup`
does the I/O.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache

from .errors import ContainmentError, SandboxUnavailable

PARENT_NAME = "sandvisor"
CGROUP_ROOT = "/sys/fs/cgroup"


# --- pure parsing ---------------------------------------------------------------------


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 4 <= len(path) and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class CgroupMount:
    """One mounted hierarchy: v2 (``controllers`` empty here) or v1 with its controllers."""

    version: int
    mountpoint: str
    root: str
    controllers: frozenset[str]


def parse_mountinfo(text: str) -> list[CgroupMount]:
    """The cgroup and cgroup2 mounts of a ``/proc/self/mountinfo``."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        fstype, _source, superopts = [*right.split(), "", "", ""][:3]
        if fstype not in ("cgroup", "cgroup2") or len(fields) < 5:
            continue
        root, mountpoint = _unescape(fields[3]), _unescape(fields[4])
        if fstype == "cgroup2":
            mounts.append(CgroupMount(2, mountpoint, root, frozenset()))
        else:
            opts = {o for o in superopts.split(",") if o not in ("rw", "ro")}
            controllers = frozenset(o for o in opts if "=" not in o)
            if controllers:
                mounts.append(CgroupMount(1, mountpoint, root, controllers))
    return mounts


def parse_proc_cgroup(text: str) -> tuple[str | None, dict[str, str]]:
    """(v2 path, {v1 controller: path}) of a ``/proc/<pid>/cgroup``."""
    v2: str | None = None
    v1: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        if hid == "0" and controllers == "":
            v2 = path
        else:
            for c in controllers.split(","):
                if c and "=" not in c:
                    v1[c] = path
    return v2, v1


def _own_dir(mount: CgroupMount, own_path: str) -> str | None:
    """The directory of our own cgroup inside ``mount``, or None if it is not visible."""
    root = mount.root.rstrip("/")
    if root and own_path != root and not own_path.startswith(root + "/"):
        return None
    rel = own_path[len(root) :].lstrip("/")
    return os.path.join(mount.mountpoint, rel) if rel else mount.mountpoint


@dataclass(frozen=True)
class Hierarchy:
    """Where a sandbox's cgroup for one role lives: ``parent/<sandbox name>``."""

    version: int
    parent: str
    roles: frozenset[str]  # subset of {"kill", "freeze", "memory", "pids"}


@dataclass(frozen=True)
class CgroupLayout:
    """The hierarchies this machine offers to sandboxes, and which role each plays."""

    hierarchies: tuple[Hierarchy, ...]
    v2_controllers: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()

    def provides(self, role: str) -> bool:
        return any(role in h.roles for h in self.hierarchies)

    @property
    def kill_mechanism(self) -> str:
        if self.provides("kill"):
            return "cgroup.kill"
        if self.provides("freeze"):
            return "freezer"
        return "pid namespace"


def plan_layout(
    mounts: Iterable[CgroupMount],
    own_v2: str | None,
    own_v1: Mapping[str, str],
    v2_available: frozenset[str],
) -> CgroupLayout:
    """Choose a hierarchy per role. ``v2_available``: controllers we can enable for
    sandboxes under our own v2 cgroup (what `CgroupLayout.detect` found delegated)."""
    by_dir: dict[str, set[str]] = {}
    versions: dict[str, int] = {}
    mounts = list(mounts)
    v2 = next((m for m in mounts if m.version == 2), None)
    v2_dir = _own_dir(v2, own_v2) if v2 is not None and own_v2 is not None else None
    if v2_dir is not None:
        parent = os.path.join(v2_dir, PARENT_NAME)
        by_dir[parent] = {"kill"}
        versions[parent] = 2
        for role in ("memory", "pids"):
            if role in v2_available:
                by_dir[parent].add(role)
    for role, controller in (("memory", "memory"), ("pids", "pids"), ("freeze", "freezer")):
        if any(role in roles for roles in by_dir.values()):
            continue
        if role == "freeze" and v2_dir is not None:
            continue  # cgroup.kill is better than freeze-then-kill
        mount = next((m for m in mounts if m.version == 1 and controller in m.controllers), None)
        if mount is None or controller not in own_v1:
            continue
        own = _own_dir(mount, own_v1[controller])
        if own is None:
            continue
        parent = os.path.join(own, PARENT_NAME)
        by_dir.setdefault(parent, set()).add(role)
        versions[parent] = 1
    hierarchies = tuple(
        Hierarchy(versions[d], d, frozenset(roles)) for d, roles in sorted(by_dir.items())
    )
    return CgroupLayout(hierarchies, v2_available)


def _read(path: str) -> str:
    """The whole file (three syscalls: a text-mode `open` makes eight of a cgroup file)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(fd)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _delegate_v2(own_dir: str) -> frozenset[str]:
    """Enable memory and pids for a ``sandvisor`` parent under ``own_dir`` if we can."""
    try:
        available = set(_read(os.path.join(own_dir, "cgroup.controllers")).split())
        enabled = set(_read(os.path.join(own_dir, "cgroup.subtree_control")).split())
    except OSError:
        return frozenset()
    wanted = {"memory", "pids"} & available
    for controller in sorted(wanted - enabled):
        with contextlib.suppress(OSError):  # EBUSY: our own cgroup holds processes
            _write(os.path.join(own_dir, "cgroup.subtree_control"), f"+{controller}")
    enabled = set(_read(os.path.join(own_dir, "cgroup.subtree_control")).split())
    parent = os.path.join(own_dir, PARENT_NAME)
    ok = set()
    if wanted & enabled:
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent)
        for controller in sorted(wanted & enabled):
            with contextlib.suppress(OSError):
                _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")
        with contextlib.suppress(OSError):
            ok = set(_read(os.path.join(parent, "cgroup.subtree_control")).split()) & wanted
    return frozenset(ok)


@cache
def detect_layout() -> CgroupLayout:
    """The layout of this machine for this process (cached: cgroups do not move)."""
    try:
        mounts = parse_mountinfo(_read("/proc/self/mountinfo"))
        own_v2, own_v1 = parse_proc_cgroup(_read("/proc/self/cgroup"))
    except OSError as exc:
        return CgroupLayout((), problems=(f"cannot read cgroup information: {exc}",))
    v2 = next((m for m in mounts if m.version == 2), None)
    v2_available: frozenset[str] = frozenset()
    problems: list[str] = []
    if v2 is not None and own_v2 is not None:
        own = _own_dir(v2, own_v2)
        if own is not None:
            v2_available = _delegate_v2(own)
    layout = plan_layout(mounts, own_v2, own_v1, v2_available)
    usable = []
    for h in layout.hierarchies:
        try:
            os.makedirs(h.parent, exist_ok=True)
        except OSError as exc:
            problems.append(f"cannot create {h.parent}: {exc.strerror}")
            continue
        if not os.access(h.parent, os.W_OK):
            problems.append(f"{h.parent} is not writable")
            continue
        usable.append(h)
    return CgroupLayout(tuple(usable), layout.v2_controllers, tuple(problems))


# --- a sandbox's cgroups --------------------------------------------------------------


@dataclass(frozen=True)
class CgroupCounters:
    """What the cgroups saw; None where the machine does not count it."""

    oom_kills: int | None = None
    memory_limit_hits: int | None = None
    pids_limit_hits: int | None = None
    peak_memory_bytes: int | None = None


def _keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            out[key] = int(value)
    return out


def host_start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of ``pid``, or None if it is gone."""
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


_own_start: tuple[int, int | None] = (-1, None)


def own_start_time() -> int | None:
    """`host_start_time` of this process (read once per process)."""
    global _own_start
    pid = os.getpid()
    if _own_start[0] != pid:
        _own_start = (pid, host_start_time(pid))
    return _own_start[1]


def sandbox_cgroup_name(uid: int, generation: int = 0) -> str:
    """``sv-<host pid>-<host start time>-<lifeline generation>-<uid>-<random>``: whose
    sandbox it is, so the host's lifeline (or a later host) can collect what a dead host
    left behind."""
    return f"sv-{os.getpid()}-{own_start_time()}-{generation}-{uid}-{os.urandom(4).hex()}"


def _owner_alive(name: str) -> bool:
    """Whether the host named in ``name`` still runs. A zombie host is dead: it holds no
    fd and cleans nothing up, and its parent may never reap it (a Ray worker whose raylet
    died first is reparented to a pid 1 that does not reap)."""
    parts = name.split("-")
    if len(parts) != 6 or parts[0] != "sv" or not parts[1].isdigit():
        return True  # not ours to judge
    pid = int(parts[1])
    return str(host_start_time(pid)) == parts[2] and not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return True  # gone meanwhile
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


@dataclass
class SandboxCgroup:
    """The cgroups of one sandbox, one directory per hierarchy of the layout."""

    name: str
    dirs: dict[str, str]  # role -> directory (several roles may share one)
    versions: dict[str, int]
    removed: bool = False
    _joins: list[tuple[int, int]] = field(default_factory=list)  # (version, fd to write 0 to)
    _birth_fd: int | None = None  # the v2 directory, for CLONE_INTO_CGROUP
    on_removed: Callable[[], None] | None = None

    @classmethod
    def create(
        cls,
        layout: CgroupLayout,
        name: str,
        *,
        memory_bytes: int | None,
        pids: int | None,
        open_joins: bool = True,
    ) -> SandboxCgroup:
        """Make the directories, set the limits, and (unless told not to) open what a
        child joins through; undo everything on failure."""
        collect_orphans(layout)
        if memory_bytes is not None and not layout.provides("memory"):
            raise SandboxUnavailable(
                "cgroup memory controller", limits_fix(), "the policy sets memory_bytes"
            )
        if pids is not None and not layout.provides("pids"):
            raise SandboxUnavailable("cgroup pids controller", limits_fix(), "the policy sets pids")
        made: list[str] = []
        dirs: dict[str, str] = {}
        versions: dict[str, int] = {}
        try:
            for h in layout.hierarchies:
                path = os.path.join(h.parent, name)
                os.mkdir(path)
                made.append(path)
                for role in h.roles:
                    dirs[role] = path
                    versions[role] = h.version
            group = cls(name, dirs, versions)
            group._set_limits(memory_bytes, pids)
            if open_joins:
                group.open_joins()
            return group
        except BaseException:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            raise

    def _set_limits(self, memory_bytes: int | None, pids: int | None) -> None:
        if memory_bytes is not None:
            d = self.dirs["memory"]
            if self.versions["memory"] == 2:
                _write(os.path.join(d, "memory.max"), str(memory_bytes))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), "0")
            else:
                _write(os.path.join(d, "memory.limit_in_bytes"), str(memory_bytes))
                memsw = os.path.join(d, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):
                    _write(memsw, str(memory_bytes))
        if pids is not None:
            _write(os.path.join(self.dirs["pids"], "pids.max"), str(pids))

    @property
    def paths(self) -> list[str]:
        return sorted(set(self.dirs.values()))

    def open_joins(self) -> None:
        """Open the files a child joins through (``tasks`` on v1, ``cgroup.procs`` on v2)
        and the v2 directory (to be born in); `close_join_fds` closes them."""
        if self._joins:
            return
        try:
            for path in self.paths:
                version = next(self.versions[r] for r, d in self.dirs.items() if d == path)
                joiner = os.path.join(path, "tasks" if version == 1 else "cgroup.procs")
                self._joins.append((version, os.open(joiner, os.O_WRONLY | os.O_CLOEXEC)))
                if version == 2:
                    self._birth_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except BaseException:
            self.close_join_fds()
            raise

    @property
    def join_fds(self) -> list[int]:
        """What a child writes ``0`` to (pre-exec) to join every hierarchy: v1 ``tasks``
        and v2 ``cgroup.procs``."""
        return [fd for _, fd in self._joins]

    @property
    def v1_join_fds(self) -> list[int]:
        """The ``tasks`` fds: what a child born in the v2 cgroup still writes to."""
        return [fd for version, fd in self._joins if version == 1]

    @property
    def birth(self) -> tuple[int, int] | None:
        """(directory fd, ``cgroup.procs`` fd) of the v2 cgroup, if there is one: a child
        cloned into the directory need not write to ``cgroup.procs``."""
        if self._birth_fd is None:
            return None
        return self._birth_fd, next(fd for version, fd in self._joins if version == 2)

    def close_join_fds(self) -> None:
        fds = [fd for _, fd in self._joins]
        if self._birth_fd is not None:
            fds.append(self._birth_fd)
        self._joins.clear()
        self._birth_fd = None
        for fd in fds:
            os.close(fd)

    def pids(self) -> set[int]:
        """Every process currently in any of the sandbox's cgroups."""
        found: set[int] = set()
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                found.update(int(x) for x in _read(os.path.join(path, "cgroup.procs")).split())
        return found

    def kill(self) -> None:
        """SIGKILL every process of the sandbox, including ones forking right now."""
        if self.removed:
            return
        if "kill" in self.dirs:
            with contextlib.suppress(FileNotFoundError):
                _write(os.path.join(self.dirs["kill"], "cgroup.kill"), "1")
            return
        if "freeze" in self.dirs:
            self._freeze_kill(self.dirs["freeze"])
            return
        kill_all(self.pids)

    def _freeze_kill(self, path: str) -> None:
        """v1: freeze (no more forks), SIGKILL everyone, thaw so the signals land."""
        state = os.path.join(path, "freezer.state")
        try:
            _write(state, "FROZEN")
            deadline = time.monotonic() + 0.5
            while _read(state).strip() != "FROZEN" and time.monotonic() < deadline:
                time.sleep(0.0005)
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(FileNotFoundError):
                _write(state, "THAWED")
        kill_all(self.pids)

    def counters(self) -> CgroupCounters:
        oom = hits = pid_hits = peak = None
        with contextlib.suppress(OSError):
            if "memory" in self.dirs:
                d = self.dirs["memory"]
                if self.versions["memory"] == 2:
                    events = _keyed(_read(os.path.join(d, "memory.events")))
                    oom, hits = events.get("oom_kill"), events.get("max")
                    if os.path.exists(os.path.join(d, "memory.peak")):
                        peak = int(_read(os.path.join(d, "memory.peak")))
                else:
                    oom = _keyed(_read(os.path.join(d, "memory.oom_control"))).get("oom_kill")
                    hits = int(_read(os.path.join(d, "memory.failcnt")))
                    peak = int(_read(os.path.join(d, "memory.max_usage_in_bytes")))
        with contextlib.suppress(OSError):
            if "pids" in self.dirs:
                pid_hits = _keyed(_read(os.path.join(self.dirs["pids"], "pids.events"))).get("max")
        return CgroupCounters(oom, hits, pid_hits, peak)

    def remove(self, timeout: float = 1.0) -> None:
        """Remove the directories once empty; kill stragglers; raise if they will not go."""
        if self.removed:
            return
        self.close_join_fds()
        deadline = time.monotonic() + timeout
        pending = self.paths
        delay = 0.0002
        while pending:
            still = []
            for path in pending:
                try:
                    os.rmdir(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        raise
                    still.append(path)
            pending = still
            if not pending:
                break
            if time.monotonic() > deadline:
                raise ContainmentError(
                    f"cgroups {pending} still hold processes {sorted(self.pids())} "
                    f"after {timeout:.1f}s"
                )
            self.kill()
            time.sleep(delay)
            delay = min(delay * 2, 0.01)
        self.removed = True
        if self.on_removed is not None:
            callback, self.on_removed = self.on_removed, None
            callback()


def kill_all(list_pids: Callable[[], set[int]]) -> None:
    """SIGCONT then SIGKILL every pid until none is left (bounded by the pids limit)."""
    for _ in range(1000):
        pids = list_pids()
        if not pids:
            return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)


def _children(parent: str) -> Iterator[str]:
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if entry.is_dir(follow_symlinks=False) and entry.name.startswith("sv-"):
                yield entry.name


_collected: set[str] = set()


def collect_orphans(layout: CgroupLayout, *, again: bool = False) -> list[str]:
    """Remove the cgroups of sandboxes whose host died before cleaning up: kill what is in
    them, then rmdir. Runs once per parent and process (``again`` to scan once more)."""
    removed = []
    for h in layout.hierarchies:
        if h.parent in _collected and not again:
            continue
        _collected.add(h.parent)
        for name in _children(h.parent):
            if _owner_alive(name):
                continue
            path = os.path.join(h.parent, name)
            roles = {role: path for role in h.roles}
            stale = SandboxCgroup(name, roles, {role: h.version for role in h.roles})
            with contextlib.suppress(OSError, ContainmentError):
                stale.kill()
                stale.remove(timeout=0.5)
                removed.append(path)
    return removed


def limits_fix() -> str:
    """The fix for a machine where this host cannot have cgroups for its limits."""
    return (
        "run the host as root on a machine with cgroup v1 memory and pids hierarchies, or "
        "with cgroup v2 memory and pids delegated to the host's cgroup (e.g. "
        "`systemd-run --scope -p Delegate=yes ...`); or accept per-process limits "
        '(SandboxPolicy(limits="per-process"), --per-process-limits); or set the limit to '
        "None explicitly"
    )
