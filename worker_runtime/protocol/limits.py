"""Constants and limits of the wire protocol (spec/protocol.md sections 2-5, 9).

Both sides import these, so a limit is written down exactly once.
"""

from __future__ import annotations

import re
from typing import Final

PROTOCOL_VERSION: Final = 1

#: Bootstrap preamble (section 2).
BOOT_MAGIC: Final = b"SVBOOT01"
KEY_BYTES: Final = 32

#: HKDF info strings of the two directional keys (section 3).
HOST_INFO: Final = b"sandvisor/v1/host"
WORKER_INFO: Final = b"sandvisor/v1/worker"

#: One frame line, excluding the LF (section 4).
MAX_LINE_BYTES: Final = 1_048_576
TAG_HEX_CHARS: Final = 64

#: Identifiers: sid, rid, cid, tool, idempotency_key, operation_key (section 5).
MAX_ID_BYTES: Final = 128
ID_PATTERN: Final = r"^[a-z0-9._-]{1,128}\Z"
_ID_RE: Final = re.compile(ID_PATTERN)
#: ``ID_MATCH(text)`` is a match (not None) for a valid id; text must be a str.
ID_MATCH: Final = _ID_RE.match

#: A tool's description in `ready` and ``--describe``, in characters (section 6).
MAX_DESCRIPTION_CHARS: Final = 8192
#: A tool's input schema, as compact JSON bytes (section 6).
MAX_SCHEMA_BYTES: Final = 64 * 1024

#: Distinct request ids per session, rid and cid together (section 5).
MAX_SESSION_IDS: Final = 4096
#: JSON payload nesting, the root container counting as level 1 (section 5).
MAX_JSON_DEPTH: Final = 32
#: `error.message` and `reconciled` failed message, in UTF-8 bytes (section 5).
MAX_ERROR_MESSAGE_BYTES: Final = 4096
#: `ping.nonce` / `pong.nonce`, in characters (section 9).
MAX_NONCE_CHARS: Final = 64
#: Default `max_in_flight` when the host does not choose (section 5).
DEFAULT_MAX_IN_FLIGHT: Final = 1
#: Calls the worker remembers for `reconcile` (section 9: at least 1,024).
RECONCILE_MEMORY: Final = 1024
#: A journal key in `invoke` (section 11): 32 bytes as lowercase hex.
JOURNAL_KEY_PATTERN: Final = r"^[0-9a-f]{64}\Z"
#: Domain prefix of a journal entry's MAC (section 11).
JOURNAL_DOMAIN: Final = b"sandvisor/v1/journal\n"
#: Entries per operation key a worker journal holds at most: attempts that ended with a
#: retryable failure or a cancel, plus the one that counts (section 11).
MAX_JOURNAL_ATTEMPTS: Final = 64
#: The largest result an effectful tool may return (bytes of its payload): room is left
#: in a frame for the journal entries that a `reconciled` answer carries (section 11).
MAX_JOURNALED_PAYLOAD_BYTES: Final = MAX_LINE_BYTES - 8192
#: Highest sequence number a sender will seal (u64, as Splash).
MAX_SEQUENCE: Final = 2**64 - 1


def is_id(value: object) -> bool:
    """True for a string of 1..128 bytes of ``[a-z0-9._-]``."""
    return isinstance(value, str) and _ID_RE.match(value) is not None
