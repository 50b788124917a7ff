"""Idempotency keys: stable across one operation's attempts, distinct everywhere else.

A key is ``sv-<hex>-<op id>``: ``<hex>`` is a hash of a per-ledger session nonce under a
domain string, so two ledgers (two processes, or one process restarted) never share a
prefix, and the op id keeps operations of one ledger apart. The nonce is 32 bytes of OS
entropy, or a host-supplied 16..64 bytes; there is no time- or PID-derived fallback
(reference-splash.md 8.2). A key is a deduplication handle, not a credential.
"""

from __future__ import annotations

import hashlib
import os

from supervisor.ledger.errors import EntropyUnavailable, PolicyError

_DOMAIN = b"sandvisor/ledger/session-nonce/v1"
NONCE_BYTES = 32
MIN_NONCE_BYTES = 16
MAX_NONCE_BYTES = 64


class SessionNonce:
    """A ledger's session nonce. Its repr never shows the bytes."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        if not isinstance(value, bytes):
            raise PolicyError("a session nonce must be bytes")
        if not MIN_NONCE_BYTES <= len(value) <= MAX_NONCE_BYTES:
            raise PolicyError(
                f"a session nonce must be {MIN_NONCE_BYTES}..{MAX_NONCE_BYTES} bytes, "
                f"got {len(value)}"
            )
        self._value = value

    @classmethod
    def from_os_entropy(cls) -> SessionNonce:
        """32 bytes from ``os.urandom``; ``EntropyUnavailable`` if the OS has none."""
        try:
            value = os.urandom(NONCE_BYTES)
        except (OSError, NotImplementedError) as exc:
            raise EntropyUnavailable(
                "the OS cannot supply entropy for idempotency keys, so external tools are "
                "refused; pass a unique session_nonce (16..64 bytes) to Ledger"
            ) from exc
        return cls(value)

    def key_prefix(self) -> str:
        """``sv-<32 hex>``: the part of every key that is unique to this ledger session."""
        digest = hashlib.sha256(
            _DOMAIN + len(self._value).to_bytes(8, "big") + self._value
        ).hexdigest()
        return f"sv-{digest[:32]}"

    def __repr__(self) -> str:
        return f"SessionNonce(<redacted, {len(self._value)} bytes>)"
