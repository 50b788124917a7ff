"""Host-side session secrets: fresh session ids and keys, and HKDF with `cryptography`.

The worker derives the same directional keys with the standard library
(`worker_runtime.protocol.keys`); shared test vectors prove the two agree. Keys come from OS
entropy only; there is no fallback.
"""

from __future__ import annotations

import os

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from worker_runtime.protocol.keys import HKDF_SALT, DirectionalKeys, check_session_key
from worker_runtime.protocol.limits import HOST_INFO, KEY_BYTES, WORKER_INFO

SESSION_ID_PREFIX = "sv-"


def hkdf_sha256(key: bytes, info: bytes, *, salt: bytes = HKDF_SALT, length: int = 32) -> bytes:
    """RFC 5869 HKDF-SHA256 (extract then expand)."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(key)


def derive_keys(session_key: bytes) -> DirectionalKeys:
    """The host's and the worker's frame keys (spec section 3); refuses a weak key."""
    check_session_key(session_key)
    return DirectionalKeys(
        host=hkdf_sha256(session_key, HOST_INFO), worker=hkdf_sha256(session_key, WORKER_INFO)
    )


def new_session_key() -> bytes:
    """32 bytes of OS entropy; never the all-zero key."""
    while True:
        key = os.urandom(KEY_BYTES)
        if any(key):
            return key


def new_session_id() -> str:
    """A fresh id of the protocol's grammar (``sv-`` and 32 hex digits): never reused."""
    return SESSION_ID_PREFIX + os.urandom(16).hex()
