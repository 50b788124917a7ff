"""SOCKS5 (RFC 1928), the part a forward proxy needs: no authentication, ``CONNECT`` only,
targets as IPv4, IPv6 or a host name (``socks5h://``: the proxy resolves, as it must, so
that its own address checks apply). Pure parsers and reply builders.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

VERSION = 5
NO_AUTH = 0x00
NO_ACCEPTABLE = 0xFF
CMD_CONNECT = 0x01
ATYP_IPV4 = 0x01
ATYP_NAME = 0x03
ATYP_IPV6 = 0x04

SUCCEEDED = 0x00
GENERAL_FAILURE = 0x01
NOT_ALLOWED = 0x02
HOST_UNREACHABLE = 0x04
CONNECTION_REFUSED = 0x05
COMMAND_NOT_SUPPORTED = 0x07
ADDRESS_NOT_SUPPORTED = 0x08


class SocksError(ValueError):
    """A request the proxy will not serve; ``reason`` is a refusal code, ``reply`` the
    bytes to answer with (empty where the protocol has none)."""

    def __init__(self, reason: str, detail: str, reply: bytes) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.reply = reply


@dataclass(frozen=True, slots=True)
class SocksRequest:
    host: str
    port: int
    size: int  # bytes of the request consumed


def greeting_size(data: bytes | bytearray) -> int:
    """Bytes of a complete greeting at the front of ``data``, or 0 if more are needed."""
    if len(data) < 2:
        return 0
    size = 2 + data[1]
    return size if len(data) >= size else 0


def greet(greeting: bytes | bytearray) -> bytes:
    """The method selection; raises `SocksError` if "no authentication" is not offered."""
    if greeting[0] != VERSION:
        raise SocksError("bad_request", "not SOCKS version 5", b"")
    if NO_AUTH not in greeting[2:]:
        reply = bytes([VERSION, NO_ACCEPTABLE])
        raise SocksError("unsupported", "the client offers no 'no authentication' method", reply)
    return bytes([VERSION, NO_AUTH])


def parse_request(data: bytes | bytearray) -> SocksRequest | None:
    """The request at the front of ``data``, or None if more bytes are needed."""
    if len(data) < 5:
        return None
    version, command, _, atyp = data[0], data[1], data[2], data[3]
    if version != VERSION:
        raise SocksError("bad_request", "not SOCKS version 5", reply(GENERAL_FAILURE))
    if atyp == ATYP_IPV4:
        size, start = 4 + 4 + 2, 4
    elif atyp == ATYP_IPV6:
        size, start = 4 + 16 + 2, 4
    elif atyp == ATYP_NAME:
        size, start = 4 + 1 + data[4] + 2, 5
    else:
        raise SocksError("unsupported", f"address type {atyp}", reply(ADDRESS_NOT_SUPPORTED))
    if len(data) < size:
        return None
    if command != CMD_CONNECT:
        raise SocksError(
            "unsupported", f"SOCKS command {command} (only CONNECT)", reply(COMMAND_NOT_SUPPORTED)
        )
    raw = bytes(data[start : size - 2])
    port = int.from_bytes(data[size - 2 : size], "big")
    if atyp == ATYP_NAME:
        try:
            host = raw.decode("ascii")
        except UnicodeDecodeError:
            raise SocksError(
                "bad_request", "the host name is not ASCII", reply(GENERAL_FAILURE)
            ) from None
        if not host:
            raise SocksError("bad_request", "an empty host name", reply(GENERAL_FAILURE))
    else:
        host = str(ipaddress.ip_address(raw))
    if port == 0:
        raise SocksError("bad_request", "port 0", reply(GENERAL_FAILURE))
    return SocksRequest(host, port, size)


def reply(code: int) -> bytes:
    """A reply with an unspecified bound address (0.0.0.0:0): clients do not use it."""
    return bytes([VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0])
