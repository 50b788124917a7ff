"""`sandbox.gate` where a machine cannot sandbox, made for real around a real command: no
user namespaces (``user.max_user_namespaces`` is per user namespace, so 0 in one of our
own leaves the machine's untouched), and a seccomp filter refusing namespaces and mounts
(the one Docker's default profile amounts to: our own sandbox filter, loaded before the
command). Each refusal is one line with its fix, exit 125, and no sandbox started.

Not made here: AppArmor's ``apparmor_restrict_unprivileged_userns`` (this kernel has no
AppArmor; the check reads the sysctl and bwrap's "Permission denied")."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Callable

import pytest
from sandbox_helpers import SANDVISOR

from sandbox.seccomp import build_filter, native_arch

pytestmark = [pytest.mark.bwrap]

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_filter() -> Callable[[], None]:
    """A ``preexec_fn`` that puts the child under the sandbox's own seccomp filter (it
    denies unshare, clone with namespace flags and mount with EPERM, as Docker's does)."""
    program = build_filter()
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)

    def load() -> None:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")

    load.keep = (buf, fprog)  # type: ignore[attr-defined]  # alive until the fork
    return load


def refused(argv: list[str], **kwargs: object) -> str:
    """The one line ``argv`` (a sandvisor command) refused with, checked to be one."""
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,  # type: ignore[call-overload]
    )
    assert done.returncode == 125 and done.stdout == "", (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def without_user_namespaces(argv: list[str]) -> list[str]:
    """``argv`` in a user namespace of its own (the same uid) where no further user
    namespace may be made."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is missing")
    probe = subprocess.run([unshare, "-U", "-c", "--keep-caps", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -U -c --keep-caps: {probe.stderr.decode().strip()}")
    script = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    return [unshare, "-U", "-c", "--keep-caps", "sh", "-c", script, "sh", *argv]


def test_no_user_namespaces_refused_in_one_line_with_the_sysctl() -> None:
    line = refused(without_user_namespaces([*SANDVISOR, "exec", "--", "/bin/true"]))
    assert line.startswith("sandvisor exec: sandbox unavailable: user namespaces"), line
    assert "user.max_user_namespaces is 0" in line
    sudo = "sudo " if os.geteuid() != 0 else ""
    assert f"fix: {sudo}sysctl -w user.max_user_namespaces=" in line, line
    # doctor says the same, and still exits (1: something is missing)
    argv = without_user_namespaces([*SANDVISOR, "doctor", "--no-smoke"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "MISSING  user namespaces" in done.stdout and "max_user_namespaces is 0" in done.stdout
    # the machine's own limit is untouched
    with open("/proc/sys/user/max_user_namespaces") as f:
        assert int(f.read()) > 0


@pytest.mark.skipif(native_arch() is None, reason="no seccomp filter for this architecture")
def test_a_seccomp_filter_refusing_namespaces_is_named_with_its_fix() -> None:
    line = refused([*SANDVISOR, "exec", "--", "/bin/true"], preexec_fn=_load_filter())
    assert line.startswith("sandvisor exec: sandbox unavailable: user namespaces"), line
    assert "No permissions to create new namespace" in line or "not permitted" in line
    container = "this container refuses bwrap" in line
    assert container or "a seccomp filter this process runs under refuses bwrap" in line, line
    if container:  # as on this machine (/.dockerenv): Docker's fix
        assert "--security-opt seccomp=unconfined" in line
    # outside a container: the filter is named, not a container (the detection bypassed,
    # everything else real)
    ask = (
        "import sandbox.gate as g; g.in_container = lambda: False; "
        "from sandbox.policy import SandboxPolicy; from sandbox.errors import "
        "SandboxUnavailable\n"
        "try: g.require(SandboxPolicy(memory_bytes=None, pids=None))\n"
        "except SandboxUnavailable as e: print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", ask],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_load_filter(),
    )
    assert done.returncode == 0, done.stderr
    assert "a seccomp filter this process runs under refuses bwrap" in done.stdout
    assert "RestrictNamespaces=no" in done.stdout
