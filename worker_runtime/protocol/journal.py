"""Journal entries (spec section 11): what a worker records of an effectful call.

Both sides share this format: the worker writes an entry before an effectful adapter runs
(`Begun`) and one after (`Ended`); the host checks them when a `reconciled` answer relays
them. An entry is one line, ``TAG SP BODY LF``, where BODY is the entry's compact JSON and
TAG is ``HMAC-SHA256(journal_key, JOURNAL_DOMAIN + BODY)`` in lowercase hex. The journal
key is the operation's own (the host derives it from a key the sandbox never sees, and
hands it to the worker in the ``invoke`` of that operation only), so an entry proves it
was written by a session the host gave that operation to.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated, Literal

import msgspec

from .limits import JOURNAL_DOMAIN, MAX_ERROR_MESSAGE_BYTES
from .messages import (
    CancelledState,
    Failed,
    Hex32,
    Id,
    Payload,
    Positive,
    Running,
    SignedEntry,
    Status,
    Succeeded,
    UnknownState,
)

_encode = msgspec.json.Encoder().encode
_canonical = msgspec.json.Encoder(order="sorted").encode


class _Entry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Strict and immutable, like the frames."""


class JournalSucceeded(_Entry, tag_field="state", tag="succeeded", frozen=True):
    payload: Payload


class JournalFailed(_Entry, tag_field="state", tag="failed", frozen=True):
    code: Id
    message: Annotated[str, msgspec.Meta(max_length=MAX_ERROR_MESSAGE_BYTES)]
    retryable: bool


class JournalCancelled(_Entry, tag_field="state", tag="cancelled", frozen=True):
    pass


JournalOutcome = JournalSucceeded | JournalFailed | JournalCancelled


class Begun(_Entry, tag_field="kind", tag="start", frozen=True):
    """Written, and made durable, before the adapter runs: ``n`` counts the runs of this
    operation key in the journal (1, 2 ... after retryable failures or cancels)."""

    tool: Id
    key: Id
    n: Positive
    attempt: Positive
    digest: Hex32
    session: Id
    at: float


class Ended(_Entry, tag_field="kind", tag="end", frozen=True):
    """Written, and made durable, after the adapter returned and before the answer is
    sent: what the worker answers (or answered) for run ``n``."""

    tool: Id
    key: Id
    n: Positive
    session: Id
    at: float
    outcome: JournalOutcome


Entry = Begun | Ended
Kind = Literal["start", "end"]


class EntryInvalid(ValueError):
    """An entry that fails its tag or its format: altered, forged, or not an entry."""


def input_digest(fmt: str, value: object) -> str:
    """SHA-256 of the call's input, canonical (keys sorted), so the same input under the
    same key is recognised whatever its key order."""
    return hashlib.sha256(_canonical({"format": fmt, "value": value})).hexdigest()


def entry_name(tool: str, key: str, n: int, kind: Kind) -> str:
    """The file name of an entry: fixed length, whatever the tool and key."""
    digest = hashlib.sha256(f"{tool}\0{key}".encode()).hexdigest()
    return f"{digest}.{n}.{kind}"


def tag_of(journal_key: bytes, body: bytes) -> str:
    return hmac.new(journal_key, JOURNAL_DOMAIN + body, "sha256").hexdigest()


def seal_entry(journal_key: bytes, entry: Entry) -> bytes:
    """The entry's line: ``TAG SP BODY LF``."""
    body = _encode(entry)
    return tag_of(journal_key, body).encode() + b" " + body + b"\n"


def split_line(line: bytes) -> SignedEntry:
    """A line as read from a file, as the `SignedEntry` a `reconciled` answer relays.

    Nothing is verified here (the worker has no key to verify with); a line that is not
    ``TAG SP BODY LF`` with a JSON object as BODY is relayed as a JSON string, which no
    tag can match, so the host refuses it as altered."""
    tag, space, body = line.removesuffix(b"\n").partition(b" ")
    if space and len(tag) == 64 and b"\n" not in body and body[:1] == b"{":
        try:
            msgspec.json.decode(body)
            text_tag = tag.decode("ascii")
            if text_tag == text_tag.lower() and all(c in "0123456789abcdef" for c in text_tag):
                return SignedEntry(text_tag, msgspec.Raw(body))
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass
    return SignedEntry("0" * 64, msgspec.Raw(_encode(line.decode("utf-8", "replace"))))


def open_entry(journal_key: bytes, signed: SignedEntry) -> Entry:
    """Check an entry's tag (constant time) over its exact bytes, then decode it
    strictly. Raises `EntryInvalid`."""
    body = bytes(signed.body)
    if not hmac.compare_digest(tag_of(journal_key, body), signed.tag):
        raise EntryInvalid("its tag does not match (altered, or written without the key)")
    try:
        return msgspec.json.decode(body, type=Entry)
    except msgspec.DecodeError as exc:
        raise EntryInvalid(f"it is not a journal entry ({exc})") from None


def status_of(outcome: JournalOutcome) -> Status:
    """The `reconciled` status a recorded outcome stands for."""
    if isinstance(outcome, JournalSucceeded):
        return Succeeded(outcome.payload)
    if isinstance(outcome, JournalFailed):
        return Failed(outcome.message)
    return CancelledState()


def relayed_status(entries: list[SignedEntry]) -> Status:
    """The status a worker reports with the entries it relays (it cannot check their tags:
    the host does, and refuses an answer whose status the entries do not bear out)."""
    if not entries:
        return UnknownState()
    if len(entries) == 1:
        return Running()
    try:
        end = msgspec.json.decode(bytes(entries[1].body), type=Entry)
    except msgspec.DecodeError:
        return Failed("the journal entry is unreadable")
    if not isinstance(end, Ended):
        return Failed("the journal entry is not an end")
    return status_of(end.outcome)


__all__ = [
    "Begun",
    "Ended",
    "Entry",
    "EntryInvalid",
    "Hex32",
    "JournalCancelled",
    "JournalFailed",
    "JournalOutcome",
    "JournalSucceeded",
    "entry_name",
    "input_digest",
    "open_entry",
    "relayed_status",
    "seal_entry",
    "split_line",
    "status_of",
    "tag_of",
]
