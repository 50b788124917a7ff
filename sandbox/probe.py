"""`sandvisor doctor`'s report: what this machine can sandbox, what is missing, and the
command that fixes it.

`probe` runs the launch gate's checks (`sandbox.gate`: what every launch consults), then
what only a person needs to see: bubblewrap's version, the AppArmor restriction, and a
smoke test that starts a real sandbox with the default policy. Nothing here is on a
launch's path.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import SandboxError
from .gate import (
    Check,
    bwrap_path,
    cgroup_checks,
    check_arch,
    check_bwrap_present,
    check_mount_api,
    check_root,
    check_seccomp,
    check_user_namespaces,
    read_value,
)
from .policy import SandboxPolicy

MIN_BWRAP = (0, 8, 0)


@dataclass(frozen=True)
class ProbeReport:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status != "missing" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}


def check_bwrap_version() -> Check:
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


def check_apparmor() -> Check:
    value = read_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
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
