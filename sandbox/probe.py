"""`sandvisor doctor`'s report: what this machine can sandbox, what is missing, and the
command that fixes it.

`probe` runs the launch gate's checks (`sandbox.gate`: what every launch consults, with
bwrap's own self-test always), then what only a person needs to see: bubblewrap's
version, AppArmor and containers, what this user's sandboxes get here and what root would
add, leftovers of dead hosts (`sandbox.leftovers`), and a smoke test that starts a real
sandbox with the default policy. Nothing here is on a launch's path.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import leftovers
from .cgroups import detect_layout
from .errors import SandboxError
from .gate import (
    APPARMOR_SYSCTL,
    Check,
    bwrap_path,
    bwrap_self_test,
    cgroup_checks,
    check_arch,
    check_bind_fd,
    check_bwrap_present,
    check_host_user,
    check_mount_api,
    check_seccomp,
    check_user_namespaces,
    in_container,
    read_value,
    rootless,
)
from .limits import host_process_ceiling, shared_uid_nproc
from .policy import SandboxPolicy
from .selfpath import sandvisor_command

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


def check_userns_for_bwrap() -> Check:
    """The sysctls, then bwrap itself (a launch runs it only where something is doubtful;
    doctor always)."""
    found = check_user_namespaces()
    return bwrap_self_test() if found.status == "ok" else found


def check_apparmor() -> Check:
    name = "AppArmor"
    if read_value(APPARMOR_SYSCTL) != "1":
        return Check(name, "ok", "unprivileged user namespaces not restricted")
    works = bwrap_self_test().status == "ok"
    detail = "kernel.apparmor_restrict_unprivileged_userns=1: " + (
        "bwrap has a profile that allows them" if works else "bwrap has no profile"
    )
    return Check(name, "ok" if works else "info", detail)


def check_container() -> Check:
    if not in_container():
        return Check("container", "info", "not in a container, as far as can be told")
    works = bwrap_self_test().status == "ok"
    detail = "in a container: " + (
        "it lets bwrap have its namespaces and mounts"
        if works
        else "its policy refuses bwrap (see user namespaces)"
    )
    return Check("container", "info", detail)


def check_this_users_sandboxes() -> list[Check]:
    """The rootless section: which guarantees this user's sandboxes get here and which
    are degraded; as root, what an ordinary user would get. And what root adds."""
    layout = detect_layout()
    limits = layout.provides("memory") and layout.provides("pids")
    if rootless():
        isolation = (
            "namespaces, seccomp, no capabilities, read-only binds as for root; the sandboxes "
            "run as this user's uid (1000 inside): a writable bind's new files are this "
            "user's, and its sandboxes share the uid's process count"
        )
        checks = [Check("rootless", "ok", isolation, needed_for="this user's sandboxes")]
        if limits:
            where = ", ".join(sorted({h.parent for h in layout.hierarchies}))
            text = f"memory and pids by cgroups delegated to this user ({where})"
            checks.append(Check("rootless limits", "ok", text))
        else:
            nproc, reserve = shared_uid_nproc(host_process_ceiling())
            text = (
                "no cgroup for this user: the default policy is refused; with "
                "--per-process-limits (SandboxPolicy(limits='per-process')) memory is "
                "RLIMIT_AS per process (no total cap, no OOM classification) and pids a "
                f"ceiling of {nproc} processes shared with this host ({reserve} kept for it)"
            )
            checks.append(Check("rootless limits", "info", text))
        checks.append(
            Check(
                "what root adds",
                "info",
                "a fresh uid per sandbox (no uid shared with the host or between sandboxes, "
                "a pids limit exact per sandbox even without a cgroup), binds of what only "
                "root can reach (pinned), and its own cgroups without delegation",
            )
        )
        return checks
    return [
        Check(
            "what root adds",
            "ok",
            "a fresh uid per sandbox, pinned binds of what only root can reach, its own "
            "cgroups; an ordinary user gets the same namespaces, seccomp and binds, with "
            f"limits from a delegated cgroup ({sandvisor_command()} doctor --delegate USER "
            "--apply) or per-process limits, its sandboxes sharing its uid",
        )
    ]


def check_leftovers() -> Check:
    found = leftovers.find()
    if not found:
        return Check("leftovers", "ok", "nothing left behind by dead hosts")
    return Check(
        "leftovers",
        "warning",
        found.describe(),
        "sandvisor doctor --sweep" + (" (as root, for every user's)" if not rootless() else ""),
        needed_for="a clean machine (the next host of the same user collects cgroups too)",
    )


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
        check_host_user,
        check_arch,
        check_bwrap_present,
        check_bwrap_version,
        check_userns_for_bwrap,
        check_apparmor,
        check_container,
        check_seccomp,
        check_mount_api,
        check_bind_fd,
        cgroup_checks,
        check_this_users_sandboxes,
        check_leftovers,
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
