"""Escape suite, the kernel boundary: A6 vsock and io_uring, A8 ptrace and cross-process
memory, A10 TIOCSTI/TIOCLINUX, A11 privilege, A12 nested namespaces and mounts; and every
seccomp rule, with real syscalls from a real sandboxed program.

Where it can, a test uses arguments for which the kernel itself would answer something
else (ESRCH for a missing pid, EBADF for a bad fd, EFAULT for a bad pointer): EPERM then
proves the filter answered, not the kernel's later checks.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest
from sandbox_helpers import py_policy, run_json, run_py

from sandbox.launch import Command, prepare_launch
from sandbox.seccomp import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    DENIED_ENOSYS,
    DENIED_EPERM,
    TIOCLINUX,
    TIOCSTI,
)
from sandbox.spawn import spawn

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]

#: Arguments that fail in the kernel with something other than EPERM if not filtered.
GARBAGE = {
    "ptrace": (16, 999999, 0, 0),  # PTRACE_ATTACH to no such pid: ESRCH
    "process_vm_readv": (999999, 0, 0, 0, 0, 0),  # ESRCH
    "process_vm_writev": (999999, 0, 0, 0, 0, 0),
    "process_madvise": (-1, 0, 0, 0, 0),  # EBADF
    "pidfd_getfd": (-1, 0, 0),  # EBADF
    "keyctl": (0xDEAD, 0, 0, 0, 0),  # EOPNOTSUPP
    "add_key": (0, 0, 0, 0, 0),  # EFAULT
    "request_key": (0, 0, 0, 0),  # EFAULT
    "bpf": (0xDEAD, 0, 0),  # EINVAL
    "perf_event_open": (0, 0, 0, -1, 0),  # EFAULT
    "userfaultfd": (0xDEAD,),  # EINVAL
    "mount": (1, 1, 1, 0, 0),  # EFAULT
    "umount2": (1, 0),  # EFAULT
    "pivot_root": (1, 1),  # EFAULT
    "chroot": (1,),  # EFAULT
    "open_tree": (-1, 1, 0),  # EBADF/EFAULT
    "move_mount": (-1, 1, -1, 1, 0),
    "fsopen": (1, 0),  # EFAULT
    "fsconfig": (-1, 0, 0, 0, 0),  # EBADF
    "fsmount": (-1, 0, 0),  # EBADF
    "fspick": (-1, 1, 0),
    "mount_setattr": (-1, 1, 0, 0, 0),
    "setns": (-1, 0),  # EBADF
    "kexec_load": (0, 0, 0, 0xDEAD0000),  # EINVAL
    "kexec_file_load": (-1, -1, 0, 0, 0xDEAD),  # EINVAL
    "init_module": (0, 0, 1),  # EFAULT
    "finit_module": (-1, 0, 0xDEAD),  # EINVAL/EBADF
    "delete_module": (1, 0),  # EFAULT
    "open_by_handle_at": (-1, 0, 0),  # EBADF
    "name_to_handle_at": (-1, 1, 0, 0, 0),  # EFAULT/EBADF
    "acct": (1,),  # EFAULT
    "swapon": (1, 0),  # EFAULT
    "swapoff": (1,),  # EFAULT
    "reboot": (0, 0, 0, 0),  # EINVAL (bad magic)
    "quotactl": (0xDEAD, 1, 0, 0),  # EFAULT/EINVAL
    "syslog": (0xDEAD, 0, 0),  # EINVAL
    "vhangup": (),  # EPERM anyway (no CAP_SYS_TTY_CONFIG): covered by the simulator too
    "clone3": (0, 0),  # EFAULT/EINVAL
    "io_uring_setup": (1, 0),  # EFAULT
    "io_uring_enter": (-1, 0, 0, 0, 0, 0),  # EBADF
    "io_uring_register": (-1, 0, 0, 0),  # EBADF
}


def test_every_denied_syscall_is_refused_by_the_filter() -> None:
    assert set(GARBAGE) == set(DENIED_EPERM) | set(DENIED_ENOSYS)
    seen = run_json(
        f"G = {GARBAGE!r}\nout({{n: errno.errorcode.get(sc(n, *a), 0) for n, a in G.items()}})"
    )
    for name in DENIED_EPERM:
        assert seen[name] == "EPERM", (name, seen[name])
    for name in DENIED_ENOSYS:
        assert seen[name] == "ENOSYS", (name, seen[name])


def test_a6_vsock_refused_io_uring_unavailable_ordinary_sockets_fine() -> None:
    code = """
res = {}
try:
    socket.socket(40, socket.SOCK_STREAM); res["vsock"] = "created"
except OSError as e:
    res["vsock"] = errno.errorcode[e.errno]
params = ctypes.create_string_buffer(120)
res["io_uring_setup"] = errno.errorcode.get(sc("io_uring_setup", 8, params), 0)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.close()
res["others"] = "ok"
out(res)
"""
    assert run_json(code) == {"vsock": "EPERM", "io_uring_setup": "ENOSYS", "others": "ok"}


def test_a8_no_ptrace_no_cross_process_memory() -> None:
    code = """
res = {}
res["traceme"] = errno.errorcode[sc("ptrace", 0, 0, 0, 0)]
res["attach_init"] = errno.errorcode[sc("ptrace", 16, 1, 0, 0)]
res["seize_init"] = errno.errorcode[sc("ptrace", 0x4206, 1, 0, 0)]
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
res["vm_readv"] = errno.errorcode[sc("process_vm_readv", 1, iov, 1, iov, 1, 0)]
res["host_pid"] = errno.errorcode[sc("ptrace", 16, HOST, 0, 0)]
out(res)
""".replace("HOST", str(os.getpid()))
    res = run_json(code)
    assert res == {k: "EPERM" for k in res}, res


def test_a10_tiocsti_and_tioclinux_blocked_including_64_bit_requests() -> None:
    master, slave = os.openpty()
    try:
        code = f"""
res = {{}}
ch = ctypes.c_char_p(b"x")
res["sti_stdin"] = errno.errorcode.get(sc("ioctl", 0, {TIOCSTI}, ch), 0)
res["sti_64bit"] = errno.errorcode.get(sc("ioctl", 0, {TIOCSTI} | (1 << 32), ch), 0)
res["sti_badfd"] = errno.errorcode.get(sc("ioctl", -1, {TIOCSTI}, ch), 0)
res["sti_badfd_64"] = errno.errorcode.get(sc("ioctl", -1, {TIOCSTI} | (0xFFFF << 32), ch), 0)
res["linux_badfd"] = errno.errorcode.get(sc("ioctl", -1, {TIOCLINUX}, ch), 0)
res["tcgets_badfd"] = errno.errorcode.get(sc("ioctl", -1, 0x5401, ch), 0)
try:
    os.open("/dev/tty", os.O_RDWR); res["ctty"] = "opened"
except OSError as e:
    res["ctty"] = errno.errorcode[e.errno]
res["sid"] = os.getsid(0)
out(res)
"""
        res = run_json(code, stdin_fd=slave)
        assert res["sti_stdin"] == "EPERM" and res["sti_64bit"] == "EPERM"
        # the filter answers before the kernel looks at the fd:
        assert res["sti_badfd"] == res["sti_badfd_64"] == res["linux_badfd"] == "EPERM"
        assert res["tcgets_badfd"] == "EBADF"  # an allowed ioctl reaches the kernel
        # a session of its own (led inside the sandbox), without a controlling terminal
        assert res["ctty"] == "ENXIO" and res["sid"] <= 2
        os.set_blocking(master, False)
        try:
            injected = os.read(master, 100)
        except BlockingIOError:
            injected = b""
        assert b"x" not in injected
    finally:
        os.close(master)
        os.close(slave)


def test_a11_no_privilege_inside_and_not_root_outside() -> None:
    code = """
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
mounts = [l.split() for l in open("/proc/self/mountinfo").read().splitlines()]
res = {k: status[k].split() for k in ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd",
                                       "CapAmb", "NoNewPrivs", "Seccomp")}
try:
    os.setuid(0); res["setuid"] = "became root"
except OSError as e:
    res["setuid"] = errno.errorcode[e.errno]
res["nosuid_everywhere"] = all("nosuid" in m[5].split(",") or m[4] == "/proc" for m in mounts)
import subprocess
p = subprocess.run(["/usr/bin/mount", "-t", "tmpfs", "none", "/tmp"], capture_output=True)
res["setuid_mount_binary"] = p.returncode
out(res)
"""
    res = run_json(code)
    assert res["Uid"] == ["1000"] * 4 and res["Gid"] == ["1000"] * 4
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(res[cap][0], 16) == 0, cap
    assert res["NoNewPrivs"] == ["1"] and res["Seccomp"] == ["2"]
    assert res["setuid"] in ("EPERM", "EINVAL")  # EINVAL: root does not even exist inside
    assert res["nosuid_everywhere"] is True
    assert res["setuid_mount_binary"] != 0


def test_a11_every_process_runs_as_the_sandbox_own_non_root_host_uid() -> None:
    """A root host's sandbox: a fresh uid and group of its own. A rootless host's: the
    host's own uid (never root), mapped to 1000 inside, with no capability anywhere."""
    plan = prepare_launch(py_policy(), Command(("/bin/sh", "-c", "sleep 30 & sleep 30")))
    with spawn(plan) as sandbox:
        assert plan.cgroup is not None
        deadline = time.monotonic() + 5
        while len(plan.cgroup.pids()) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # bwrap, its init, sh and two sleeps
        procs = [psutil.Process(pid) for pid in plan.cgroup.pids()]
        assert len(procs) >= 4
        for proc in procs:
            assert set(proc.uids()) == {plan.uid} and plan.uid != 0
            if plan.uid_kind == "fresh":
                assert set(proc.gids()) == {plan.uid} and plan.uid >= 0x70000000
            else:
                assert plan.uid == os.geteuid() and set(proc.gids()) == {os.getegid()}
            with open(f"/proc/{proc.pid}/status") as f:
                caps = dict(line.split(":", 1) for line in f if line.startswith("Cap"))
            assert int(caps["CapEff"], 16) == 0 and int(caps["CapPrm"], 16) == 0
        sandbox.kill("done")


def test_a12_no_nested_namespaces_or_mounts_but_threads_and_processes_work() -> None:
    code = f"""
import threading, subprocess
res = {{}}
res["unshare_user"] = errno.errorcode[sc("unshare", {CLONE_NEWUSER})]
res["unshare_ns"] = errno.errorcode[sc("unshare", {CLONE_NEWNS})]
res["clone_user"] = errno.errorcode[sc("clone", {CLONE_NEWUSER} | 17, 0, 0, 0, 0)]
fd = os.open("/proc/self/ns/user", os.O_RDONLY)
res["setns"] = errno.errorcode[sc("setns", fd, 0)]
res["mount_tmpfs"] = errno.errorcode[sc("mount", b"none", b"/tmp", b"tmpfs", 0, 0)]
p = subprocess.run(["unshare", "-U", "true"], capture_output=True)
res["unshare_binary"] = p.returncode
box = []
t = threading.Thread(target=lambda: box.append(1)); t.start(); t.join()
res["thread"] = box == [1]
res["subprocess"] = subprocess.run(["/bin/true"]).returncode
pid = os.fork()
if pid == 0:
    os._exit(7)
res["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out(res)
"""
    res = run_json(code)
    assert res["unshare_user"] == res["unshare_ns"] == res["clone_user"] == "EPERM"
    assert res["setns"] == res["mount_tmpfs"] == "EPERM"
    assert res["unshare_binary"] != 0
    assert res["thread"] is True and res["subprocess"] == 0 and res["fork"] == 7


def test_a12_the_filter_applies_to_every_process_in_the_sandbox() -> None:
    result = run_py("""
import subprocess
script = "grep Seccomp: /proc/self/status; grep Seccomp: /proc/1/status"
print(subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True).stdout)
""")
    lines = [line.split() for line in result.stdout.decode().splitlines() if line]
    assert lines and all(parts == ["Seccomp:", "2"] for parts in lines)
