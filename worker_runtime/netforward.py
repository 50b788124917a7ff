"""Inside a sandbox with a network allowlist: the host's proxy on a loopback port.

The sandbox has no network interface but loopback; the host's proxy listens on a Unix
socket bound in at ``$SANDVISOR_NET_SOCKET``. `start` binds ``127.0.0.1`` on a free port,
forks a relay that copies each connection to that socket and back (one process, one
``epoll`` loop, no threads: nothing counts against the pids limit per connection), and
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
import selectors
import socket
import sys

ENV_SOCKET = "SANDVISOR_NET_SOCKET"
READ_BYTES = 1024 * 1024
#: The Unix socket's send buffer (the kernel doubles it, within ``net.core.wmem_max``):
#: its default, about 208 KiB, is refilled in many rounds, each a wake-up of the proxy.
SEND_BUFFER = 1024 * 1024
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


class _Side:
    """One socket of a relayed pair; ``pending``: bytes still to be written to it."""

    __slots__ = ("eof", "mask", "peer", "pending", "shut", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.mask = selectors.EVENT_READ  # as registered
        self.peer: _Side = self
        self.pending = b""
        self.eof = False  # nothing more to read from it
        self.shut = False  # its write side was shut down


def relay(listener: socket.socket, path: str) -> None:
    """Copy every connection accepted on ``listener`` to a new connection to ``path``."""
    selector = selectors.DefaultSelector()
    listener.setblocking(False)
    selector.register(listener, selectors.EVENT_READ, None)
    buffer = bytearray(READ_BYTES)
    view = memoryview(buffer)
    while True:
        for key, events in selector.select():
            side = key.data
            if side is None:
                _accept(selector, listener, path)
                continue
            try:
                if events & selectors.EVENT_WRITE:
                    _flush(side)
                if events & selectors.EVENT_READ and not side.eof and not side.peer.pending:
                    _pump(side, buffer, view)
            except OSError:
                _close(selector, side)
                continue
            _update(selector, side)


def _accept(selector: selectors.BaseSelector, listener: socket.socket, path: str) -> None:
    try:
        client, _ = listener.accept()
    except OSError:
        return
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    client.setblocking(False)
    upstream.setblocking(False)
    try:
        # Nagle would hold an answer's last small segment back until the client's
        # (delayed) acknowledgement of the one before.
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    except OSError:  # smaller buffers only cost wake-ups
        pass
    a, b = _Side(client), _Side(upstream)
    a.peer, b.peer = b, a
    selector.register(client, selectors.EVENT_READ, a)
    selector.register(upstream, selectors.EVENT_READ, b)


def _pump(side: _Side, buffer: bytearray, view: memoryview) -> None:
    """Read from ``side`` and write to its peer (what does not fit waits)."""
    try:
        size = side.sock.recv_into(buffer)
    except BlockingIOError:
        return
    peer = side.peer
    if size == 0:
        side.eof = True
        if not peer.pending:
            _shut(peer)
        return
    try:
        sent = peer.sock.send(view[:size])
    except BlockingIOError:
        sent = 0
    if sent < size:
        peer.pending = bytes(view[sent:size])


def _flush(side: _Side) -> None:
    try:
        sent = side.sock.send(side.pending)
    except BlockingIOError:
        return
    side.pending = side.pending[sent:]
    if not side.pending and side.peer.eof:
        _shut(side)


def _shut(side: _Side) -> None:
    if not side.shut:
        side.shut = True
        try:  # noqa: SIM105 (contextlib is one more import at start-up)
            side.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _interest(side: _Side) -> int:
    events = 0
    if not side.eof and not side.peer.pending:
        events |= selectors.EVENT_READ
    if side.pending:
        events |= selectors.EVENT_WRITE
    return events


def _update(selector: selectors.BaseSelector, side: _Side) -> None:
    peer = side.peer
    if side.eof and peer.eof and not side.pending and not peer.pending:
        _close(selector, side)
        return
    for one in (side, peer):
        events = _interest(one)
        if events == one.mask:
            continue
        if events and one.mask:
            selector.modify(one.sock, events, one)
        elif events:
            selector.register(one.sock, events, one)
        else:
            selector.unregister(one.sock)
        one.mask = events


def _close(selector: selectors.BaseSelector, side: _Side) -> None:
    for one in (side, side.peer):
        if one.mask and one.sock.fileno() >= 0:
            selector.unregister(one.sock)
        one.mask = 0
        one.sock.close()


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
