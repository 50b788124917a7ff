"""HTTP proxy requests: the request head a client sends its proxy, parsed and rewritten.

Two forms reach a forward proxy: ``CONNECT host:port HTTP/1.1`` (a tunnel, for HTTPS and
anything else) and an absolute-form request, ``GET http://host[:port]/path HTTP/1.1``
(plain HTTP), which the proxy rewrites to origin form for the server: ``Host`` set to
the authority it connects to (so the server is asked for the host the allowlist let
through), the proxy's own hop-by-hop headers dropped, and ``Connection: close`` (one
request per connection: the next one, maybe for another host, comes through a fresh
connection and its own check). Pure: bytes in, bytes or an error out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Largest request head accepted (request line and headers).
MAX_HEAD_BYTES = 16 * 1024

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_VERSION = re.compile(rb"HTTP/1\.[01]\Z")
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
        b"host",
    }
)


class HeadError(ValueError):
    """A head the proxy will not serve; ``reason`` is a refusal code."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """What the client asked for. ``authority`` as written (for ``Host``), ``host`` and
    ``port`` as parsed (brackets stripped); ``forward`` is the head for the server, empty
    for a ``CONNECT``."""

    method: str
    authority: str
    host: str
    port: int
    forward: bytes


def head_end(buffer: bytes | bytearray) -> int:
    """The offset just past the blank line that ends the head, or -1."""
    end = buffer.find(b"\r\n\r\n")
    return -1 if end < 0 else end + 4


def _authority(text: bytes, default_port: int | None) -> tuple[str, str, int]:
    try:
        authority = text.decode("ascii")
    except UnicodeDecodeError:
        raise HeadError("bad_request", "the host is not ASCII") from None
    if not authority or "@" in authority or any(c in authority for c in " \t/\\?#%"):
        raise HeadError("bad_request", f"{authority!r} is not host[:port]")
    if authority.startswith("["):
        end = authority.find("]")
        host, rest = authority[1:end], authority[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise HeadError("bad_request", f"{authority!r} is not [address]:port")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_raw = authority.rpartition(":")
        if not colon:
            host, port_text_raw = authority, ""
        if ":" in host:
            raise HeadError("bad_request", f"{authority!r}: IPv6 addresses go in brackets")
        port_text = port_text_raw if colon else None
    if port_text is None or port_text == "":
        if default_port is None:
            raise HeadError("bad_request", f"{authority!r} has no port")
        port = default_port
    elif port_text.isdigit() and len(port_text) <= 5 and 1 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        raise HeadError("bad_request", f"{authority!r}: the port is not in 1..65535")
    if not host:
        raise HeadError("bad_request", f"{authority!r} has no host")
    return authority, host, port


def parse_head(head: bytes) -> ProxyRequest:
    """Parse a complete head (ending with the blank line)."""
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not _TOKEN.match(parts[0]) or not _VERSION.match(parts[2]):
        raise HeadError("bad_request", "the request line is not 'METHOD TARGET HTTP/1.x'")
    method_b, target, version = parts
    method = method_b.decode("ascii")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.match(name):
            raise HeadError("bad_request", "a header line is not 'Name: value'")
        headers.append((name, value.strip(b" \t")))
    if method == "CONNECT":
        authority, host, port = _authority(target, None)
        return ProxyRequest(method, authority, host, port, b"")
    lowered = target[:8].lower()
    if lowered.startswith(b"https://"):
        raise HeadError("bad_request", "an https:// URL goes through CONNECT, not a plain request")
    if not lowered.startswith(b"http://"):
        raise HeadError("bad_request", "a proxy request needs an absolute http:// URL")
    rest = target[7:]
    cut = min((i for i in (rest.find(b"/"), rest.find(b"?")) if i >= 0), default=len(rest))
    authority, host, port = _authority(rest[:cut], 80)
    path = rest[cut:] or b"/"
    if path.startswith(b"?"):
        path = b"/" + path
    return ProxyRequest(
        method, authority, host, port, _forward_head(method_b, path, version, authority, headers)
    )


def _forward_head(
    method: bytes, path: bytes, version: bytes, authority: str, headers: list[tuple[bytes, bytes]]
) -> bytes:
    named_hops = set(_HOP_BY_HOP)
    for name, value in headers:
        if name.lower() == b"connection":
            named_hops.update(v.strip().lower() for v in value.split(b","))
    out = [method + b" " + path + b" " + version, b"Host: " + authority.encode()]
    out += [name + b": " + value for name, value in headers if name.lower() not in named_hops]
    out.append(b"Connection: close")
    return b"\r\n".join(out) + b"\r\n\r\n"


def response(status: int, phrase: str, reason: str, text: str) -> bytes:
    """A complete response that ends the connection (a refusal or an error)."""
    body = f"sandvisor proxy: {text}\n".encode()
    return (
        f"HTTP/1.1 {status} {phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-Sandvisor-Refused: {reason}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"
