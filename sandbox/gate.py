"""The launch gate: what every launch consults before it starts anything.

`require` runs cheap checks (files and one syscall each, cached per process) for what the
given policy needs; the first thing missing raises `SandboxUnavailable` naming it and
its fix, so a launch never runs a weaker sandbox. The same checks are the first part of
`sandvisor doctor`'s report (`sandbox.probe`), which adds what only a person needs to
see. `bwrap_path` is which bubblewrap every launch runs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from . import linux
from .cgroups import detect_layout, limits_fix, user_name
from .errors import SandboxUnavailable
from .policy import SandboxPolicy
from .seccomp import native_arch

Status = Literal["ok", "missing", "warning", "info"]

_FIX_BWRAP = "install bubblewrap >= 0.8.0 (apt-get install bubblewrap)"
_FIX_BIND_FD = (
    "install bubblewrap >= 0.10.0 (Debian 12's 0.8.0 has --ro-bind-fd too), or run the host as root"
)


@dataclass(frozen=True)
class Check:
    """One finding. ``missing`` checks name the ``fix``; ``needed_for`` says what uses it."""

    name: str
    status: Status
    detail: str
    fix: str = ""
    needed_for: str = "every sandbox"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
            "needed_for": self.needed_for,
        }


def read_value(path: str) -> str | None:
    """A /proc or /sys file's content, stripped; None if it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


@cache
def bwrap_path() -> str:
    """``$SANDVISOR_BWRAP`` if set (exactly that file), else bwrap on PATH or in /usr/bin."""
    chosen = os.environ.get("SANDVISOR_BWRAP")
    if chosen is not None:
        if not _executable(chosen):
            raise SandboxUnavailable(
                "bubblewrap (bwrap)", _FIX_BWRAP, f"SANDVISOR_BWRAP={chosen} is not executable"
            )
        return chosen
    dirs = [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin"]
    path = next((p for d in dirs if d and _executable(p := os.path.join(d, "bwrap"))), "")
    if not path:
        raise SandboxUnavailable("bubblewrap (bwrap)", _FIX_BWRAP, "not found on PATH")
    return path


@cache
def bwrap_binds_by_fd() -> bool:
    """Whether this bwrap has ``--ro-bind-fd``/``--bind-fd`` (bubblewrap 0.10; Debian 12's
    0.8.0 has them too): a bind mounted from the fd that was checked."""
    try:
        out = subprocess.run(
            [bwrap_path(), "--help"], capture_output=True, text=True, timeout=10, env={}
        ).stdout
    except (SandboxUnavailable, OSError, subprocess.SubprocessError):
        return False
    return "--ro-bind-fd" in out


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def rootless() -> bool:
    """The host is an ordinary user: its sandboxes run as its own uid (root's each get a
    fresh one)."""
    return os.geteuid() != 0


def check_host_user() -> Check:
    if not rootless():
        return Check(
            "host user",
            "ok",
            "root: each sandbox runs as a fresh uid of its own (1000 inside)",
        )
    uid = os.geteuid()
    return Check(
        "host user",
        "ok",
        f"uid {uid} ({user_name(uid)}), rootless: sandboxes run as this user (1000 inside)",
    )


def check_arch() -> Check:
    arch = native_arch()
    if arch is None:
        return Check("architecture", "missing", os.uname().machine, "run on x86_64 or aarch64")
    return Check("architecture", "ok", f"{arch.name} (seccomp filter available)")


def check_bwrap_present() -> Check:
    try:
        return Check("bubblewrap", "ok", bwrap_path())
    except SandboxUnavailable as exc:
        return Check("bubblewrap", "missing", "bwrap not found on PATH", exc.fix)


def check_user_namespaces() -> Check:
    fix = ""
    problems = []
    sudo = "sudo " if rootless() else ""
    if read_value("/proc/sys/user/max_user_namespaces") == "0":
        problems.append("user.max_user_namespaces is 0")
        fix = f"{sudo}sysctl -w user.max_user_namespaces=15000"
    if read_value("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        problems.append("kernel.unprivileged_userns_clone is 0")
        fix = f"{sudo}sysctl -w kernel.unprivileged_userns_clone=1"
    if not os.path.exists("/proc/self/ns/user"):
        problems.append("the kernel has no user namespaces")
        fix = "use a kernel built with CONFIG_USER_NS"
    if problems:
        return Check("user namespaces", "missing", "; ".join(problems), fix)
    if doubtful():
        return bwrap_self_test()
    return Check("user namespaces", "ok", "unprivileged user namespaces enabled")


def doubtful() -> bool:
    """Whether bwrap may be refused what the sysctls allow: AppArmor restricts user
    namespaces (Ubuntu >= 23.10), or this process runs in a container or under a seccomp
    filter already (Docker's default refuses mounts and new namespaces)."""
    return read_value(APPARMOR_SYSCTL) == "1" or in_container() or under_seccomp()


def under_seccomp() -> bool:
    """This process already runs under a seccomp filter (inherited: a container, a
    systemd unit's ``SystemCallFilter=``/``RestrictNamespaces=``, a sandbox)."""
    status = read_value("/proc/self/status") or ""
    return any(line.split() == ["Seccomp:", "2"] for line in status.splitlines())


APPARMOR_SYSCTL = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"

FIX_APPARMOR = (
    "load AppArmor's profile for bwrap (Ubuntu 24.04: sudo apt install apparmor-profiles && "
    "sudo cp /usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && "
    "sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict), or allow unprivileged "
    "user namespaces: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
)
FIX_CONTAINER = (
    "run the container with user namespaces and mounts allowed to its processes (Docker, "
    "Podman: --security-opt seccomp=unconfined --security-opt apparmor=unconfined, or a "
    "seccomp profile that allows unshare, clone with namespace flags, and mount), or run "
    "sandvisor on the host"
)
FIX_SECCOMP = (
    "start the host outside that filter, or have it allow unshare, clone with namespace "
    "flags, and mount (a systemd unit: RestrictNamespaces=no and no SystemCallFilter= "
    "denying @mount)"
)
FIX_UNKNOWN = (
    "run `bwrap --unshare-all --ro-bind / / /bin/true` as this user to see what refuses it"
)


def in_container() -> bool:
    """Docker, Podman or a Kubernetes pod, as far as this process can tell."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    text = read_value("/proc/self/cgroup") or ""
    return any(word in text for word in ("docker", "kubepods", "containerd", "libpod"))


@cache
def bwrap_self_test() -> Check:
    """bwrap itself, once per process, as a sandbox's uid, in the namespaces a sandbox
    uses: what the sysctls cannot say (an AppArmor or container policy refusing it)."""
    argv = [bwrap_path(), "--unshare-all", "--unshare-user", "--disable-userns"]
    argv += ["--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    argv += ["/bin/true"]
    as_uid: dict[str, Any] = {}
    if not rootless():  # as root, a sandbox's bwrap runs as a fresh uid: so does this one
        uid = 0x70000000 + int.from_bytes(os.urandom(3), "little")
        as_uid = {"user": uid, "group": uid, "extra_groups": []}
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env={}, cwd="/", **as_uid
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("user namespaces", "missing", f"bwrap could not run: {exc}", _FIX_BWRAP)
    if done.returncode == 0:
        return Check("user namespaces", "ok", "unprivileged user namespaces work for bwrap")
    said = " ".join(done.stderr.split())[:300] or f"bwrap exited {done.returncode}"
    if read_value(APPARMOR_SYSCTL) == "1" and "Permission denied" in said:
        detail = (
            f"AppArmor restricts unprivileged user namespaces, and bwrap has no profile: {said}"
        )
        return Check("user namespaces", "missing", detail, FIX_APPARMOR)
    if in_container():
        detail = f"this container refuses bwrap its namespaces or mounts: {said}"
        return Check("user namespaces", "missing", detail, FIX_CONTAINER)
    if under_seccomp() and any(word in said for word in _REFUSED):
        detail = f"a seccomp filter this process runs under refuses bwrap: {said}"
        return Check("user namespaces", "missing", detail, FIX_SECCOMP)
    return Check("user namespaces", "missing", said, FIX_UNKNOWN)


#: How bwrap says a namespace or mount was refused (EPERM).
_REFUSED = ("Operation not permitted", "No permissions to create new namespace")


def check_seccomp() -> Check:
    status = read_value("/proc/self/status") or ""
    actions = read_value("/proc/sys/kernel/seccomp/actions_avail") or ""
    if "Seccomp:" not in status or not {"errno", "kill_process"} <= set(actions.split()):
        return Check(
            "seccomp",
            "missing",
            f"filter actions available: {actions or 'none'}",
            "use a kernel built with CONFIG_SECCOMP_FILTER (Linux >= 4.14)",
        )
    return Check("seccomp", "ok", "BPF filters with errno and kill_process")


def check_mount_api() -> Check:
    """openat2 (binds are checked through it) and pidfds (sandboxes are waited on and
    killed through them); as root also open_tree, which pins a source the sandbox's fresh
    uid cannot reach. A rootless host never pins: it reached the source for the check."""
    fix = "upgrade to Linux >= 5.6 (openat2 and pidfd_open)"
    try:
        fd = linux.open_path_no_symlinks("/")
        pidfd = os.pidfd_open(os.getpid())
        os.close(pidfd)
    except (OSError, AttributeError) as exc:
        return Check("mount API and pidfd", "missing", str(exc), fix)
    try:
        if rootless():
            return Check("mount API and pidfd", "ok", "openat2, pidfd_open")
        try:
            os.close(linux.clone_tree(fd))
        except OSError as exc:
            return Check(
                "mount API and pidfd",
                "warning",
                f"open_tree: {exc.strerror} (no CAP_SYS_ADMIN here?): a bind the sandbox's "
                "uid cannot reach fails its launch",
                "give the host CAP_SYS_ADMIN, or make bind sources reachable by any uid",
                needed_for="binds behind a directory only root can enter",
            )
        return Check("mount API and pidfd", "ok", "openat2, open_tree, move_mount, pidfd_open")
    finally:
        os.close(fd)


def check_bind_fd() -> Check:
    if bwrap_binds_by_fd():
        return Check(
            "bind by fd",
            "ok",
            "bwrap mounts each bind from the fd that was checked (--ro-bind-fd)",
            needed_for="binds",
        )
    status: Status = "missing" if rootless() else "warning"
    detail = "bwrap lacks --ro-bind-fd" + ("" if rootless() else ": as root, binds are pinned")
    return Check("bind by fd", status, detail, _FIX_BIND_FD, needed_for="binds (workers)")


def cgroup_checks() -> list[Check]:
    layout = detect_layout()
    checks = [
        Check(
            "cgroup kill",
            "ok" if layout.hierarchies else "info",
            layout.kill_mechanism,
            needed_for="a clean kill of the whole sandbox",
        )
    ]
    fix = limits_fix()
    for role, needed in (("memory", "memory_bytes"), ("pids", "pids")):
        where = next((h for h in layout.hierarchies if role in h.roles), None)
        if where is None:
            detail = "; ".join(layout.problems) or f"no writable {role} controller"
            needed_for = f"policies with {needed}"
            checks.append(Check(f"cgroup {role}", "missing", detail, fix, needed_for))
        else:
            checks.append(
                Check(
                    f"cgroup {role}",
                    "ok",
                    f"cgroup v{where.version} at {where.parent}",
                    needed_for=f"policies with {needed}",
                )
            )
    return checks


@cache
def _static() -> tuple[Check, ...]:
    return (
        check_host_user(),
        check_arch(),
        check_bwrap_present(),
        check_user_namespaces(),
        check_seccomp(),
        check_mount_api(),
    )


def require(policy: SandboxPolicy) -> None:
    """Raise `SandboxUnavailable` for the first thing ``policy`` needs that is missing."""
    checks = list(_static())
    per_process = policy.limits == "per-process"  # accepted where no cgroup can be had
    if not per_process and (policy.memory_bytes is not None or policy.pids is not None):
        checks += [c for c in cgroup_checks() if c.name != "cgroup kill"]
        if policy.memory_bytes is None:
            checks = [c for c in checks if c.name != "cgroup memory"]
        if policy.pids is None:
            checks = [c for c in checks if c.name != "cgroup pids"]
    for check in checks:
        if check.status == "missing":
            raise SandboxUnavailable(check.name, check.fix, check.detail)
