"""What this machine can sandbox, what is missing, and the command that fixes it.

`require` is what every launch consults: cheap checks (files and one syscall each,
cached per process) for what the given policy needs; the first thing missing raises
`SandboxUnavailable` naming it and its fix, so a launch never runs a weaker sandbox.
`probe` is what `sandvisor doctor` prints: the same checks, bubblewrap's version, and a
smoke test that starts a real sandbox with the default policy.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from . import linux
from .cgroups import detect_layout
from .errors import SandboxError, SandboxUnavailable
from .policy import SandboxPolicy
from .seccomp import native_arch

Status = Literal["ok", "missing", "warning", "info"]

MIN_BWRAP = (0, 8, 0)


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


@dataclass(frozen=True)
class ProbeReport:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status != "missing" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


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
    from .launch import bwrap_path

    try:
        return Check("bubblewrap", "ok", bwrap_path())
    except SandboxUnavailable as exc:
        return Check("bubblewrap", "missing", "bwrap not found on PATH", exc.fix)


def check_bwrap_version() -> Check:
    from .launch import bwrap_path

    try:
        out = subprocess.run(
            [bwrap_path(), "--version"], capture_output=True, text=True, timeout=10, env={}
        ).stdout
    except (SandboxError, OSError, subprocess.SubprocessError) as exc:
        return Check("bubblewrap version", "missing", str(exc), "install bubblewrap >= 0.8.0")
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    if not match:
        return Check("bubblewrap version", "warning", f"unrecognised: {out.strip()!r}")
    version = tuple(int(x) for x in match.groups())
    text = ".".join(map(str, version))
    if version < MIN_BWRAP:
        return Check(
            "bubblewrap version",
            "missing",
            f"{text} lacks --disable-userns",
            "install bubblewrap >= 0.8.0",
        )
    return Check("bubblewrap version", "ok", text)


def check_user_namespaces() -> Check:
    fix = ""
    problems = []
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        problems.append("user.max_user_namespaces is 0")
        fix = "sysctl -w user.max_user_namespaces=15000"
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        problems.append("kernel.unprivileged_userns_clone is 0")
        fix = "sysctl -w kernel.unprivileged_userns_clone=1"
    if not os.path.exists("/proc/self/ns/user"):
        problems.append("the kernel has no user namespaces")
        fix = "use a kernel built with CONFIG_USER_NS"
    if problems:
        return Check("user namespaces", "missing", "; ".join(problems), fix)
    return Check("user namespaces", "ok", "unprivileged user namespaces enabled")


def check_apparmor() -> Check:
    value = _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    if value == "1":
        return Check(
            "AppArmor user namespace restriction",
            "warning",
            "unprivileged user namespaces are restricted by AppArmor; bwrap needs a profile "
            "(the smoke test shows whether it has one)",
            "install an AppArmor profile allowing userns for /usr/bin/bwrap (Ubuntu: "
            "the bwrap-userns-restrict profile), or sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0",
        )
    return Check("AppArmor user namespace restriction", "ok", "not restricted")


def check_seccomp() -> Check:
    status = _read("/proc/self/status") or ""
    actions = _read("/proc/sys/kernel/seccomp/actions_avail") or ""
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
    fix = (
        "as root on cgroup v1, mount the memory and pids hierarchies under /sys/fs/cgroup; on "
        "cgroup v2, delegate memory and pids to the host's cgroup (systemd-run --scope -p "
        "Delegate=yes ...)"
    )
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
    if policy.memory_bytes is not None or policy.pids is not None:
        checks += [c for c in cgroup_checks() if c.name != "cgroup kill"]
        if policy.memory_bytes is None:
            checks = [c for c in checks if c.name != "cgroup memory"]
        if policy.pids is None:
            checks = [c for c in checks if c.name != "cgroup pids"]
    for check in checks:
        if check.status == "missing":
            raise SandboxUnavailable(check.name, check.fix, check.detail)


LIMIT_CHECKS = ("cgroup memory", "cgroup pids")


def smoke_test(limited: bool = True) -> Check:
    """Start a real sandbox with the default policy (without its memory and pids limits
    if the machine cannot set them) and check what it sees."""
    from .runner import run

    policy = SandboxPolicy() if limited else SandboxPolicy(memory_bytes=None, pids=None)
    script = "grep -E '^(Seccomp|NoNewPrivs|CapEff|Uid):' /proc/self/status"
    try:
        result = run(policy, ["/bin/sh", "-c", script], timeout=20)
    except SandboxError as exc:
        return Check("smoke test", "missing", str(exc), "fix the missing items above")
    out = result.stdout.decode(errors="replace")
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    values = {k: v.split() for k, v in fields.items()}
    good = (
        result.reason == "exited"
        and result.termination.exit_code == 0
        and values.get("Seccomp") == ["2"]
        and values.get("NoNewPrivs") == ["1"]
        and int(values.get("CapEff", ["1"])[0], 16) == 0
    )
    if not good:
        err = result.stderr.decode(errors="replace").strip()[-500:]
        return Check(
            "smoke test",
            "missing",
            f"{result.termination.detail}: {err or out}",
            "fix the missing items above",
        )
    which = "a default sandbox" if limited else "a sandbox without memory and pids limits"
    return Check(
        "smoke test",
        "ok",
        f"{which} started: seccomp on, no capabilities, "
        f"no new privileges, {result.duration * 1000:.0f} ms",
    )


def probe(smoke: bool = True) -> ProbeReport:
    """Everything `sandvisor doctor` reports."""
    steps: list[Callable[[], Check | list[Check]]] = [
        check_root,
        check_arch,
        check_bwrap_present,
        check_bwrap_version,
        check_user_namespaces,
        check_apparmor,
        check_seccomp,
        check_mount_api,
        cgroup_checks,
    ]
    checks: list[Check] = []
    for step in steps:
        try:
            found = step()
        except Exception as exc:  # a probe that breaks is itself a finding
            found = Check(step.__name__, "missing", f"probe failed: {type(exc).__name__}: {exc}")
        checks += found if isinstance(found, list) else [found]
    if smoke:
        usable = all(c.status != "missing" or c.name.startswith("cgroup") for c in checks)
        if usable:
            limited = all(c.status == "ok" for c in checks if c.name in LIMIT_CHECKS)
            checks.append(smoke_test(limited))
        else:
            checks.append(Check("smoke test", "info", "skipped: something it needs is missing"))
    return ProbeReport(tuple(checks))
