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
from .cgroups import detect_layout, limits_fix
from .errors import SandboxUnavailable
from .policy import SandboxPolicy
from .seccomp import native_arch

Status = Literal["ok", "missing", "warning", "info"]

_FIX_BWRAP = "install bubblewrap >= 0.8.0 (apt-get install bubblewrap)"


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


def check_root() -> Check:
    if os.geteuid() == 0:
        return Check("root", "ok", "the host runs as root; each sandbox gets its own non-root uid")
    return Check(
        "root",
        "missing",
        f"the host runs as uid {os.geteuid()}",
        "run the host as root: sandvisor stages binds and sets cgroup limits with root's help, "
        "then drops every sandbox to a fresh non-root uid",
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
    if read_value("/proc/sys/user/max_user_namespaces") == "0":
        problems.append("user.max_user_namespaces is 0")
        fix = "sysctl -w user.max_user_namespaces=15000"
    if read_value("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        problems.append("kernel.unprivileged_userns_clone is 0")
        fix = "sysctl -w kernel.unprivileged_userns_clone=1"
    if not os.path.exists("/proc/self/ns/user"):
        problems.append("the kernel has no user namespaces")
        fix = "use a kernel built with CONFIG_USER_NS"
    if problems:
        return Check("user namespaces", "missing", "; ".join(problems), fix)
    return Check("user namespaces", "ok", "unprivileged user namespaces enabled")


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
    fix = "upgrade to Linux >= 5.6 (openat2, open_tree and move_mount pin bind sources)"
    try:
        fd = linux.open_path_no_symlinks("/")
        try:
            os.close(linux.clone_tree(fd))
        finally:
            os.close(fd)
        pidfd = os.pidfd_open(os.getpid())
        os.close(pidfd)
    except (OSError, AttributeError) as exc:
        return Check("mount API and pidfd", "missing", str(exc), fix)
    return Check("mount API and pidfd", "ok", "openat2, open_tree, move_mount, pidfd_open")


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
        check_root(),
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
