"""Payload rules of spec section 5: format, JSON object/array only, depth, size in bytes.

One function checks a payload against a grant on either side, so the sender's refusal and
the receiver's fatal error can never disagree.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .errors import BadMessageText, BadToolSpec, FormatMismatch, PayloadTooDeep, StateViolation
from .limits import MAX_ERROR_MESSAGE_BYTES, MAX_JSON_DEPTH, MAX_SCHEMA_BYTES
from .messages import JsonPayload, Payload, TextPayload, ToolSpec

_encode = msgspec.json.Encoder().encode


def utf8_len(text: str) -> int:
    """UTF-8 byte length, without copying when the text is ASCII."""
    return len(text) if text.isascii() else len(text.encode())


def json_depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """True if containers nest deeper than ``limit`` (the root container is level 1).

    Iterative, so a hostile value cannot exhaust the Python stack while being measured.
    """
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def payload_size(payload: Payload) -> int:
    """Bytes counted against a grant: UTF-8 of text, compact JSON of json.

    A value that has no UTF-8 or JSON form (a lone surrogate, a set) is a format error.
    """
    try:
        if isinstance(payload, TextPayload):
            return utf8_len(payload.value)
        return len(_encode(payload.value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise FormatMismatch(f"payload has no {_format_of(payload)} encoding: {exc}") from None


def check_payload(
    payload: Payload, fmt: str, limit: int, too_large: type[StateViolation], what: str
) -> int:
    """Check format, depth and size against a grant; return the size in bytes."""
    if type(payload) is TextPayload and fmt == "text":  # the common case, inline
        value = payload.value
        size = len(value) if value.isascii() else payload_size(payload)
    else:
        if (fmt == "text") != isinstance(payload, TextPayload):
            raise FormatMismatch(f"{what} is {_format_of(payload)}, the grant says {fmt}")
        if isinstance(payload, JsonPayload) and json_depth_exceeds(payload.value):
            raise PayloadTooDeep(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
        size = payload_size(payload)
    if size > limit:
        raise too_large(f"{what} is {size} bytes, the grant allows {limit}")
    return size


def make_payload(value: object, fmt: str, what: str) -> Payload:
    """Wrap a Python value in the payload kind of ``fmt``; refuse what cannot be one."""
    if fmt == "text":
        if type(value) is str or isinstance(value, str):
            return TextPayload(value)
        raise FormatMismatch(f"{what} for a text grant must be str, not {type(value).__name__}")
    if isinstance(value, dict | list):
        return JsonPayload(value)
    raise FormatMismatch(f"{what} for a json grant must be an object or array")


def check_spec(spec: ToolSpec) -> None:
    """A tool description's rules beyond its types: a schema only on a json tool, at
    most `MAX_SCHEMA_BYTES` of JSON and 32 levels deep."""
    schema = spec.schema
    if schema is None:
        return
    if spec.format != "json":
        raise BadToolSpec(f"text tool {spec.name!r} has an input schema (json tools only)")
    if json_depth_exceeds(schema):
        raise BadToolSpec(f"the schema of {spec.name!r} nests deeper than {MAX_JSON_DEPTH}")
    try:
        size = len(_encode(schema))
    except (TypeError, ValueError, OverflowError) as exc:
        raise BadToolSpec(f"the schema of {spec.name!r} is not JSON: {exc}") from None
    if size > MAX_SCHEMA_BYTES:
        raise BadToolSpec(f"the schema of {spec.name!r} is {size} bytes, over {MAX_SCHEMA_BYTES}")


def check_message_text(message: str, what: str) -> None:
    """Error and failed messages: 1..4,096 UTF-8 bytes."""
    size = utf8_len(message)
    if not 1 <= size <= MAX_ERROR_MESSAGE_BYTES:
        raise BadMessageText(f"{what} is {size} bytes, must be 1..{MAX_ERROR_MESSAGE_BYTES}")


def clip_message(message: str) -> str:
    """Fit a message into 1..4,096 UTF-8 bytes without splitting a character."""
    if not message:
        return "error"
    data = message.encode()
    if len(data) <= MAX_ERROR_MESSAGE_BYTES:
        return message
    return data[:MAX_ERROR_MESSAGE_BYTES].decode(errors="ignore")


def _format_of(payload: Payload) -> str:
    return "text" if isinstance(payload, TextPayload) else "json"
