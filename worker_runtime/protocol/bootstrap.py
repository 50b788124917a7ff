"""The bootstrap preamble (spec section 2): magic, sid length, sid, 32-byte key.

The worker reads it with exact reads, so not one byte of the first frame is consumed;
`parse_bootstrap` serves callers that already hold bytes and returns what follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .errors import BadLength, BadMagic, BadSessionId, TruncatedBootstrap
from .keys import check_session_key
from .limits import BOOT_MAGIC, KEY_BYTES, MAX_ID_BYTES, is_id

_HEAD = len(BOOT_MAGIC) + 1


class Bootstrap(NamedTuple):
    session_id: str
    session_key: bytes


def encode_bootstrap(session_id: str, session_key: bytes) -> bytes:
    """The preamble bytes; refuses what a worker would refuse."""
    sid = session_id.encode()
    _check_id(sid)
    check_session_key(session_key)
    return BOOT_MAGIC + bytes([len(sid)]) + sid + session_key


def read_bootstrap(read_exact: Callable[[int], bytes]) -> Bootstrap:
    """Read the preamble through ``read_exact(n)`` (which returns fewer bytes only at EOF)."""
    head = _take(read_exact, _HEAD, "magic and length")
    if head[: len(BOOT_MAGIC)] != BOOT_MAGIC:
        raise BadMagic("bootstrap magic is not SVBOOT01")
    sid_len = head[-1]
    if not 1 <= sid_len <= MAX_ID_BYTES:
        raise BadLength(f"session id length {sid_len}, must be 1..{MAX_ID_BYTES}")
    rest = _take(read_exact, sid_len + KEY_BYTES, "session id and key")
    sid = rest[:sid_len]
    _check_id(sid)
    key = rest[sid_len:]
    check_session_key(key)
    return Bootstrap(sid.decode("ascii"), key)


def parse_bootstrap(data: bytes) -> tuple[Bootstrap, bytes]:
    """Parse a preamble from the front of ``data``; return it and the bytes after it."""
    offset = 0

    def read_exact(n: int) -> bytes:
        nonlocal offset
        chunk = data[offset : offset + n]
        offset += len(chunk)
        return chunk

    boot = read_bootstrap(read_exact)
    return boot, data[offset:]


def _take(read_exact: Callable[[int], bytes], n: int, what: str) -> bytes:
    chunk = read_exact(n)
    if len(chunk) != n:
        raise TruncatedBootstrap(f"stream ended inside the bootstrap {what}")
    return chunk


def _check_id(raw: bytes) -> None:
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise BadSessionId("session id is not ASCII") from None
    if not is_id(text):
        raise BadSessionId("session id is not 1..128 bytes of [a-z0-9._-]")
