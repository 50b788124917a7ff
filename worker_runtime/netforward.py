"""Inside a sandbox with a network allowlist: the host's proxy on a loopback port.

The sandbox has no network interface but loopback; the host's proxy listens on a Unix
socket bound in at ``$SANDVISOR_NET_SOCKET``. `start` binds ``127.0.0.1`` on a free port,
forks a relay that hands each connection's socket to the proxy over that socket (one
process, no threads: nothing counts against the pids limit per connection; the proxy
moves the bytes, so none are copied here), and
sets ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` (SOCKS5 with names resolved by the
proxy) and ``NO_PROXY`` for loopback, in both cases, so urllib, requests, httpx and curl
use it unchanged. The relay understands no protocol: the host's proxy decides.

Two uses: the worker calls `start` before it loads any adapter (only when the variable
is set, so a worker without network imports nothing of this); for any other program,
``python -I -S .../netforward.py -- PROGRAM ARGS`` starts the relay, then execs the
program, which keeps the sandbox's process and exit status. Standard library only.
"""

from __future__ import annotations

import os
import socket
import sys
import time

ENV_SOCKET = "SANDVISOR_NET_SOCKET"
#: Sent with a client's socket (`sandbox.netproxy.server.PASSED`).
PASSED = b"\x00"
LOOPBACK = "127.0.0.1"
#: The program could not be executed (the shell's convention, as ``env`` uses it).
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
#: The relay could not be set up: the sandbox's own set-up failed.
EXIT_SETUP = 125


def proxy_env(port: int) -> dict[str, str]:
    """The variables ordinary clients read, for a relay on ``port``."""
    http = f"http://{LOOPBACK}:{port}"
    env = {"NO_PROXY": "localhost,127.0.0.1,::1", "NODE_USE_ENV_PROXY": "1"}
    for name, value in (("HTTP_PROXY", http), ("HTTPS_PROXY", http)):
        env[name] = env[name.lower()] = value
    env["ALL_PROXY"] = env["all_proxy"] = f"socks5h://{LOOPBACK}:{port}"
    env["no_proxy"] = env["NO_PROXY"]
    return env


def start(path: str | None = None) -> int | None:
    """Start the relay if this sandbox has a proxy socket; its port, or None (no
    network allowlist: nothing to do). Raises OSError if the socket is not there."""
    if path is None:
        path = os.environ.get(ENV_SOCKET)
        if not path:
            return None
    if not os.path.exists(path):
        raise FileNotFoundError(f"the network proxy's socket {path} is not in the sandbox")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((LOOPBACK, 0))
    listener.listen(128)
    port: int = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the relay: it ends with the sandbox (its pid namespace)
        code = 0
        try:
            _detach(listener.fileno())
            relay(listener, path)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    listener.close()
    os.environ.update(proxy_env(port))
    return port


def _detach(keep: int) -> None:
    """Hold nothing of the parent's but the listener: the host sees the parent's pipes
    end when the parent ends."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)


def relay(listener: socket.socket, path: str) -> None:
    """Hand every connection accepted on ``listener`` to the proxy at ``path``: one
    message each, ``PASSED`` with the client's socket (``SCM_RIGHTS``), all on one
    connection to the proxy (a new one if the proxy ended it); the proxy then reads and
    writes that socket itself. Nothing is copied here: a forwarder that relayed the
    bytes was one more process to wake for every chunk of every download."""
    proxy: socket.socket | None = None
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # out of fds for a moment: the client waits in the backlog
            time.sleep(0.05)
            continue
        try:
            for _ in range(2):  # once more on a new connection if the proxy ended this one
                try:
                    if proxy is None:
                        proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        proxy.connect(path)
                    socket.send_fds(proxy, [PASSED], [client.fileno()])
                    break
                except OSError:
                    if proxy is not None:
                        proxy.close()
                        proxy = None
        finally:
            client.close()  # the client sees its connection end if it was not passed


def main(argv: list[str]) -> int:
    """``netforward.py -- PROGRAM ARGS``: start the relay, then become the program."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("sandvisor netforward: usage: netforward.py -- PROGRAM [ARGS...]", file=sys.stderr)
        return EXIT_SETUP
    try:
        if start() is None:
            print(f"sandvisor netforward: {ENV_SOCKET} is not set", file=sys.stderr)
            return EXIT_SETUP
    except OSError as exc:
        print(f"sandvisor netforward: cannot start the relay: {exc}", file=sys.stderr)
        return EXIT_SETUP
    os.environ.pop(ENV_SOCKET, None)
    try:
        os.execvp(argv[0], argv)
    except FileNotFoundError:
        print(f"sandvisor: {argv[0]}: command not found", file=sys.stderr)
        return EXIT_NOT_FOUND
    except OSError as exc:
        print(f"sandvisor: {argv[0]}: cannot execute: {exc.strerror}", file=sys.stderr)
        return EXIT_NOT_EXECUTABLE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
