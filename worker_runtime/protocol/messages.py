"""Every message kind of spec section 6 as a strict msgspec Struct.

Bodies are a tagged union on ``type``; unknown fields and wrong types are rejected at
decode (receiver check 5). ``v``, ``sid`` and ``seq`` are plain ints/strings on purpose:
their *values* are checked afterwards (checks 6-8), so each failure gets its own error.
A new id (a ``rid``/``cid`` the host mints, an idempotency key, an error code, the tools
of ``ready``) is checked by pattern at decode. A field that must equal an id the receiver
issued or granted (the ``rid`` of a ``result``, the ``tool`` of an ``invoke``) is a `Ref`:
the receiver's look-up checks it exactly, which implies the grammar, and a regex at decode
would cost more than the rest of the decode. Sizes, depths and state are checked by the
connections (check 10).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .limits import (
    ID_PATTERN,
    JOURNAL_KEY_PATTERN,
    MAX_DESCRIPTION_CHARS,
    MAX_ID_BYTES,
    MAX_NONCE_CHARS,
)

Id = Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]
#: An id that must equal one the receiver issued or granted (its look-up checks it).
Ref = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_BYTES)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Nonce = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NONCE_CHARS)]
#: 32 bytes as 64 lowercase hex characters: a journal key, an entry's tag.
Hex32 = Annotated[str, msgspec.Meta(pattern=JOURNAL_KEY_PATTERN)]
Format = Literal["text", "json"]
CancelOutcome = Literal["acknowledged", "too_late", "unsupported"]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Strict and immutable: unknown fields are refused at decode."""


# -- payload: {"format": "text", "value": str} | {"format": "json", "value": object|array}


class TextPayload(_Strict, tag_field="format", tag="text", frozen=True):
    value: str


class JsonPayload(_Strict, tag_field="format", tag="json", frozen=True):
    value: dict[str, Any] | list[Any]


Payload = TextPayload | JsonPayload


# -- grant: {tool, format, max_calls, max_input_bytes, max_output_bytes, stream} ----------


class StreamLimits(_Strict, frozen=True):
    max_chunks: Positive
    max_chunk_bytes: Positive
    max_total_bytes: Positive


class Grant(_Strict, frozen=True):
    tool: Id
    format: Format
    max_calls: Positive
    max_input_bytes: Positive
    max_output_bytes: Positive
    stream: StreamLimits | None


def grant(
    tool: str,
    *,
    format: Format = "text",
    max_calls: int = 1,
    max_input_bytes: int = 16 * 1024,
    max_output_bytes: int = 64 * 1024,
    stream: StreamLimits | None = None,
) -> Grant:
    """A `Grant` with Splash's defaults (1 call, 16 KiB in, 64 KiB out, no stream)."""
    return Grant(tool, format, max_calls, max_input_bytes, max_output_bytes, stream)


# -- tool: {name, format, cancellable, description, schema, alias} (ready, --describe) ----


class ToolSpec(_Strict, frozen=True):
    """One served tool as the worker describes it; the host decides what to grant.

    ``schema`` is the JSON Schema of a json tool's input (None: any object; always None
    for a text tool). ``alias`` is the tool's own name where the id grammar cannot hold
    it (an MCP server's ``longRunningOperation``), else None. ``effectful``: the worker
    journals each call before it runs (section 11) and answers `reconcile` from that
    journal, with its entries.
    """

    name: Id
    format: Format
    cancellable: bool = True
    description: Annotated[str, msgspec.Meta(max_length=MAX_DESCRIPTION_CHARS)] = ""
    schema: dict[str, Any] | None = None
    alias: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_BYTES)] | None = None
    effectful: bool = False


# -- reconciled status: {"state": running | succeeded+payload | failed+message | ...} ------


class Running(_Strict, tag_field="state", tag="running", frozen=True):
    pass


class Succeeded(_Strict, tag_field="state", tag="succeeded", frozen=True):
    payload: Payload


class Failed(_Strict, tag_field="state", tag="failed", frozen=True):
    message: str


class CancelledState(_Strict, tag_field="state", tag="cancelled", frozen=True):
    pass


class UnknownState(_Strict, tag_field="state", tag="unknown", frozen=True):
    pass


Status = Running | Succeeded | Failed | CancelledState | UnknownState


class SignedEntry(_Strict, frozen=True):
    """A journal entry as the worker found it (section 11): ``body`` is the entry's exact
    JSON bytes, relayed verbatim (`msgspec.Raw`), so the host checks ``tag`` over the very
    bytes the worker wrote; its content is decoded only after that check."""

    tag: Hex32
    body: msgspec.Raw


# -- bodies: {"v": 1, "sid": ..., "seq": n, "type": kind, ...fields} ---------------------


class Body(_Strict, tag_field="type", frozen=True):
    """Fields every body has; `Sealer` fills them in."""

    v: int
    sid: str
    seq: int


# Host -> worker


class Open(Body, tag="open", frozen=True):
    grants: list[Grant]
    max_in_flight: Positive


class Invoke(Body, tag="invoke", frozen=True):
    rid: Id
    tool: Ref
    payload: Payload
    attempt: Positive
    idempotency_key: Id
    deadline_ms: NonNegative | None
    journal_key: Hex32 | None = None


class Cancel(Body, tag="cancel", frozen=True):
    cid: Id
    rid: Ref
    tool: Ref


class Reconcile(Body, tag="reconcile", frozen=True):
    rid: Id
    tool: Ref
    operation_key: Id


class Ping(Body, tag="ping", frozen=True):
    nonce: Nonce


class Close(Body, tag="close", frozen=True):
    pass


# Worker -> host


class Ready(Body, tag="ready", frozen=True):
    tools: list[ToolSpec]
    impl: str
    version: str


class Chunk(Body, tag="chunk", frozen=True):
    rid: Ref
    index: Positive
    text: str


class Result(Body, tag="result", frozen=True):
    rid: Ref
    payload: Payload


class Error(Body, tag="error", frozen=True):
    rid: Ref
    code: Id
    message: str
    retryable: bool


class CancelResult(Body, tag="cancel_result", frozen=True):
    cid: Ref
    rid: Ref
    tool: Ref
    outcome: CancelOutcome


class Reconciled(Body, tag="reconciled", frozen=True):
    rid: Ref
    tool: Ref
    operation_key: Ref
    status: Status
    journal: Annotated[list[SignedEntry], msgspec.Meta(min_length=1, max_length=2)] | None = None


class Pong(Body, tag="pong", frozen=True):
    nonce: Nonce


HostMessage = Open | Invoke | Cancel | Reconcile | Ping | Close
WorkerMessage = Ready | Chunk | Result | Error | CancelResult | Reconciled | Pong

HOST_KINDS: tuple[type[Body], ...] = (Open, Invoke, Cancel, Reconcile, Ping, Close)
WORKER_KINDS: tuple[type[Body], ...] = (Ready, Chunk, Result, Error, CancelResult, Reconciled, Pong)
