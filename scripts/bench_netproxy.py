#!/usr/bin/env python3
"""Network allowlist benchmarks, against baselines measured in the same run.

A server process on 127.0.0.1 answers ``GET /N`` with N bytes. One client program times
itself, run five times per round, interleaved:

- **direct**: on the host, no sandbox, no proxy (the baseline);
- **copy** and **splice**: on the host, through the least any proxy does: a blocking
  process that accepts, connects to the server, forwards the request and moves the
  answer (no sandbox, no policy, no event loop), by ``recv_into``/``sendall`` through a
  256 KiB buffer, or by ``splice(2)`` through a 1 MiB pipe (socket -> pipe -> socket,
  no copy in user space). What the second TCP hop costs on this host, whoever relays:
  the floors under the proxied side;
- **endpoint**: on the host, speaking to the proxy's endpoint socket itself (the proxy's
  share of the cost: no sandbox, no forwarder);
- **proxied**: in a sandbox whose policy allows the server (by a pinned name), through
  the loopback forwarder and the host's proxy (`sandbox.netproxy.thread.ProxyThread`, as
  ``sandvisor exec --allow-net`` runs it).

What it measures, median of each round, the headline the median of the rounds:

1. A 1 MiB download (connect, request, read it all): with a raw-socket client and with
   urllib (which reads the proxy from the environment; not for the endpoint, a Unix
   socket). Target: proxied at most 1.5x direct. The raw client also times its first
   byte: before it, the set-up's share; after it, the transfer's.
2. Connection set-up: direct, a TCP connect; proxied, a connect to the loopback port
   and an HTTP ``CONNECT`` until the tunnel is established (the proxy has resolved and
   connected by then). Target: at most 2 ms above direct.
3. The forwarder's start cost: ``/bin/true`` in a sandbox, wrapped by the forwarder
   against not (the wrapper is a second interpreter start); and, inside a sandbox, the
   time `worker_runtime.netforward.start` takes (what a worker pays: a bind and a fork).
4. The proxy's CPU time (the bench's own, where the proxy's thread is all that runs
   while a host client downloads through the endpoint): per connection, and per MiB.
5. No per-call cost for tools without network: the warm ``invoke`` round trip of a tool
   in a group without network, in a supervisor of that group alone against one that also
   serves a group with an allowlist (calls interleaved one by one, each side first in
   turn). Target: the same, within noise.

With ``--against DIR`` (another checkout of sandvisor, e.g. ``mkdir /tmp/before && git
archive main~2 | tar -x -C /tmp/before``), each round also runs DIR's direct, endpoint
and proxied sides against the same server, the two trees alternating which goes first;
the ratios of each tree are taken within its round (its own direct baseline) and their
medians printed side by side: a before/after in one run. The load average is printed
at the start and the end.

Usage: ``.venv/bin/python scripts/bench_netproxy.py [--rounds R] [--runs N]
[--against DIR] [--downloads-only]`` (as root, like CI).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trio

from sandbox.launch import Command
from sandbox.netproxy import NetworkAllowlist
from sandbox.netproxy.plan import with_forwarder
from sandbox.netproxy.thread import ProxyThread
from sandbox.policy import Bind, SandboxPolicy
from sandbox.pyworker import interpreter, module_bind
from sandbox.runner import run
from supervisor import Supervisor, ToolGroup

SERVER = r"""
import socket, sys, threading
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(128)
cache = {}
def serve():  # threads started once, each accepting: no thread start per connection
    while True:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            else:
                size = int(data.split(b" ", 2)[1].rsplit(b"/", 1)[1] or 0)
                if size not in cache:
                    cache[size] = (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                                   b"Connection: close\r\n\r\n" % size) + b"x" * size
                conn.sendall(cache[size])
for _ in range(8):
    threading.Thread(target=serve, daemon=True).start()
print(listener.getsockname()[1], flush=True)
threading.Event().wait()
"""

CLIENT = r"""
import json, os, socket, statistics, sys, time, urllib.request
host, port, runs, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
proxy = os.environ.get("HTTP_PROXY")
unix = os.environ.get("BENCH_PROXY_SOCKET")  # the endpoint itself, from the host
via = ("127.0.0.1", int(proxy.rsplit(":", 1)[1])) if proxy else unix

def open_via():
    if unix:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(unix)
        return sock
    return socket.create_connection(via)
SIZE = 1 << 20

BUFFER = bytearray(262144)
FIRST_BYTE = []  # each download's time to the answer's first byte

def read_response(sock, started):
    data = bytearray()
    while b"\r\n\r\n" not in data:
        size = sock.recv_into(BUFFER)
        if not size:
            return -1
        if not data:
            FIRST_BYTE.append(time.perf_counter() - started)
        data += BUFFER[:size]
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    got = len(body)
    while got < length:
        size = sock.recv_into(BUFFER)
        if not size:
            break
        got += size
    return got

def download(size=SIZE):
    t = time.perf_counter()
    if via:
        sock = open_via()
        sock.sendall(b"GET http://%s:%d/%d HTTP/1.1\r\n\r\n" % (host.encode(), port, size))
    else:
        sock = socket.create_connection((host, port))
        sock.sendall(b"GET /%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
    got = read_response(sock, t)
    sock.close()
    assert got == size, got
    return time.perf_counter() - t

def with_urllib():
    t = time.perf_counter()
    got = len(urllib.request.urlopen("http://%s:%d/%d" % (host, port, SIZE)).read())
    assert got == SIZE, got
    return time.perf_counter() - t

def setup():
    t = time.perf_counter()
    if via:
        sock = open_via()
        sock.sendall(b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (host.encode(), port))
        reply = sock.recv(100)
        assert reply.startswith(b"HTTP/1.1 200"), reply
    else:
        sock = socket.create_connection((host, port))
    took = time.perf_counter() - t
    sock.close()
    return took

def start_cost():
    import importlib.util
    spec = importlib.util.spec_from_file_location("nf", sys.argv[5])
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
    t = time.perf_counter()
    module.start(sys.argv[6])
    return time.perf_counter() - t

if mode == "start":
    print(json.dumps({"start": start_cost()}))
    sys.exit(0)
if mode.startswith("size="):  # downloads only, for the proxy's CPU
    for _ in range(runs):
        download(int(mode[5:]))
    sys.exit(0)
measures = [("download", download), ("setup", setup)]
if not unix:  # urllib cannot speak to a Unix socket
    measures.append(("urllib", with_urllib))
for _, fn in measures:
    fn()  # warm: imports, the first connection, the server's cached body
result = {}
for name, fn in measures:
    FIRST_BYTE.clear()
    result[name] = statistics.median(fn() for _ in range(runs))
    if name == "download":
        result["first_byte"] = statistics.median(FIRST_BYTE)
print(json.dumps(result))
"""

NAME = "bench.test"


def allowlist(port: int) -> NetworkAllowlist:
    """The server by a pinned name; no per-call caps (a run makes 3 x runs + 3
    connections, past the default 64 from --runs 21)."""
    return NetworkAllowlist(
        (f"{NAME}:{port}",), hosts={NAME: "127.0.0.1"}, max_connections=None, max_bytes=None
    )


def start_server() -> tuple[subprocess.Popen[str], int]:
    server = subprocess.Popen(
        [sys.executable, "-S", "-c", SERVER], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    return server, int(server.stdout.readline())


def policy() -> SandboxPolicy:
    prefix = interpreter()[1]
    return SandboxPolicy(binds=(Bind(prefix),) if not prefix.startswith("/usr/") else ())


def client_argv(port: int, runs: int, mode: str, host: str) -> list[str]:
    return [os.path.realpath(sys.executable), "-S", "-c", CLIENT, host, str(port), str(runs), mode]


#: The client reads no proxy of the host's environment on the direct and relay sides.
HOST_ENV = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def direct(port: int, runs: int) -> dict[str, float]:
    out = subprocess.run(
        client_argv(port, runs, "measure", "127.0.0.1"), capture_output=True, text=True,
        check=True, env=HOST_ENV,
    )  # fmt: skip
    return json.loads(out.stdout)  # type: ignore[no-any-return]


RELAY = r"""
import fcntl, os, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(128)
print(listener.getsockname()[1], flush=True)
buffer = bytearray(262144)
view = memoryview(buffer)
out_of, into = os.pipe()
fcntl.fcntl(into, fcntl.F_SETPIPE_SZ, 1 << 20)

def copy(upstream, client):
    while size := upstream.recv_into(buffer):
        client.sendall(view[:size])

def splice(upstream, client):
    up, down = upstream.fileno(), client.fileno()
    while size := os.splice(up, into, 1 << 20, flags=os.SPLICE_F_MOVE):
        while size:
            size -= os.splice(out_of, down, size, flags=os.SPLICE_F_MOVE)

move = splice if sys.argv[2] == "splice" else copy
while True:
    client, _ = listener.accept()
    with client:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk:
                break
            head += chunk
        else:
            with socket.create_connection(("127.0.0.1", int(sys.argv[1]))) as upstream:
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                upstream.sendall(head)
                move(upstream, client)
"""


def start_relay(port: int, how: str = "copy") -> tuple[subprocess.Popen[str], int]:
    """A floor relay (`RELAY`, ``how``: copy or splice) to the server on ``port``, and
    the port it listens on."""
    relay = subprocess.Popen(
        [sys.executable, "-S", "-c", RELAY, str(port), how], stdout=subprocess.PIPE, text=True
    )
    assert relay.stdout is not None
    return relay, int(relay.stdout.readline())


def relayed(relay_port: int, runs: int) -> dict[str, float]:
    """The direct client, through the floor relay (it asks the relay as if the server)."""
    return direct(relay_port, runs)


def endpoint_only(port: int, runs: int) -> dict[str, float]:
    """The same client on the host, speaking to the proxy's endpoint socket itself: the
    proxy's share of the cost (no sandbox, no forwarder)."""
    network = allowlist(port)
    with ProxyThread(network) as endpoint:
        env = {**os.environ, "BENCH_PROXY_SOCKET": endpoint.socket_path}
        out = subprocess.run(
            client_argv(port, runs, "measure", NAME), capture_output=True, text=True,
            check=True, env=env,
        )  # fmt: skip
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def proxy_cpu(port: int, runs: int) -> tuple[float, float]:
    """The proxy's CPU time (ms; its thread is all this process runs meanwhile) per
    connection (empty downloads) and per MiB (8 MiB downloads, less a connection's)."""
    per_download = []
    with ProxyThread(allowlist(port)) as endpoint:
        env = {**os.environ, "BENCH_PROXY_SOCKET": endpoint.socket_path}
        for size in (0, 8 << 20):
            before = resource.getrusage(resource.RUSAGE_SELF)
            subprocess.run(client_argv(port, runs, f"size={size}", NAME), check=True, env=env)
            after = resource.getrusage(resource.RUSAGE_SELF)
            spent = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            per_download.append(spent / runs * 1000)
    connection, large = per_download
    return connection, (large - connection) / 8


def proxied(port: int, runs: int) -> dict[str, float]:
    network = allowlist(port)
    with ProxyThread(network) as endpoint:
        command = with_forwarder(
            Command(tuple(client_argv(port, runs, "measure", NAME))),
            endpoint.directory,
            forwards_itself=False,
        )
        result = run(policy(), command, timeout=120)
    if result.termination.exit_code != 0:
        raise SystemExit(f"proxied client failed: {result.stderr.decode()[-2000:]}")
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def forwarder_costs(port: int, runs: int) -> tuple[float, float, float]:
    """(/bin/true, /bin/true wrapped by the forwarder, start() inside), median ms."""
    network = allowlist(port)
    bare: list[float] = []
    wrapped: list[float] = []
    inside: list[float] = []
    wr = module_bind("worker_runtime", interpreter()[1])
    assert wr is not None
    with ProxyThread(network) as endpoint:
        plain = Command(("/bin/true",))
        forwarded = with_forwarder(plain, endpoint.directory, forwards_itself=False)
        start_argv = [
            *client_argv(port, 1, "start", NAME),
            f"{wr.dest}/netforward.py",
            "/run/sandvisor/net/proxy.sock",
        ]
        measured = with_forwarder(
            Command(tuple(start_argv)), endpoint.directory, forwards_itself=True
        )
        measured = Command(
            measured.argv, (*measured.binds, wr), measured.env, measured.masks, measured.cwd
        )
        for _ in range(runs):
            for command, into in ((plain, bare), (forwarded, wrapped)):
                t = time.perf_counter()
                result = run(policy(), command, timeout=30)
                into.append(time.perf_counter() - t)
                assert result.termination.exit_code == 0, result.stderr
            result = run(policy(), measured, timeout=30)
            assert result.termination.exit_code == 0, result.stderr
            inside.append(json.loads(result.stdout)["start"])
    return (
        statistics.median(bare) * 1000,
        statistics.median(wrapped) * 1000,
        statistics.median(inside) * 1000,
    )


async def _round_trip(supervisor: Supervisor, tool: str) -> float:
    t = time.perf_counter()
    out = await supervisor.invoke(tool, "x")
    took = time.perf_counter() - t
    assert out.status == "completed", out.error
    return took


def no_network_cost(port: int, runs: int, rounds: int) -> tuple[float, float]:
    """Median invoke round trip (ms) of a tool without network: alone, and beside a
    group with an allowlist."""
    plain = ToolGroup("plain", adapters=["worker_runtime.examples:registry"])
    networked = ToolGroup(
        "net",
        adapters=["worker_runtime.demo_adapters:registry"],
        policy=SandboxPolicy(network=[f"127.0.0.1:{port}"]),
    )

    async def main() -> tuple[float, float]:
        alone: list[float] = []
        beside: list[float] = []
        async with (
            Supervisor(groups=[plain], ping_interval=None) as one,
            Supervisor(groups=[plain, networked], ping_interval=None) as both,
        ):
            for _ in range(20):  # warm
                for sup in (one, both):
                    await _round_trip(sup, "text.upper")
            for index in range(rounds * runs):  # interleaved call by call, in turn first
                first, second = (one, both) if index % 2 else (both, one)
                for sup in (first, second):
                    took = await _round_trip(sup, "text.upper")
                    (alone if sup is one else beside).append(took)
        return statistics.median(alone) * 1000, statistics.median(beside) * 1000

    return trio.run(main)


SIDES_OF = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/scripts"]
import bench_netproxy as b
port, runs = int(sys.argv[2]), int(sys.argv[3])
sides = b.direct(port, runs), b.endpoint_only(port, runs), b.proxied(port, runs)
cpu = dict(zip(("connection", "mib"), b.proxy_cpu(port, runs)))
print(json.dumps([*sides, cpu]))
"""


def sides_of(tree: str, port: int, runs: int) -> list[dict[str, float]]:
    """The direct, endpoint and proxied sides as the checkout ``tree`` measures them."""
    out = subprocess.run(
        [sys.executable, "-c", SIDES_OF, tree, str(port), str(runs)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def compare(tree: str, port: int, rounds: int, runs: int) -> None:
    """Paired rounds of this checkout and ``tree``: the ratios to each one's own direct,
    and each one's proxy CPU (less sensitive to the machine's load than wall time)."""
    ratios: dict[str, list[tuple[float, ...]]] = {"this": [], tree: []}
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(
        f"paired with {tree}: proxied/direct raw, urllib; endpoint/direct; set-up ms above; "
        "the proxy's CPU ms per connection, per MiB"
    )
    for index in range(rounds):
        order = ["this", tree] if index % 2 == 0 else [tree, "this"]
        for name in order:
            d, e, p, cpu = sides_of(here if name == "this" else name, port, runs)
            ratios[name].append((
                p["download"] / d["download"], p["urllib"] / d["urllib"],
                e["download"] / d["download"], (p["setup"] - d["setup"]) * 1000,
                cpu["connection"], cpu["mib"],
            ))  # fmt: skip
        print(f"{index + 1:>5} | " + " | ".join(
            f"{name}: " + " ".join(f"{v:.2f}" for v in ratios[name][-1]) for name in ratios
        ))  # fmt: skip
    for name, rows in ratios.items():
        raw, url, ep, setup, conn, mib = (statistics.median(r[i] for r in rows) for i in range(6))
        print(
            f"  {name}: raw {raw:.2f}x, urllib {url:.2f}x, endpoint {ep:.2f}x, "
            f"set-up +{setup:.2f} ms, CPU {conn:.3f} ms per connection and {mib:.3f} per MiB "
            f"(medians of {rounds} rounds)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20, help="measurements per round and side")
    parser.add_argument("--against", metavar="DIR", help="another checkout: paired rounds")
    parser.add_argument(
        "--downloads-only", action="store_true", help="skip the start, CPU and no-network rows"
    )
    args = parser.parse_args()
    server, port = start_server()
    print(f"load average at start: {_load()}")
    try:
        if args.against:
            compare(args.against, port, args.rounds, args.runs)
            print(f"load average at the end: {_load()}")
            return
        rounds = []
        relay, relay_port = start_relay(port)
        splicer, splice_port = start_relay(port, "splice")
        print(
            "ms, median of each round's runs; copy, splice: the floors (blocking relays, no "
            "policy, copying or splicing through a pipe); proxied: from a sandbox, through "
            "its forwarder and the proxy; endpoint: from the host to the proxy's socket"
        )
        print(f"{'round':>5} | {'1 MiB raw: direct / copy / splice / endpoint / proxied':>53} | "
              f"{'1 MiB urllib: direct / copy / splice / proxied':>46} | "
              f"{'set-up: direct / endpoint / proxied':>35}")  # fmt: skip
        try:
            for index in range(args.rounds):
                sides = [direct(port, args.runs), relayed(relay_port, args.runs)]
                sides += [relayed(splice_port, args.runs)]
                sides += [endpoint_only(port, args.runs), proxied(port, args.runs)]
                d, r, s, e, p = sides
                row = {
                    "raw": tuple(x["download"] for x in (d, r, s, e, p)),
                    "first": tuple(x["first_byte"] for x in (d, r, s, e, p)),
                    "urllib": (d["urllib"], r["urllib"], s["urllib"], p["urllib"]),
                    "setup": (d["setup"], e["setup"], p["setup"]),
                }
                rounds.append(row)
                print(
                    f"{index + 1:>5} | {_ms(row['raw']):>53} | {_ms(row['urllib']):>46} | "
                    f"{_ms(row['setup'], 3):>35}"
                )
        finally:
            for process in (relay, splicer):
                process.kill()
                process.wait()
        med = {
            key: tuple(statistics.median(r[key][i] for r in rounds) for i in range(len(row)))
            for key, row in rounds[0].items()
        }
        raw, url, setup = med["raw"], med["urllib"], med["setup"]
        print("median of rounds:")
        print(f"  1 MiB download, raw client: {_ratio(raw[0], raw[4])}  (target <= 1.5x); "
              f"host to the endpoint: {_ratio(raw[0], raw[3])}")  # fmt: skip
        print(f"  1 MiB download, urllib:     {_ratio(url[0], url[3])}  (target <= 1.5x)")
        for name, at in (("copy", 1), ("splice", 2)):
            print(f"  the {name} floor, raw / urllib: {_ratio(raw[0], raw[at])} / "
                  f"{_ratio(url[0], url[at])}; proxied to it: {raw[4] / raw[at]:.2f}x / "
                  f"{url[3] / url[at]:.2f}x")  # fmt: skip
        first = med["first"]
        after = tuple(a - b for a, b in zip(raw, first, strict=True))
        print(
            "  1 MiB raw, direct / copy / splice / endpoint / proxied: to the first byte "
            f"{_ms(first)} ms, after it {_ms(after)} ms"
        )
        print(f"  connection set-up:          {_plus(setup[0], setup[2])}  (target <= +2 ms); "
              f"host to the endpoint: {_plus(setup[0], setup[1])}")  # fmt: skip
        if args.downloads_only:
            return
        bare, wrapped, inside = forwarder_costs(port, args.runs)
        print("forwarder start cost (median):")
        print(
            f"  sandbox running /bin/true: {bare:.2f} ms; wrapped by the forwarder: "
            f"{wrapped:.2f} ms (+{wrapped - bare:.2f} ms, the second interpreter)"
        )
        print(
            f"  netforward.start() inside a sandbox (bind + fork, a worker's cost): {inside:.3f} ms"
        )
        connection, per_mib = proxy_cpu(port, args.runs * 5)
        print("the proxy's CPU time (from the host to the endpoint; its thread alone):")
        print(f"  per connection: {connection:.3f} ms; per MiB moved: {per_mib:.3f} ms")
        alone, beside = no_network_cost(port, args.runs * 5, args.rounds)
        print("a tool without network, warm invoke round trip (median):")
        print(
            f"  alone: {alone:.3f} ms; beside a group with an allowlist: {beside:.3f} ms "
            f"({beside / alone:.2f}x; target: the same)"
        )
    finally:
        server.kill()
        server.wait()
        if not args.against:
            print(f"load average at the end: {_load()}")


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _ms(values: tuple[float, ...], digits: int = 2) -> str:
    return " / ".join(f"{v * 1000:.{digits}f}" for v in values)


def _ratio(direct_s: float, proxied_s: float) -> str:
    return f"{direct_s * 1000:.2f} / {proxied_s * 1000:.2f} ms / {proxied_s / direct_s:.2f}x"


def _plus(direct_s: float, proxied_s: float) -> str:
    return (
        f"{direct_s * 1000:.3f} / {proxied_s * 1000:.3f} ms / +{(proxied_s - direct_s) * 1000:.3f}"
    )


if __name__ == "__main__":
    main()
