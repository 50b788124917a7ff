"""Escape suite, networks and channels between sandboxes: A4 egress, A5 Unix sockets of the
host, A23 cross-session channels (/tmp, /dev/shm, abstract sockets, SysV IPC)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from sandbox_helpers import py_policy, read_line, run_json, start_py

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


def test_a4_no_network_and_failures_are_fast() -> None:
    code = """
import time
res = {}
def attempt(name, fn):
    t = time.monotonic()
    try:
        fn(); res[name] = "connected"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e))
    res[name + "_s"] = time.monotonic() - t
def tcp(addr, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM); s.settimeout(5); s.connect(addr)
attempt("tcp4", lambda: tcp(("1.1.1.1", 443)))
attempt("tcp6", lambda: tcp(("2606:4700:4700::1111", 443), socket.AF_INET6))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
attempt("udp", lambda: udp.sendto(b"x", ("8.8.8.8", 53)))
attempt("dns", lambda: socket.getaddrinfo("example.com", 443))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(17, socket.SOCK_RAW, 0))
lines = open("/proc/net/dev").read().splitlines()[2:]
res["ifaces"] = sorted(line.split(":")[0].strip() for line in lines)
out(res)
"""
    res = run_json(code)
    assert res["ifaces"] == ["lo"]
    for name in ("tcp4", "tcp6", "udp", "dns", "raw", "packet"):
        assert res[name] != "connected", (name, res)
        assert res[name + "_s"] < 1.0, (name, res)  # fail fast, never hang
    assert res["tcp4"] == res["udp"] == "ENETUNREACH"
    assert res["raw"] == res["packet"] == "EPERM"


def test_a4_host_loopback_services_are_unreachable_unless_network_is_allowed() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    code = f"""
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("127.0.0.1", {port})); out("connected")
except OSError as e:
    out(errno.errorcode.get(e.errno, str(e)))
"""
    try:
        assert run_json(code) == "ECONNREFUSED"  # its own loopback, not the host's
        assert run_json(code, policy=py_policy(network=True)) == "connected"
    finally:
        server.close()


def test_a5_host_unix_sockets_are_unreachable(tmp_path: Path) -> None:
    name = f"sandvisor-test-{os.getpid()}-{time.monotonic_ns()}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(1)
    path_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path_sock.bind(str(tmp_path / "host.sock"))
    path_sock.listen(1)
    code = f"""
import stat
res = {{}}
for key, addr in (("abstract", "\\0{name}"), ("path", "{tmp_path / "host.sock"}"),
                  ("docker", "/var/run/docker.sock"), ("dbus", "/run/dbus/system_bus_socket")):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr); res[key] = "connected"
    except OSError as e:
        res[key] = errno.errorcode[e.errno]
sockets = []
for top in ("/etc", "/dev", "/tmp"):
    for d, dirs, files in os.walk(top):
        for f in files:
            if stat.S_ISSOCK(os.lstat(os.path.join(d, f)).st_mode):
                sockets.append(os.path.join(d, f))
res["sockets"] = sockets
out(res)
"""
    try:
        res = run_json(code)
    finally:
        abstract.close()
        path_sock.close()
    assert res["abstract"] == "ECONNREFUSED"  # abstract sockets follow the network namespace
    assert res["path"] == res["docker"] == res["dbus"] == "ENOENT"
    assert res["sockets"] == []


def test_a23_sandboxes_share_no_channels() -> None:
    code_a = """
import mmap
with open("/tmp/marker", "w") as f: f.write("a")
with open("/dev/shm/marker", "w") as f: f.write("a")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind("\\0sandvisor-a23"); srv.listen(1)
shmget = _libc.shmget
shmid = shmget(0x5A5A, 4096, 0o1666)
print("ready", shmid, flush=True)
import time; time.sleep(60)
"""
    code_b = """
res = {"tmp": os.path.exists("/tmp/marker"), "shm": os.path.exists("/dev/shm/marker")}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\\0sandvisor-a23"); res["abstract"] = "connected"
except OSError as e:
    res["abstract"] = errno.errorcode[e.errno]
ctypes.set_errno(0)
r = _libc.shmget(0x5A5A, 0, 0o666)
res["sysv"] = errno.errorcode.get(ctypes.get_errno(), 0) if r < 0 else "found"
out(res)
"""
    with start_py(code_a) as a:
        ready = read_line(a).split()
        assert ready[0] == "ready" and int(ready[1]) >= 0
        res = run_json(code_b)
        a.kill("done")
    assert res == {"tmp": False, "shm": False, "abstract": "ECONNREFUSED", "sysv": "ENOENT"}
