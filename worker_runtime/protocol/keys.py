"""Directional keys (spec section 3) with the standard library only.

The worker must not import `cryptography` (start-up time, sandbox binds), so HKDF-SHA256
(RFC 5869) is written out here with `hmac`; `supervisor/workers/session_keys.py` derives
the same keys with `cryptography`, and shared test vectors prove the two agree.
"""

from __future__ import annotations

import hmac
from typing import NamedTuple

from .errors import WeakKey
from .limits import HOST_INFO, KEY_BYTES, WORKER_INFO

HKDF_SALT = bytes(32)


def hkdf_sha256(key: bytes, info: bytes, *, salt: bytes = HKDF_SALT, length: int = 32) -> bytes:
    """RFC 5869 extract-then-expand with SHA-256."""
    if not 0 < length <= 255 * 32:
        raise ValueError("HKDF-SHA256 output length must be 1..8160 bytes")
    prk = hmac.digest(salt, key, "sha256")
    out = b""
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac.digest(prk, block + info + bytes([counter]), "sha256")
        out += block
        counter += 1
    return out[:length]


class DirectionalKeys(NamedTuple):
    """``host`` tags frames the host sends; ``worker`` tags frames the worker sends."""

    host: bytes
    worker: bytes


def check_session_key(key: bytes) -> None:
    """A session key is 32 bytes and not all zero."""
    if len(key) != KEY_BYTES:
        raise WeakKey(f"session key must be {KEY_BYTES} bytes, got {len(key)}")
    if not any(key):
        raise WeakKey("session key is all zero")


def derive_keys(session_key: bytes) -> DirectionalKeys:
    """Both directional keys of a session key (refusing a weak key)."""
    check_session_key(session_key)
    return DirectionalKeys(
        host=hkdf_sha256(session_key, HOST_INFO), worker=hkdf_sha256(session_key, WORKER_INFO)
    )
