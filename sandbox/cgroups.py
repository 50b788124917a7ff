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
import shlex
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache

from .errors import ContainmentError, SandboxUnavailable
from .selfpath import sudo_sandvisor

PARENT_NAME = "sandvisor"
CGROUP_ROOT = "/sys/fs/cgroup"
#: On cgroup v2, the leaf a host moves itself into (with whatever shares its cgroup) so
#: that its own cgroup may enable controllers for the sandboxes' parent beside it.
HOST_LEAF = "sandvisor-host"
#: On cgroup v1, the subtree an administrator hands to an ordinary user, at the root of
#: each hierarchy (`sandvisor doctor --delegate USER --apply`): ``sandvisor-USER``.
DELEGATED_PREFIX = "sandvisor-"


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
    *,
    delegated_v1: Mapping[str, str] | None = None,
    v2_ours: bool = True,
) -> CgroupLayout:
    """Choose a hierarchy per role. ``v2_available``: controllers we can enable for
    sandboxes under our own v2 cgroup (what `detect_layout` found delegated); ``v2_ours``:
    we may make cgroups there at all (root, or a v2 cgroup delegated to this user).
    ``delegated_v1``: controller -> a v1 subtree handed to this user, used as the parent
    itself where our own v1 cgroup is not ours to write (an ordinary user's). A host
    found in its own leaf (`HOST_LEAF`) plans from the leaf's parent, its delegation."""
    by_dir: dict[str, set[str]] = {}
    versions: dict[str, int] = {}
    mounts = list(mounts)
    delegated_v1 = delegated_v1 or {}
    if own_v2 is not None and os.path.basename(own_v2) == HOST_LEAF:
        own_v2 = os.path.dirname(own_v2)
    v2 = next((m for m in mounts if m.version == 2), None)
    v2_dir = _own_dir(v2, own_v2) if v2 is not None and own_v2 is not None else None
    if v2_dir is not None and v2_ours:
        parent = os.path.join(v2_dir, PARENT_NAME)
        by_dir[parent] = {"kill"}
        versions[parent] = 2
        for role in ("memory", "pids"):
            if role in v2_available:
                by_dir[parent].add(role)
    else:
        v2_dir = None
    for role, controller in (("memory", "memory"), ("pids", "pids"), ("freeze", "freezer")):
        if any(role in roles for roles in by_dir.values()):
            continue
        if role == "freeze" and v2_dir is not None:
            continue  # cgroup.kill is better than freeze-then-kill
        if controller in delegated_v1:
            parent = delegated_v1[controller]
            by_dir.setdefault(parent, set()).add(role)
            versions[parent] = 1
            continue
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


def _delegate_v2(own_dir: str) -> tuple[frozenset[str], str]:
    """Enable memory and pids for a ``sandvisor`` parent under ``own_dir`` if we can; the
    controllers it got, and why not the others. A cgroup that holds processes may not
    enable controllers for its children (cgroup v2's "no internal processes"): then the
    host moves itself, and whatever else shares its cgroup, into a leaf (`HOST_LEAF`)."""
    try:
        available = set(_read(os.path.join(own_dir, "cgroup.controllers")).split())
        enabled = set(_read(os.path.join(own_dir, "cgroup.subtree_control")).split())
    except OSError as exc:
        return frozenset(), f"cannot read {own_dir}: {exc.strerror}"
    wanted = {"memory", "pids"} & available
    why = (
        ""
        if wanted == {"memory", "pids"}
        else (
            f"cgroup v2: {own_dir} is not given "
            + " and ".join(sorted({"memory", "pids"} - available))
        )
    )
    if wanted - enabled and not _enable(own_dir, wanted - enabled):
        moved = _into_leaf(own_dir)
        if moved:
            why = moved
        elif not _enable(own_dir, wanted - enabled):
            why = f"cgroup v2: cannot enable {' and '.join(sorted(wanted))} in {own_dir}"
    enabled = set(_read(os.path.join(own_dir, "cgroup.subtree_control")).split())
    parent = os.path.join(own_dir, PARENT_NAME)
    ok = set()
    if wanted & enabled:
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent)
        _enable(parent, wanted & enabled)
        with contextlib.suppress(OSError):
            ok = set(_read(os.path.join(parent, "cgroup.subtree_control")).split()) & wanted
    return frozenset(ok), why


def _enable(path: str, controllers: set[str]) -> bool:
    """Enable ``controllers`` for the children of ``path``; False if one is refused."""
    done = True
    for controller in sorted(controllers):
        try:
            _write(os.path.join(path, "cgroup.subtree_control"), f"+{controller}")
        except OSError:  # EBUSY: it holds processes
            done = False
    return done


def _into_leaf(own_dir: str) -> str:
    """Move every process of ``own_dir`` into ``own_dir/HOST_LEAF``; "" when it holds
    none any more, else why not."""
    leaf = os.path.join(own_dir, HOST_LEAF)
    try:
        os.makedirs(leaf, exist_ok=True)
        pids = _read(os.path.join(own_dir, "cgroup.procs")).split()
    except OSError as exc:
        return f"cgroup v2: cannot make the host a leaf of its own under {own_dir}: {exc.strerror}"
    stuck = []
    for pid in pids:
        try:
            _write(os.path.join(leaf, "cgroup.procs"), pid)
        except OSError as exc:
            if exc.errno != errno.ESRCH:  # gone meanwhile: fine
                stuck.append(pid)
    if stuck:
        return (
            f"cgroup v2: {own_dir} also holds processes this user cannot move "
            f"({', '.join(stuck[:5])}): run the host in a cgroup of its own"
        )
    return ""


def _v1_delegations(mounts: list[CgroupMount]) -> dict[str, str]:
    """controller -> the v1 subtree handed to this user (``sandvisor-USER`` at the root of
    the hierarchy, writable by us), for memory, pids and the freezer."""
    found = {}
    name = DELEGATED_PREFIX + user_name()
    for controller in ("memory", "pids", "freezer"):
        mount = next((m for m in mounts if m.version == 1 and controller in m.controllers), None)
        if mount is None or mount.root != "/":
            continue
        path = os.path.join(mount.mountpoint, name)
        if os.path.isdir(path) and os.access(path, os.W_OK):
            found[controller] = path
    return found


def user_name(uid: int | None = None) -> str:
    """The name of ``uid`` (default: this process's), or the number if it has none."""
    import pwd

    uid = os.geteuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def cgroup_mounts() -> list[CgroupMount]:
    """This machine's cgroup hierarchies, as this process sees them."""
    try:
        return parse_mountinfo(_read("/proc/self/mountinfo"))
    except OSError:
        return []


@cache
def detect_layout() -> CgroupLayout:
    """The layout of this machine for this process (cached: cgroups do not move). As root,
    its own cgroups; as an ordinary user, what was delegated to it: its own v2 cgroup if
    it may write there, else v1 subtrees an administrator handed over."""
    try:
        mounts = parse_mountinfo(_read("/proc/self/mountinfo"))
        own_v2, own_v1 = parse_proc_cgroup(_read("/proc/self/cgroup"))
    except OSError as exc:
        return CgroupLayout((), problems=(f"cannot read cgroup information: {exc}",))
    root = os.geteuid() == 0
    problems: list[str] = []
    v2 = next((m for m in mounts if m.version == 2), None)
    v2_available: frozenset[str] = frozenset()
    v2_ours = root
    if own_v2 is not None and os.path.basename(own_v2) == HOST_LEAF:
        own_v2 = os.path.dirname(own_v2)  # moved there by this host or a sibling already
    own = _own_dir(v2, own_v2) if v2 is not None and own_v2 is not None else None
    if own is not None:
        v2_ours = root or _writable(own)
        if v2_ours:
            v2_available, why = _delegate_v2(own)
            if why and (not root or v2_available):
                problems.append(why)
        elif not root:
            problems.append(f"cgroup v2: the host's cgroup {own} is not delegated to this user")
    delegated: dict[str, str] = {}
    if not root:  # our own v1 cgroups where they are ours, else what was handed over
        own_v1 = {c: path for c, path in own_v1.items() if _v1_writable(mounts, c, path)}
        delegated = {c: p for c, p in _v1_delegations(mounts).items() if c not in own_v1}
        for controller in ("memory", "pids"):
            v1_mounted = any(m.version == 1 and controller in m.controllers for m in mounts)
            if v1_mounted and controller not in delegated and controller not in own_v1:
                name = DELEGATED_PREFIX + user_name()
                problems.append(f"cgroup v1 {controller}: no {name} delegated to this user")
    layout = plan_layout(
        mounts, own_v2, own_v1, v2_available, delegated_v1=delegated, v2_ours=v2_ours
    )
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


def _v1_writable(mounts: list[CgroupMount], controller: str, own_path: str) -> bool:
    mount = next((m for m in mounts if m.version == 1 and controller in m.controllers), None)
    own = _own_dir(mount, own_path) if mount is not None else None
    return own is not None and _writable(own)


def _writable(directory: str) -> bool:
    """We may make cgroups in ``directory`` and move processes into them."""
    return os.access(directory, os.W_OK) and os.access(
        os.path.join(directory, "cgroup.procs"), os.W_OK
    )


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


def owner_alive(name: str) -> bool:
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


def sandbox_dirs(parent: str) -> Iterator[str]:
    """The names of the sandbox cgroups (``sv-...``) under ``parent``."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if entry.is_dir(follow_symlinks=False) and entry.name.startswith("sv-"):
                yield entry.name


def remove_stale(h: Hierarchy, name: str, timeout: float = 0.5) -> bool:
    """Kill what is in sandbox cgroup ``name`` of ``h`` and remove it; False if it stays."""
    path = os.path.join(h.parent, name)
    roles = {role: path for role in h.roles}
    stale = SandboxCgroup(name, roles, {role: h.version for role in h.roles})
    try:
        stale.kill()
        stale.remove(timeout=timeout)
    except (OSError, ContainmentError):
        return False
    return True


_collected: set[str] = set()


def collect_orphans(layout: CgroupLayout, *, again: bool = False) -> list[str]:
    """Remove the cgroups of sandboxes whose host died before cleaning up: kill what is in
    them, then rmdir. Runs once per parent and process (``again`` to scan once more)."""
    removed = []
    for h in layout.hierarchies:
        if h.parent in _collected and not again:
            continue
        _collected.add(h.parent)
        for name in sandbox_dirs(h.parent):
            if not owner_alive(name) and remove_stale(h, name):
                removed.append(os.path.join(h.parent, name))
    return removed


def limits_fix() -> str:
    """The fix for a host that cannot have cgroups for its sandboxes' limits."""
    per_process = (
        'or accept per-process limits (SandboxPolicy(limits="per-process"), '
        "--per-process-limits); or set the limit to None explicitly"
    )
    if os.geteuid() == 0:
        return (
            "run the host on a machine with cgroup v1 memory and pids hierarchies, or with "
            "cgroup v2 memory and pids delegated to the host's cgroup (e.g. "
            f"`systemd-run --scope -p Delegate=yes ...`); {per_process}"
        )
    user = user_name()
    delegate = sudo_sandvisor(f"doctor --delegate {shlex.quote(user)}")
    if any(m.version == 1 and "memory" in m.controllers for m in cgroup_mounts()):
        where = f"`{delegate} --apply` (cgroup v1 subtrees)"
    else:
        where = (
            "`systemd-run --user --scope -p Delegate=yes -- COMMAND` (cgroup v2, systemd), "
            f"or `{delegate} --apply`"
        )
    return f"have cgroups delegated to {user}: {where}; {per_process}"
