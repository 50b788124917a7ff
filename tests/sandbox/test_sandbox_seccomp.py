"""The seccomp program, run by a BPF interpreter on every architecture it supports.

The escape suite checks the same rules again with real syscalls on this machine; here
every rule is checked on x86_64 and aarch64, and properties hold over random syscalls
and arguments.
"""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.seccomp import (
    AF_VSOCK,
    ARCHES,
    AUDIT_ARCH_I386,
    CLONE_NEWNS,
    CLONE_NEWTIME,
    CLONE_NEWUSER,
    DENIED_ENOSYS,
    DENIED_EPERM,
    RET_ALLOW,
    RET_ERRNO,
    RET_KILL_PROCESS,
    TIOCLINUX,
    TIOCSTI,
    X32_SYSCALL_BIT,
    Arch,
    build_filter,
    evaluate,
    seccomp_data,
)

PROGRAM = build_filter()
EPERM = RET_ERRNO | errno.EPERM
ENOSYS = RET_ERRNO | errno.ENOSYS
arches = pytest.mark.parametrize("arch", ARCHES, ids=lambda a: a.name)


def verdict(arch: Arch, name: str | int, *args: int) -> int:
    nr = arch.syscalls[name] if isinstance(name, str) else name
    return evaluate(PROGRAM, seccomp_data(arch.audit_arch, nr, args))


def test_program_is_well_formed() -> None:
    assert len(PROGRAM) % 8 == 0 and 0 < len(PROGRAM) // 8 < 512
    assert build_filter() is PROGRAM  # built once


@arches
@pytest.mark.parametrize("name", DENIED_EPERM)
def test_denied_with_eperm(arch: Arch, name: str) -> None:
    assert verdict(arch, name) == EPERM


@arches
@pytest.mark.parametrize("name", DENIED_ENOSYS)
def test_denied_with_enosys(arch: Arch, name: str) -> None:
    assert verdict(arch, name) == ENOSYS


@arches
def test_tiocsti_and_tioclinux_compared_on_the_low_32_bits(arch: Arch) -> None:
    for request in (TIOCSTI, TIOCLINUX):
        assert verdict(arch, "ioctl", 0, request) == EPERM
        # CVE-2019-10063: high bits set must not slip past the comparison
        assert verdict(arch, "ioctl", 0, request | (1 << 32)) == EPERM
        assert verdict(arch, "ioctl", 0, request | (0xFFFFFFFF << 32)) == EPERM
    assert verdict(arch, "ioctl", 0, 0x5401) == RET_ALLOW  # TCGETS
    assert verdict(arch, "ioctl", 0, 0x541B) == RET_ALLOW  # FIONREAD


@arches
def test_vsock_sockets_denied_others_allowed(arch: Arch) -> None:
    assert verdict(arch, "socket", AF_VSOCK, 1, 0) == EPERM
    for family in (1, 2, 10, 16):  # unix, inet, inet6, netlink
        assert verdict(arch, "socket", family, 1, 0) == RET_ALLOW


@arches
def test_new_namespaces_denied_plain_clone_allowed(arch: Arch) -> None:
    thread_flags = 0x3D0F00  # what pthread_create passes
    assert verdict(arch, "clone", thread_flags) == RET_ALLOW
    assert verdict(arch, "clone", 17) == RET_ALLOW  # fork: SIGCHLD
    assert verdict(arch, "clone", 17 | CLONE_NEWUSER) == EPERM
    assert verdict(arch, "clone", 17 | CLONE_NEWNS) == EPERM
    assert verdict(arch, "unshare", CLONE_NEWUSER) == EPERM
    assert verdict(arch, "unshare", CLONE_NEWTIME) == EPERM
    assert verdict(arch, "unshare", 0x200) == RET_ALLOW  # CLONE_FS


def test_foreign_architectures_are_killed() -> None:
    assert evaluate(PROGRAM, seccomp_data(AUDIT_ARCH_I386, 1)) == RET_KILL_PROCESS
    assert evaluate(PROGRAM, seccomp_data(0x12345678, 0)) == RET_KILL_PROCESS


def test_x32_abi_is_refused_on_x86_64() -> None:
    x86 = ARCHES[0]
    assert evaluate(PROGRAM, seccomp_data(x86.audit_arch, X32_SYSCALL_BIT | 1)) == EPERM


@arches
def test_ordinary_syscalls_pass(arch: Arch) -> None:
    numbers = set(arch.syscalls.values())
    for nr in range(0, 200):
        if nr not in numbers:
            assert verdict(arch, nr, 1, 2, 3) == RET_ALLOW, nr


@given(
    st.sampled_from(ARCHES), st.integers(0, 1023), st.lists(st.integers(0, 2**64 - 1), max_size=6)
)
def test_verdicts_follow_the_policy_tables(arch: Arch, nr: int, args: list[int]) -> None:
    """For any syscall and arguments, the program says what the tables say."""
    by_number = {v: k for k, v in arch.syscalls.items()}
    name = by_number.get(nr)
    got = verdict(arch, nr, *args)
    low = [a & 0xFFFFFFFF for a in args] + [0] * 6
    if name in DENIED_EPERM:
        assert got == EPERM
    elif name in DENIED_ENOSYS:
        assert got == ENOSYS
    elif name == "ioctl":
        assert got == (EPERM if low[1] in (TIOCSTI, TIOCLINUX) else RET_ALLOW)
    elif name == "socket":
        assert got == (EPERM if low[0] == AF_VSOCK else RET_ALLOW)
    elif name in ("clone", "unshare"):
        assert got in (EPERM, RET_ALLOW)
    else:
        assert got == RET_ALLOW
