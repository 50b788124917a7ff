"""Real servers on 127.0.0.1 for the proxy's tests, and raw proxy clients.

`http_server` serves ``GET /N`` with N bytes (``x``), and echoes the request head for
``GET /echo``: plain HTTP/1.1 from a thread of its own, so it answers whatever loop the
test runs. The clients speak to a proxy socket byte by byte, no library in between.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path == "/echo":
            body = str(self.headers).encode() + b"PATH " + self.requestline.encode()
        else:
            body = b"x" * int(self.path.strip("/") or 0)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def http_server(host: str = "127.0.0.1") -> Iterator[int]:
    """An HTTP server on ``host``; yields its port."""
    server = http.server.ThreadingHTTPServer((host, 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return data


def unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    return sock


def http_via(path: str, request: bytes) -> bytes:
    """Send one request head to the proxy at ``path``; everything it answers."""
    with unix(path) as sock:
        sock.sendall(request)
        return read_all(sock)


def socks5_via(path: str, host: str, port: int, payload: bytes) -> tuple[int, bytes]:
    """A SOCKS5 CONNECT to ``host`` (a name) through the proxy at ``path``, then
    ``payload``; the reply code and what came back."""
    with unix(path) as sock:
        sock.sendall(b"\x05\x01\x00")
        assert sock.recv(2) == b"\x05\x00"
        name = host.encode()
        sock.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + port.to_bytes(2, "big"))
        reply = sock.recv(10)
        if reply[1] != 0:
            return reply[1], b""
        sock.sendall(payload)
        return 0, read_all(sock)
