"""Escape suite, files and process views: A1 host read, A2 host write, A3 symlink and
hardlink tricks, A7 /proc, A19 fd leaks, A20 environment leaks, A24 core dumps.

Each test runs hostile Python in a real sandbox and asserts the guarantee from the host.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from sandbox_helpers import PREFIX, py_policy, run_json, run_py

from sandbox.errors import PolicyError
from sandbox.policy import Bind
from sandbox.runner import run
from sandbox.seccomp import build_filter

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]

PROBE_READ = """
found = {}
for path in PATHS:
    try:
        with open(path, "rb") as f:
            f.read(1)
        found[path] = "read"
    except OSError as exc:
        found[path] = errno.errorcode[exc.errno]
out(found)
"""


def test_a1_host_secrets_do_not_exist_inside(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    paths = [
        "/etc/shadow",
        "/etc/gshadow",
        "/etc/sudoers",
        "/root/.ssh/id_rsa",
        "/root/.bash_history",
        "/home",
        str(secret),
        "/work/main/pyproject.toml",
        os.path.join(sys.prefix, "pyvenv.cfg"),
        "/proc/sysrq-trigger",
        "/var/log/syslog",
        "/sys/kernel/notes",
        "/run/systemd/notify",
    ]
    found = run_json(f"PATHS = {paths!r}\n" + PROBE_READ)
    for path in paths:
        assert found[path] in ("ENOENT", "EACCES", "ENOTDIR", "EISDIR"), (path, found[path])
        assert found[path] != "read"


def test_a1_root_holds_only_the_python_prefix() -> None:
    code = "out({'root': os.path.isdir('/root') and sorted(os.listdir('/root')),"
    seen = run_json(code + " 'top': sorted(os.listdir('/'))})")
    if PREFIX.startswith("/root/"):
        assert seen["root"] == [PREFIX.split("/")[2]]  # just the path down to the prefix
    else:
        assert seen["root"] is False  # (a rootless host's interpreter is under /usr)
    assert set(seen["top"]) <= {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "root",
        "sbin",
        "tmp",
        "usr",
        "opt",
    }


def test_a1_etc_is_minimal_and_passwd_is_synthetic() -> None:
    seen = run_json(
        "out({'etc': sorted(os.listdir('/etc')), 'passwd': open('/etc/passwd').read()})"
    )
    assert "shadow" not in seen["etc"] and "ssh" not in seen["etc"]
    assert set(seen["etc"]) <= {
        "ld.so.cache",
        "alternatives",
        "localtime",
        "nsswitch.conf",
        "passwd",
        "group",
        "hosts",
        "hostname",
    }
    assert seen["passwd"].count("\n") == 3  # root, sandbox, nobody


def test_a2_nothing_outside_tmp_is_writable(tmp_path: Path) -> None:
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    ro_dir.chmod(0o777)
    targets = [
        "/x",
        "/usr/x",
        "/etc/passwd",
        "/etc/x",
        "/proc/sys/kernel/hostname",
        "/proc/sys/vm/drop_caches",
        f"{PREFIX}/x",
        "/srv/ro/x",
        "/tmp/../usr/x",
        "/dev/x",
        "/opt/x",
    ]
    code = (
        f"TARGETS = {targets!r}\n"
        + """
res = {}
for t in TARGETS:
    try:
        fd = os.open(t, os.O_WRONLY | os.O_CREAT, 0o644)
        os.close(fd)
        res[t] = "written"
    except OSError as exc:
        res[t] = errno.errorcode[exc.errno]
fd = os.open("/tmp/ok", os.O_WRONLY | os.O_CREAT); os.close(fd)
out(res)
"""
    )
    res = run_json(code, policy=py_policy(binds=(Bind(str(ro_dir), "/srv/ro"),)))
    for t in targets:
        assert res[t] in ("EROFS", "EACCES", "ENOENT", "EPERM"), (t, res[t])
    assert os.listdir(ro_dir) == []


def test_a2_writable_bind_writes_only_there(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    code = """
with open("/srv/work/out.txt", "w") as f:
    f.write("hello")
try:
    open("/srv/work/../escape.txt", "w")
    res = "escaped"
except OSError as exc:
    res = errno.errorcode[exc.errno]
out({"dotdot": res, "uid": os.stat("/srv/work/out.txt").st_uid})
"""
    res = run_json(code, policy=py_policy(binds=(Bind(str(work), "/srv/work", writable=True),)))
    assert (work / "out.txt").read_text() == "hello"
    assert res["dotdot"] in ("EROFS", "EACCES")
    assert not (tmp_path / "escape.txt").exists()
    owner = (work / "out.txt").stat().st_uid
    assert owner != 0  # files the sandbox makes never belong to host root
    assert res["uid"] == 1000  # ... it sees them as its own


def test_a2_the_fresh_etc_files_never_land_in_a_bound_directory(tmp_path: Path) -> None:
    """bwrap writes the fresh /etc files (passwd, group, hosts, hostname) into whatever is
    at their path: before any bind, that is its own read-only root, never a host
    directory bound writable onto /etc (which then covers them, as the policy asked)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    etc.chmod(0o777)
    code = "out({'etc': sorted(os.listdir('/etc'))})"
    res = run_json(code, policy=py_policy(binds=(Bind(str(etc), "/etc", writable=True),)))
    assert res["etc"] == [] and os.listdir(etc) == []
    plain = run_json("out({'mode': os.stat('/etc/passwd').st_mode & 0o7777})")
    assert plain["mode"] == 0o444  # read-only too, and on a read-only root (EROFS above)


def test_a2_writable_bind_must_be_writable_by_the_sandbox(tmp_path: Path) -> None:
    read_only = tmp_path / "read_only"
    read_only.mkdir(mode=0o555)  # writable by no one (root's fresh uid, or this user)
    with pytest.raises(PolicyError, match="not writable by the sandbox"):
        run(py_policy(binds=(Bind(str(read_only), "/srv/w", writable=True),)), ["true"], timeout=10)


def test_a3_symlinked_bind_sources_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (real / "inner").mkdir()
    for source in (tmp_path / "link", tmp_path / "link" / "inner"):
        with pytest.raises(PolicyError, match="symlink"):
            run(py_policy(binds=(Bind(str(source), "/srv/x"),)), ["true"], timeout=10)
    with pytest.raises(PolicyError, match="does not exist"):
        run(py_policy(binds=(Bind(str(tmp_path / "nope"), "/srv/x"),)), ["true"], timeout=10)


def test_a3_links_planted_in_a_writable_bind_cannot_reach_host_files(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(0o777)
    code = """
res = {}
os.symlink("/etc/shadow", "/srv/work/shadow")
try:
    open("/srv/work/shadow").read(); res["symlink"] = "read"
except OSError as exc:
    res["symlink"] = errno.errorcode[exc.errno]
try:
    os.link("/etc/passwd", "/srv/work/passwd"); res["hardlink"] = "linked"
except OSError as exc:
    res["hardlink"] = errno.errorcode[exc.errno]
os.mkfifo("/srv/work/fifo")
with open("/srv/work/setuid", "w") as f:
    f.write("#!/bin/sh\\n")
os.chmod("/srv/work/setuid", 0o4755)
out(res)
"""
    res = run_json(code, policy=py_policy(binds=(Bind(str(work), "/srv/work", writable=True),)))
    assert res["symlink"] == "ENOENT"  # resolved inside the sandbox, where it does not exist
    assert res["hardlink"] in ("EXDEV", "EPERM", "ENOENT")
    planted = (work / "setuid").stat()
    # a setuid file it plants belongs to its own unprivileged host uid, never to root:
    # a fresh one (a root host's sandbox) or the host's own (a rootless one)
    assert planted.st_uid != 0
    assert planted.st_uid >= 0x70000000 if os.geteuid() == 0 else planted.st_uid == os.geteuid()
    assert stat.S_ISFIFO((work / "fifo").lstat().st_mode)


def test_a7_proc_shows_only_the_sandbox() -> None:
    code = """
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
mountinfo = open("/proc/self/mountinfo").read()
out({"pids": pids, "cmd1": open("/proc/1/cmdline").read().split("\\0")[0],
     "mountinfo": mountinfo, "cgroup": open("/proc/self/cgroup").read(),
     "ppid_env": open(f"/proc/{os.getppid()}/environ").read()})
"""
    seen = run_json(code)
    assert max(seen["pids"]) < 10 and len(seen["pids"]) <= 4  # bwrap init, python
    assert seen["cmd1"].endswith("bwrap")
    assert "/work/main" not in seen["mountinfo"] and "/home" not in seen["mountinfo"]
    assert all(line.endswith(":/") for line in seen["cgroup"].splitlines())  # own cgroup ns
    assert seen["ppid_env"] == ""  # bwrap itself started with an empty environment


def test_a7_proc_sys_and_sys_are_not_writable_or_absent() -> None:
    code = """
res = {}
for p in ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname",
          "/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger"]:
    try:
        os.close(os.open(p, os.O_WRONLY)); res[p] = "writable"
    except OSError as exc:
        res[p] = errno.errorcode[exc.errno]
res["sys"] = os.path.exists("/sys/kernel")
out(res)
"""
    res = run_json(code)
    assert res.pop("sys") is False
    assert all(v in ("EROFS", "EACCES", "ENOENT") for v in res.values()), res


def test_a19_only_the_standard_and_mapped_fds_exist(tmp_path: Path) -> None:
    # The host opens fds of its own that must not leak: a file, a dir, a pipe.
    leak_file = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)
    leak_dir = os.open(tmp_path, os.O_RDONLY)
    leak_r, leak_w = os.pipe()
    for fd in (leak_file, leak_dir, leak_r, leak_w):
        os.set_inheritable(fd, True)  # even inheritable ones
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    try:
        code = """
import fcntl
open_fds = []
for fd in range(4096):
    try:
        fcntl.fcntl(fd, fcntl.F_GETFD)
        open_fds.append(fd)
    except OSError:
        pass
targets = {str(fd): os.readlink(f"/proc/self/fd/{fd}") for fd in open_fds}
out({"fds": open_fds, "targets": targets})
"""
        plain = run_json(code)
        assert plain["fds"] == [0, 1, 2], plain
        worker = run_json(code, fds={3: r1, 4: w2})
        assert worker["fds"] == [0, 1, 2, 3, 4], worker
        assert worker["targets"]["3"].startswith("pipe:")
        # bwrap's seccomp fd (5) and status fd (6) were closed by bwrap before exec
        assert "5" not in worker["targets"] and "6" not in worker["targets"]
    finally:
        for fd in (leak_file, leak_dir, leak_r, leak_w, r1, w1, r2, w2):
            os.close(fd)


def test_a19_seccomp_program_is_not_readable_inside() -> None:
    result = run_py(
        "import fcntl\nfor fd in (3, 4, 5, 6):\n"
        "    try: print(fd, len(os.read(fd, 4096)))\n"
        "    except OSError as e: print(fd, errno.errorcode[e.errno])\n"
    )
    text = result.stdout.decode()
    assert str(len(build_filter())) not in text
    assert text.count("EBADF") == 4, text


def test_a20_environment_is_the_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDVISOR_TEST_SECRET", "hunter2")
    monkeypatch.setenv("LD_PRELOAD", "/evil.so")
    code = """
envs = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            envs[p] = open(f"/proc/{p}/environ").read()
        except OSError:
            pass
out({"env": dict(os.environ), "all": envs})
"""
    seen = run_json(code, policy=py_policy(env={"ONLY": "this"}))
    env = seen["env"]
    assert env.pop("PWD") == "/tmp"  # set by bwrap's --chdir
    env.pop("LC_CTYPE", None)  # Python's own C-locale coercion (PEP 538)
    assert env == {"ONLY": "this"}
    blob = repr(seen["all"])
    assert "hunter2" not in blob and "evil.so" not in blob


def test_a24_segfault_is_a_signal_death_without_a_core() -> None:
    result = run_py("""
print(open("/proc/self/limits").read())
sys.stdout.flush()
import ctypes
ctypes.string_at(0)
""")
    assert result.reason == "signal" and result.termination.signal == 11
    assert result.exit_status == 139
    limits = result.stdout.decode()
    core = next(line for line in limits.splitlines() if line.startswith("Max core file size"))
    assert core.split()[4:6] == ["0", "0"]
