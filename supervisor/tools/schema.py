"""Schema validation of tool inputs, with bashkit 0.20.1's keyword set and messages.

bashkit checks a deliberate subset of JSON Schema: ``type`` (names or lists), ``enum``,
``required``, ``additionalProperties: false``, recursive ``properties``/``items``,
``oneOf``/``anyOf``/``allOf`` (``oneOf`` accepts when *any* branch matches) and local
``$ref``; it reports the first error in a fixed keyword order with messages such as
``input.ids[1] must be integer``. Other keywords (``minimum``, ``pattern``...) describe a
tool to the model but are not enforced, as in bashkit.

Two layers, compiled once per tool:

* the authority is a ``jsonschema`` validator class built with bashkit's keywords,
  keyword order and type rules; ``jsonschema`` walks the instance and tracks the error
  path, and its first error is mapped to bashkit's message;
* a fast accept check compiled to closures answers "valid" for the common schemas
  (no ``$ref``/``oneOf``/``anyOf``/``allOf``) in well under a microsecond, so the
  per-call path never pays for the general walker; any rejection is explained by the
  authority. A property test keeps the two in agreement.

``$ref`` is resolved as bashkit resolves it: ``#/...`` JSON pointers into the tool's root
schema (``~1``/``~0`` decoded). A ref that does not start with ``#`` is external and
refused; one that does not resolve is refused; a ref met again while it is being
validated (even one level of instance deeper) is cyclic and refused. All three fail
closed with 0.20.1's messages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import ValidationError

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1

#: bashkit's keyword order within one schema object; the first error wins.
_KEYWORD_ORDER = (
    "$ref",
    "type",
    "oneOf",
    "anyOf",
    "allOf",
    "enum",
    "required",
    "additionalProperties",
    "properties",
    "items",
)


def has_type(value: object, name: str) -> bool:
    """bashkit's JSON types: integers are i64/u64 (``3.0`` is not one), booleans are
    neither integers nor numbers, and an unknown type name matches anything."""
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return type(value) is int and _I64_MIN <= value <= _U64_MAX
    if name == "number":
        return (isinstance(value, int | float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    return True


def json_equal(a: object, b: object) -> bool:
    """JSON equality for ``enum``: ``true`` is not ``1``, and ``1`` is not ``1.0``
    (serde_json compares the number representation)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return a == b


def resolve_pointer(ref: str, root: object) -> object | None:
    """The target of a local ``#/a/b`` ref in ``root``; None when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    current = root
    for segment in ref[2:].split("/"):
        key = segment.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if key not in current:
                return None
            current = current[key]
        elif isinstance(current, list) and key.isdigit() and key.isascii():
            index = int(key)
            if index >= len(current):
                return None
            current = current[index]
        else:
            return None
    return current


def _type_names(expected: object) -> list[str]:
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list):
        return [t for t in expected if isinstance(t, str)]
    return []


# --- the authority: jsonschema with bashkit's keywords -----------------------------------


@dataclass(slots=True)
class _Walk:
    """Per-validation state the keyword functions share: the root schema (for refs) and
    the refs being validated (for cycle detection)."""

    root: dict[str, Any]
    active_refs: list[str] = field(default_factory=list)


_WALK: ContextVar[_Walk] = ContextVar("schema_walk")


def _error(kind: str, detail: str = "") -> ValidationError:
    error = ValidationError(detail or kind)
    error.validator = kind
    return error


def _first(errors: Iterator[ValidationError]) -> ValidationError | None:
    """The first error of a walk, closing the walk so its ref bookkeeping unwinds."""
    try:
        return next(errors, None)
    finally:
        close = getattr(errors, "close", None)
        if close is not None:
            close()


def _applies(schema: object) -> bool:
    return isinstance(schema, dict) and bool(schema)


def _kw_ref(validator: Any, ref: object, instance: object, schema: object) -> Iterator[Any]:
    if not isinstance(ref, str):
        yield _error("ref", "schema has a non-string $ref")
        return
    if not ref.startswith("#"):
        yield _error("ref", f"schema uses unsupported external $ref '{ref}'")
        return
    walk = _WALK.get()
    target = resolve_pointer(ref, walk.root)
    if target is None:
        yield _error("ref", f"schema has unresolved $ref '{ref}'")
        return
    if ref in walk.active_refs:
        yield _error("ref", f"schema has cyclic $ref '{ref}'")
        return
    if not _applies(target):
        return
    walk.active_refs.append(ref)
    try:
        error = _first(validator.descend(instance, target))
    finally:
        walk.active_refs.pop()
    if error is not None:
        yield error


def _kw_type(validator: Any, expected: object, instance: object, schema: object) -> Iterator[Any]:
    names = _type_names(expected)
    if names and not any(has_type(instance, name) for name in names):
        yield _error("type", "must be " + " or ".join(names))


def _any_branch(validator: Any, keyword: str, branches: object, instance: object) -> Iterator[Any]:
    if not isinstance(branches, list):
        return
    for branch in branches:
        if not _applies(branch) or _first(validator.descend(instance, branch)) is None:
            return
    yield _error("branch", f"does not match any {keyword} branch")


def _kw_one_of(validator: Any, branches: object, instance: object, schema: object) -> Iterator[Any]:
    yield from _any_branch(validator, "oneOf", branches, instance)


def _kw_any_of(validator: Any, branches: object, instance: object, schema: object) -> Iterator[Any]:
    yield from _any_branch(validator, "anyOf", branches, instance)


def _kw_all_of(validator: Any, branches: object, instance: object, schema: object) -> Iterator[Any]:
    if not isinstance(branches, list):
        return
    for branch in branches:
        if _applies(branch):
            error = _first(validator.descend(instance, branch))
            if error is not None:
                yield error
                return


def _kw_enum(validator: Any, allowed: object, instance: object, schema: object) -> Iterator[Any]:
    if isinstance(allowed, list) and not any(json_equal(instance, a) for a in allowed):
        yield _error("enum", "is not an allowed value")


def _kw_required(
    validator: Any, required: object, instance: object, schema: object
) -> Iterator[Any]:
    if isinstance(instance, dict) and isinstance(required, list):
        for key in required:
            if isinstance(key, str) and key not in instance:
                yield _error("required", f"required property '{key}' is missing")
                return


def _kw_additional(
    validator: Any, additional: object, instance: object, schema: Any
) -> Iterator[Any]:
    if additional is False and isinstance(instance, dict):
        properties = schema.get("properties")
        known = properties if isinstance(properties, dict) else {}
        for key in sorted(instance):
            if key not in known:
                yield _error("unknown", f"unknown property '{key}'")
                return


def _kw_properties(
    validator: Any, properties: object, instance: object, schema: object
) -> Iterator[Any]:
    if isinstance(instance, dict) and isinstance(properties, dict):
        for key in sorted(instance):
            child = properties.get(key)
            if _applies(child):
                error = _first(validator.descend(instance[key], child, path=key))
                if error is not None:
                    yield error
                    return


def _kw_items(validator: Any, items: object, instance: object, schema: object) -> Iterator[Any]:
    if isinstance(instance, list) and _applies(items):
        for index, child in enumerate(instance):
            error = _first(validator.descend(child, items, path=index))
            if error is not None:
                yield error
                return


def _bashkit_keywords(schema: Any) -> list[tuple[str, Any]]:
    if not isinstance(schema, dict):
        return []
    return [(k, schema[k]) for k in _KEYWORD_ORDER if k in schema]


_BashkitValidator = validators.create(
    meta_schema={},
    validators={
        "$ref": _kw_ref,
        "type": _kw_type,
        "oneOf": _kw_one_of,
        "anyOf": _kw_any_of,
        "allOf": _kw_all_of,
        "enum": _kw_enum,
        "required": _kw_required,
        "additionalProperties": _kw_additional,
        "properties": _kw_properties,
        "items": _kw_items,
    },
    applicable_validators=_bashkit_keywords,
)

#: Errors that name no instance path (bashkit prints them bare).
_PATHLESS = frozenset({"required", "unknown"})


def format_path(path: deque[str | int] | list[str | int]) -> str:
    out = ["input"]
    for part in path:
        out.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(out)


def _message(error: ValidationError) -> str:
    message = str(error.message)
    if error.validator in _PATHLESS:
        return message
    return f"{format_path(error.absolute_path)} {message}"


# --- the fast accept path ------------------------------------------------------------------

_Check = Callable[[object], bool]


class _NeedsAuthority(Exception):
    """The schema uses a construct (refs, branches) only the authority handles."""


def compile_fast(schema: object) -> _Check | None:
    """A closure that answers "valid" for ``schema``; None when the schema needs the
    authority (refs, branches), or None-free schemas need no check at all."""
    try:
        return _compile(schema)
    except _NeedsAuthority:
        return None


def _always(value: object) -> bool:
    return True


def _is_integer(v: object) -> bool:
    return type(v) is int and _I64_MIN <= v <= _U64_MAX


#: One predicate per type name: the same answers as ``has_type``, without its dispatch.
_TYPE_CHECKS: dict[str, _Check] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _type_check(names: list[str]) -> _Check | None:
    if any(name not in _TYPE_CHECKS for name in names):
        return None  # an unknown type name accepts anything
    checks = [_TYPE_CHECKS[name] for name in names]
    if len(checks) == 1:
        return checks[0]
    first, rest = checks[0], checks[1:]
    return lambda v: first(v) or any(check(v) for check in rest)


def _all(checks: list[_Check]) -> _Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda v: a(v) and b(v)
    return lambda v: all(check(v) for check in checks)


def _compile(schema: object) -> _Check:
    if not _applies(schema):
        return _always
    assert isinstance(schema, dict)
    if any(k in schema for k in ("$ref", "oneOf", "anyOf", "allOf")):
        raise _NeedsAuthority
    checks: list[_Check] = []
    names = _type_names(schema.get("type"))
    type_check = _type_check(names) if names else None
    if type_check is not None:
        checks.append(type_check)
    allowed = schema.get("enum")
    if isinstance(allowed, list):
        checks.append(lambda v: any(json_equal(v, a) for a in allowed))
    obj = _compile_object(schema)
    if obj is not None:
        checks.append(obj)
    items = schema.get("items")
    if _applies(items):
        item_check = _compile(items)
        if item_check is not _always:
            checks.append(lambda v: not isinstance(v, list) or all(map(item_check, v)))
    return _all(checks)


def _compile_object(schema: dict[str, Any]) -> _Check | None:
    """``required``, ``additionalProperties: false`` and ``properties`` as one closure."""
    required = schema.get("required")
    required_keys = (
        tuple(k for k in required if isinstance(k, str)) if isinstance(required, list) else ()
    )
    properties = schema.get("properties")
    known = properties if isinstance(properties, dict) else {}
    props = {
        key: compiled
        for key, child in known.items()
        if (compiled := _compile(child)) is not _always
    }
    closed = schema.get("additionalProperties") is False
    if not required_keys and not props and not closed:
        return None
    known_keys = frozenset(known)

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return True
        for key in required_keys:
            if key not in value:
                return False
        if closed and not known_keys.issuperset(value):
            return False
        for key, child in value.items():
            child_check = props.get(key)
            if child_check is not None and not child_check(child):
                return False
        return True

    return check


# --- the compiled validator ---------------------------------------------------------------


class SchemaValidator:
    """One tool's input validator, compiled once at registration."""

    __slots__ = ("_authority", "_fast", "_root", "empty")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        root = dict(schema)
        self._root = root
        self.empty = not root
        self._fast = compile_fast(root)
        self._authority = _BashkitValidator(root)

    def error(self, instance: object) -> str | None:
        """bashkit's message for the first violation, or None when ``instance`` is valid."""
        if self.empty:
            return None
        fast = self._fast
        if fast is not None and fast(instance):
            return None
        return self.explain(instance)

    def explain(self, instance: object) -> str | None:
        """The authority's answer (the slow path; also what the property test compares)."""
        token = _WALK.set(_Walk(self._root))
        try:
            first = _first(self._authority.iter_errors(instance))
        finally:
            _WALK.reset(token)
        return None if first is None else _message(first)
