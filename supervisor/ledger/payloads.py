"""Payload rules shared by inputs, results and the journal (protocol.md section 5).

A text payload is a string counted in UTF-8 bytes; a json payload is an object or array
of plain JSON values, at most 32 levels deep (the root is level 1), counted as its compact
encoding. Each check returns the exact bytes the journal stores and the digests cover.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec

from supervisor.ledger.errors import PolicyError

MAX_JSON_DEPTH = 32
_SCALARS = (str, int, float, bool, type(None))
_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


class PayloadError(Exception):
    """Why a value is not a valid payload (the caller turns it into its own error)."""


def _check_json_tree(value: object) -> None:
    if not isinstance(value, dict | list):
        raise PayloadError("a json payload must be an object or an array")
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise PayloadError(f"json nesting is deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(node, dict):
            for key in node:
                if not isinstance(key, str):
                    raise PayloadError("json object keys must be strings")
            children: Any = node.values()
        else:
            children = node
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif not isinstance(child, _SCALARS):
                raise PayloadError(f"{type(child).__name__} is not a JSON value")
            elif isinstance(child, float) and not math.isfinite(child):
                raise PayloadError("json numbers must be finite")


def encode(fmt: str, value: object) -> bytes:
    """The payload's bytes: UTF-8 text, or compact JSON. Raises ``PayloadError``."""
    if fmt == "text":
        if not isinstance(value, str):
            raise PayloadError(f"a text payload must be a str, got {type(value).__name__}")
        try:
            return value.encode()
        except UnicodeEncodeError as exc:
            raise PayloadError(reason(exc)) from exc
    _check_json_tree(value)
    try:
        return _encode_json(value)
    except (TypeError, ValueError, OverflowError) as exc:  # e.g. an int beyond 64 bits
        raise PayloadError(f"value cannot be encoded as JSON: {exc}") from exc


def reason(exc: PayloadError | UnicodeEncodeError) -> str:
    """Why a value was refused; callers that encode text inline also catch
    ``UnicodeEncodeError``."""
    if isinstance(exc, UnicodeEncodeError):
        return "text is not valid Unicode (lone surrogate)"
    return str(exc)


def decode(fmt: str, data: bytes) -> Any:
    """The inverse of ``encode`` for bytes the journal stored."""
    return data.decode() if fmt == "text" else _decode_json(data)


#: A compiled contract: returns None for a valid value, else a reason without the value.
Contract = Callable[[Any], "str | None"]


def compile_contract(schema: dict[str, Any]) -> Contract:
    """Check ``schema`` is a valid JSON schema and return its validator."""
    import jsonschema  # deferred: only json tools with a contract pay for it

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise PolicyError(f"contract is not a valid JSON schema: {exc.message}") from exc
    validator = cls(schema)

    def check(value: Any) -> str | None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is None:
            return None
        # The keyword and the location only: the value itself may be sensitive.
        return f"contract violation at {error.json_path}: {error.validator}"

    return check
