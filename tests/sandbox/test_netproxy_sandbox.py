"""The network allowlist in real sandboxes: the loopback forwarder, the host's proxy,
real servers on 127.0.0.1, and clients that know nothing of either (urllib, requests, curl, a
raw SOCKS5 client)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from net_helpers import http_server
from sandbox_helpers import PRELUDE, PYTHON, py_policy

from sandbox.errors import PolicyError
from sandbox.launch import Command, prepare_launch
from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy.events import NetEvent
from sandbox.netproxy.plan import SANDBOX_DIR, SANDBOX_SOCKET, with_forwarder
from sandbox.netproxy.thread import ProxyThread
from sandbox.policy import Bind
from sandbox.runner import RunResult, run

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    with http_server() as port:
        yield port


def run_with_proxy(network: NetworkAllowlist, argv: list[str]) -> tuple[RunResult, list[NetEvent]]:
    """Run ``argv`` in a sandbox whose policy has ``network`` (its own proxy, forwarder)."""
    events: list[NetEvent] = []
    result = run(py_policy(network=network), argv, timeout=30, on_network=events.append)
    return result, events


def endpoints() -> set[str]:
    """This process's proxy endpoints now (their directories in the temp dir)."""
    prefix = f"sandvisor-net-{os.getpid()}-"
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(prefix)}


def run_py_with_proxy(network: NetworkAllowlist, code: str) -> tuple[Any, list[NetEvent]]:
    result, events = run_with_proxy(network, [PYTHON, "-S", "-c", PRELUDE + code])
    assert result.reason == "exited" and result.termination.exit_code == 0, (
        result.termination,
        result.stderr.decode(errors="replace")[-3000:],
    )
    return json.loads(result.stdout.decode().strip().splitlines()[-1]), events


def test_ordinary_clients_reach_an_allowed_server_and_nothing_else(server: int) -> None:
    network = NetworkAllowlist(
        [f"web.test:{server}", f"localhost:{server}", "denied-by-dns.test", "*:80"],
        hosts={"web.test": "127.0.0.1"},
    )
    code = f"""
import urllib.request, urllib.error, time
names = ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY")
res = {{"env": {{k: os.environ.get(k) for k in names}}}}
res["urllib"] = len(urllib.request.urlopen("http://web.test:{server}/1048576", timeout=10).read())
def refused(url):
    try:
        urllib.request.urlopen(url, timeout=10)
        return "allowed"
    except urllib.error.HTTPError as e:
        return [e.code, e.headers.get("X-Sandvisor-Refused")]
res["denied"] = refused("http://denied.test:{server}/1")
res["metadata"] = refused("http://169.254.169.254/latest/meta-data/")
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
def socks(host, target_port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"\\x05\\x01\\x00")
    assert s.recv(2) == b"\\x05\\x00"
    name = bytes([len(host)]) + host.encode()
    s.sendall(b"\\x05\\x01\\x00\\x03" + name + target_port.to_bytes(2, "big"))
    reply = s.recv(10)
    if reply[1]:
        return reply[1]
    s.sendall(b"GET /1000 HTTP/1.0\\r\\n\\r\\n")
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return len(data.split(b"\\r\\n\\r\\n", 1)[1])
res["socks_allowed"] = socks("web.test", {server})
res["socks_private_name"] = socks("localhost", {server})  # allowed name, loopback answer
# straight at the server, without the proxy: there is no way out
d = socket.socket(); d.settimeout(3)
try:
    d.connect(("127.0.0.1", {server})); res["direct"] = "connected"
except OSError as e:
    res["direct"] = errno.errorcode.get(e.errno, str(e))
d = socket.socket(); d.settimeout(3)
try:
    d.connect(("1.1.1.1", 80)); res["direct_out"] = "connected"
except OSError as e:
    res["direct_out"] = errno.errorcode.get(e.errno, str(e))
out(res)
"""
    res, events = run_py_with_proxy(network, code)
    port = res["env"]["HTTP_PROXY"].rsplit(":", 1)[1]
    assert res["env"] == {
        "HTTP_PROXY": f"http://127.0.0.1:{port}",
        "https_proxy": f"http://127.0.0.1:{port}",
        "ALL_PROXY": f"socks5h://127.0.0.1:{port}",
        "NO_PROXY": "localhost,127.0.0.1,::1",
    }
    assert res["urllib"] == 1 << 20
    assert res["denied"] == [403, "not_allowed"]
    assert res["metadata"] == [403, "metadata"]
    assert res["socks_allowed"] == 1000
    assert res["socks_private_name"] == 2  # SOCKS5: not allowed by the ruleset
    assert res["direct"] == "ECONNREFUSED"  # the sandbox's own loopback: nothing there
    assert res["direct_out"] == "ENETUNREACH"  # no interface but loopback
    # one event per connection, in the order they ended (urllib closes its first late)
    seen = {(e.protocol, e.host): e for e in events}
    assert len(seen) == len(events) == 5
    assert {key: (e.allowed, e.reason) for key, e in seen.items()} == {
        ("http", "web.test"): (True, None),
        ("http", "denied.test"): (False, "not_allowed"),
        ("http", "169.254.169.254"): (False, "metadata"),
        ("socks5", "web.test"): (True, None),
        ("socks5", "localhost"): (False, "loopback"),
    }  # the direct connects never reached the host: nothing to audit, nothing got out
    download = seen["http", "web.test"]
    assert download.bytes_down > 1 << 20 and download.address == "127.0.0.1"
    assert seen["http", "169.254.169.254"].address is None  # refused before any connect


def test_the_loopback_port_reaches_the_proxy_and_nothing_else(server: int) -> None:
    network = NetworkAllowlist(["*"])
    code = f"""
port = int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1])
inner = socket.socket(); inner.bind(("127.0.0.1", 0)); inner.listen(1)
def ask(request):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(request)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data.split(b"\\r\\n")[0].decode(errors="replace")
res = {{
    # the sandbox's own service, asked for through the port: the proxy is outside, and
    # refuses loopback anyway
    "inner": ask(b"CONNECT 127.0.0.1:%d HTTP/1.1\\r\\n\\r\\n" % inner.getsockname()[1]),
    "host_loopback": ask(b"CONNECT [::1]:22 HTTP/1.1\\r\\n\\r\\n"),
    "garbage": ask(b"\\x16\\x03\\x01\\x02\\x00garbage"),
    "socket": os.environ.get("SANDVISOR_NET_SOCKET"),
    "dir_listing": sorted(os.listdir("{SANDBOX_DIR}")),
}}
try:
    open("{SANDBOX_DIR}/planted", "w"); res["write"] = "wrote"
except OSError as e:
    res["write"] = errno.errorcode.get(e.errno)
out(res)
"""
    res, events = run_py_with_proxy(network, code)
    assert res["inner"] == "HTTP/1.1 403 Forbidden"
    assert res["host_loopback"] == "HTTP/1.1 403 Forbidden"
    assert res["garbage"].startswith("HTTP/1.1 405")
    assert res["socket"] is None  # the wrapper hands the program only the proxy variables
    assert res["dir_listing"] == ["proxy.sock"]
    assert res["write"] == "EROFS"
    assert [e.reason for e in events] == ["loopback", "loopback", "unsupported"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_uses_the_proxy_unchanged(server: int) -> None:
    network = NetworkAllowlist([f"web.test:{server}"], hosts={"web.test": "127.0.0.1"})
    curl = shutil.which("curl")
    assert curl is not None
    url = f"http://web.test:{server}/4096"
    result, events = run_with_proxy(
        network, ["/bin/sh", "-c", f"{curl} -sS {url} | wc -c; {curl} -sS -p {url} | wc -c;"
                  f" {curl} -sS -o /dev/null -w '%{{http_code}}' http://other.test/"]
    )  # fmt: skip
    assert result.termination.exit_code == 0, result.stderr
    assert result.stdout.decode().split() == ["4096", "4096", "403"]
    # in the order the connections ended, which a loaded machine may shuffle
    assert sorted((e.protocol, e.allowed) for e in events) == [
        ("connect", True),  # -p: a CONNECT tunnel, as for https
        ("http", False),
        ("http", True),
    ]


def test_requests_uses_the_proxy_unchanged(server: int) -> None:
    """requests reads the proxy from the environment too (its site-packages bound in)."""
    requests = pytest.importorskip("requests")
    site = os.path.dirname(os.path.dirname(requests.__file__))
    network = NetworkAllowlist([f"web.test:{server}"], hosts={"web.test": "127.0.0.1"})
    code = f"""
sys.path.insert(0, {site!r})
import requests
ok = requests.get("http://web.test:{server}/5000", timeout=10)
no = requests.get("http://other.test:{server}/1", timeout=10)
out({{"ok": [ok.status_code, len(ok.content)],
     "denied": [no.status_code, no.headers.get("X-Sandvisor-Refused")]}})
"""
    policy = py_policy(network=network, binds=(Bind(site),))
    events: list[NetEvent] = []
    result = run(policy, [PYTHON, "-S", "-c", PRELUDE + code], timeout=30,
                 on_network=events.append)  # fmt: skip
    assert result.termination.exit_code == 0, result.stderr.decode(errors="replace")[-2000:]
    res = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert res == {"ok": [200, 5000], "denied": [403, "not_allowed"]}
    assert sorted((e.host, e.allowed) for e in events) == [
        ("other.test", False),
        ("web.test", True),
    ]


def test_each_sandbox_has_its_own_endpoint_gone_afterwards(server: int) -> None:
    network = NetworkAllowlist([f"web.test:{server}"], hosts={"web.test": "127.0.0.1"})
    seen: list[set[str]] = []
    code = f"""
import urllib.request
urllib.request.urlopen("http://web.test:{server}/1", timeout=10).read()
out(1)
"""
    argv = [PYTHON, "-S", "-c", PRELUDE + code]
    for _ in range(2):
        result = run(py_policy(network=network), argv, timeout=30,
                     on_network=lambda event: seen.append(endpoints()))  # fmt: skip
        assert result.termination.exit_code == 0, result.stderr
    first, second = seen
    assert len(first) == len(second) == 1 and first != second  # one each, never the same
    assert not endpoints()  # gone with the run


def test_a_policy_with_an_allowlist_needs_the_proxy() -> None:
    policy = py_policy(network=["web.test"])
    with pytest.raises(PolicyError, match="needs the host's proxy"):
        prepare_launch(policy, Command(("/bin/true",)))
    with pytest.raises(PolicyError, match="no network allowlist"):
        prepare_launch(py_policy(), Command(("/bin/true",)), network="/tmp")


def test_no_proxy_socket_no_launch() -> None:
    with ProxyThread(NetworkAllowlist(["*"])) as endpoint:
        command = with_forwarder(Command(("/bin/echo", "ran")), endpoint.directory,
                                 forwards_itself=False)  # fmt: skip
        os.unlink(endpoint.socket_path)  # the proxy is not there: the program never runs
        result = run(py_policy(), command, timeout=30)
    assert result.termination.exit_code == 125
    assert result.stdout == b""
    assert b"cannot start the relay" in result.stderr
    assert SANDBOX_SOCKET.encode() in result.stderr


def test_a_program_that_cannot_run_is_reported() -> None:
    result, _ = run_with_proxy(NetworkAllowlist(["*"]), ["/no/such/program"])
    assert result.termination.exit_code == 127
    assert b"/no/such/program: command not found" in result.stderr
