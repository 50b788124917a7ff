"""The seccomp filter handed to bwrap (``--seccomp FD``): classic BPF, generated here.

No libseccomp binding is available, and the program is small, so we assemble it ourselves
from a table per architecture. It is a denylist over the syscalls that cross the sandbox
boundary or attack the kernel: ptrace and cross-process memory access, io_uring (which
bypasses seccomp for the operations it performs), keyrings, bpf, perf, userfaultfd, the
whole mount API, new namespaces (unshare/clone flags, setns, clone3), kexec and modules,
AF_VSOCK sockets, and the TIOCSTI/TIOCLINUX ioctls compared on the low 32 bits of the
request (CVE-2019-10063: a filter that compares 64 bits is bypassed by setting high bits).

A foreign architecture (e.g. i386 through ``int 0x80``) kills the process; the x32 ABI
is refused. `evaluate` runs a program against one syscall so tests can check every rule
on every architecture without a kernel; the escape suite checks them again for real.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

# --- constants (linux/seccomp.h, linux/audit.h, linux/filter.h) ---------------------

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
OFF_NR = 0
OFF_ARCH = 4


def off_arg_low(index: int) -> int:
    """Offset of the low 32 bits of ``args[index]`` (little-endian architectures only)."""
    return 16 + 8 * index


BPF_LD_W_ABS = 0x20
BPF_JMP_JEQ_K = 0x15
BPF_JMP_JGE_K = 0x35
BPF_JMP_JSET_K = 0x45
BPF_RET_K = 0x06

AF_VSOCK = 40
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
#: clone() keeps the exit signal in its low byte, so CLONE_NEWTIME is only an unshare flag.
CLONE_NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)
UNSHARE_NAMESPACE_FLAGS = CLONE_NAMESPACE_FLAGS | CLONE_NEWTIME


# --- the policy, by syscall name ------------------------------------------------------

#: Refused with EPERM.
DENIED_EPERM: tuple[str, ...] = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "quotactl",
    "syslog",
    "vhangup",
)
#: Refused with ENOSYS, so libc and runtimes take their fallback path (clone3 -> clone).
DENIED_ENOSYS: tuple[str, ...] = (
    "clone3",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
#: Allowed unless an argument matches (checked by dedicated blocks below).
ARG_CHECKED: tuple[str, ...] = ("ioctl", "socket", "clone", "unshare")

#: Syscall numbers, from the kernel headers (asm/unistd_64.h and asm-generic/unistd.h).
SYSCALLS_X86_64: Mapping[str, int] = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "process_madvise": 440, "pidfd_getfd": 438, "keyctl": 250, "add_key": 248,
    "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "setns": 308, "kexec_load": 246, "kexec_file_load": 320,
    "init_module": 175, "finit_module": 313, "delete_module": 176,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "acct": 163, "swapon": 167,
    "swapoff": 168, "reboot": 169, "quotactl": 179, "syslog": 103, "vhangup": 153,
    "clone3": 435, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "ioctl": 16, "socket": 41, "clone": 56, "unshare": 272,
}  # fmt: skip
SYSCALLS_AARCH64: Mapping[str, int] = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
    "process_madvise": 440, "pidfd_getfd": 438, "keyctl": 219, "add_key": 217,
    "request_key": 218, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
    "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "setns": 268, "kexec_load": 104, "kexec_file_load": 294,
    "init_module": 105, "finit_module": 273, "delete_module": 106,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "acct": 89, "swapon": 224,
    "swapoff": 225, "reboot": 142, "quotactl": 60, "syslog": 116, "vhangup": 58,
    "clone3": 435, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "ioctl": 29, "socket": 198, "clone": 220, "unshare": 97,
}  # fmt: skip


@dataclass(frozen=True)
class Arch:
    name: str
    audit_arch: int
    syscalls: Mapping[str, int]
    has_x32: bool


ARCHES: tuple[Arch, ...] = (
    Arch("x86_64", AUDIT_ARCH_X86_64, SYSCALLS_X86_64, has_x32=True),
    Arch("aarch64", AUDIT_ARCH_AARCH64, SYSCALLS_AARCH64, has_x32=False),
)


# --- a tiny assembler with forward labels ---------------------------------------------


@dataclass(frozen=True)
class _Insn:
    code: int
    k: int
    jt: str | int = 0
    jf: str | int = 0


@dataclass(frozen=True)
class _Label:
    name: str


_Item = _Insn | _Label


def _assemble(items: Iterable[_Item]) -> bytes:
    """Resolve labels to relative forward jumps and pack ``struct sock_filter``s."""
    insns: list[_Insn] = []
    labels: dict[str, int] = {}
    for item in items:
        if isinstance(item, _Label):
            if item.name in labels:
                raise ValueError(f"duplicate label {item.name}")
            labels[item.name] = len(insns)
        else:
            insns.append(item)
    out = bytearray()
    for index, insn in enumerate(insns):
        jumps = []
        for target in (insn.jt, insn.jf):
            if isinstance(target, str):
                delta = labels[target] - index - 1
                if not 0 <= delta <= 255:
                    raise ValueError(f"jump to {target} out of range ({delta})")
                jumps.append(delta)
            else:
                jumps.append(target)
        out += struct.pack("=HBBI", insn.code, jumps[0], jumps[1], insn.k & 0xFFFFFFFF)
    if len(insns) > 4096:
        raise ValueError("BPF program too long")
    return bytes(out)


def _ld(offset: int) -> _Insn:
    return _Insn(BPF_LD_W_ABS, offset)


def _jeq(value: int, jt: str | int = 0, jf: str | int = 0) -> _Insn:
    return _Insn(BPF_JMP_JEQ_K, value, jt, jf)


def _ret(value: int) -> _Insn:
    return _Insn(BPF_RET_K, value)


def _arch_block(arch: Arch) -> list[_Item]:
    p = arch.name
    nr = arch.syscalls
    eperm, enosys = f"{p}_eperm", f"{p}_enosys"
    items: list[_Item] = [_Label(p), _ld(OFF_NR)]
    if arch.has_x32:
        items.append(_Insn(BPF_JMP_JGE_K, X32_SYSCALL_BIT, eperm, 0))
    for name in ARG_CHECKED:
        items.append(_jeq(nr[name], f"{p}_{name}"))
    for name in DENIED_ENOSYS:
        items.append(_jeq(nr[name], enosys))
    for name in DENIED_EPERM:
        items.append(_jeq(nr[name], eperm))
    items.append(_ret(RET_ALLOW))
    # ioctl(fd, request, ...): the request's low 32 bits only (CVE-2019-10063).
    items += [_Label(f"{p}_ioctl"), _ld(off_arg_low(1))]
    items += [_jeq(TIOCSTI, eperm), _jeq(TIOCLINUX, eperm), _ret(RET_ALLOW)]
    # socket(domain, ...): no AF_VSOCK.
    items += [_Label(f"{p}_socket"), _ld(off_arg_low(0)), _jeq(AF_VSOCK, eperm), _ret(RET_ALLOW)]
    # clone(flags, ...) and unshare(flags): no new namespaces.
    items += [_Label(f"{p}_clone"), _ld(off_arg_low(0))]
    items += [_Insn(BPF_JMP_JSET_K, CLONE_NAMESPACE_FLAGS, eperm, 0), _ret(RET_ALLOW)]
    items += [_Label(f"{p}_unshare"), _ld(off_arg_low(0))]
    items += [_Insn(BPF_JMP_JSET_K, UNSHARE_NAMESPACE_FLAGS, eperm, 0), _ret(RET_ALLOW)]
    items += [_Label(eperm), _ret(RET_ERRNO | errno.EPERM)]
    items += [_Label(enosys), _ret(RET_ERRNO | errno.ENOSYS)]
    return items


@cache
def build_filter() -> bytes:
    """The default filter for every supported architecture, as bwrap reads it."""
    items: list[_Item] = [_ld(OFF_ARCH)]
    for arch in ARCHES:
        items.append(_jeq(arch.audit_arch, arch.name))
    items.append(_ret(RET_KILL_PROCESS))
    for arch in ARCHES:
        items += _arch_block(arch)
    return _assemble(items)


def native_arch() -> Arch | None:
    """The architecture of this machine, or None if the filter does not support it."""
    machine = os.uname().machine
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return next((a for a in ARCHES if a.name == machine), None)


# --- an interpreter for the subset we emit (used by tests and `doctor`) ---------------


def seccomp_data(arch: int, nr: int, args: tuple[int, ...] = ()) -> bytes:
    """A ``struct seccomp_data`` as the kernel hands it to the filter."""
    full = tuple(args) + (0,) * (6 - len(args))
    return struct.pack("=iIQ6Q", nr, arch, 0, *(a & 0xFFFFFFFFFFFFFFFF for a in full))


def evaluate(program: bytes, data: bytes) -> int:
    """Run ``program`` on ``data``; return the filter's verdict (``RET_*`` value)."""
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc = 0
    pc = 0
    while pc < len(insns):
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == BPF_LD_W_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
        elif code == BPF_RET_K:
            return int(k)
        elif code in (BPF_JMP_JEQ_K, BPF_JMP_JGE_K, BPF_JMP_JSET_K):
            if code == BPF_JMP_JEQ_K:
                taken = acc == k
            elif code == BPF_JMP_JGE_K:
                taken = acc >= k
            else:
                taken = bool(acc & k)
            pc += jt if taken else jf
        else:
            raise ValueError(f"unsupported BPF opcode {code:#x}")
    raise ValueError("BPF program fell off its end")
