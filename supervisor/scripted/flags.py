"""``--key value`` flags to a JSON object, driven by a tool's schema (bashkit's rules).

Every detail here is observable by a script and is pinned by reference-bashkit.md
section 2 and the 0.20.1 oracle: which token is consumed, how values are coerced, the
exact error text (no tool prefix, no newline; the caller exits 2), the 64 KiB budget of
parsed data per call and the 4096-item cap on array flags. A ``FlagParser`` is compiled
once per tool; ``parse_flags`` is the one-shot form.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from typing import Any

from supervisor.tools.schema import resolve_pointer

MAX_REF_DEPTH = 16
MAX_AGGREGATE_JSON_BYTES = 64 * 1024
MAX_PARSED_FLAG_BYTES = 64 * 1024
MAX_ARRAY_FLAG_ITEMS = 4096
#: serde_json refuses JSON nested this deep (the value then stays a string).
_MAX_JSON_DEPTH = 128

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(
    r"[+-]?(?:inf|infinity|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)",
    re.ASCII | re.IGNORECASE,
)
_I64_MIN, _I64_MAX, _U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class FlagError(ValueError):
    """A flag-parsing failure; ``str()`` is the exact text bashkit writes to stderr."""


class FlagType(enum.Enum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    ARRAY = "array"
    OBJECT = "object"
    UNKNOWN = "unknown"


_AGGREGATE = (FlagType.ARRAY, FlagType.OBJECT)
_BY_NAME = {t.value: t for t in FlagType if t is not FlagType.UNKNOWN}


# --- schema reading ---------------------------------------------------------------------


def effective_type(schema: object, root: object, depth: int = 0) -> FlagType:
    """The type a property's flag is parsed as: ``$ref`` followed, type lists and
    ``oneOf``/``anyOf``/``allOf`` branches preferring an aggregate, ``items`` meaning
    array and ``properties`` meaning object."""
    if depth > MAX_REF_DEPTH or not isinstance(schema, dict):
        return FlagType.UNKNOWN
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = resolve_pointer(ref, root) if ref.startswith("#/") else None
        return FlagType.UNKNOWN if target is None else effective_type(target, root, depth + 1)
    declared = schema.get("type")
    if isinstance(declared, str):
        return _BY_NAME.get(declared, FlagType.UNKNOWN)
    if isinstance(declared, list):
        names = [t for t in declared if isinstance(t, str)]
        for name in names:
            if name in ("array", "object"):
                return _BY_NAME[name]
        for name in names:
            if name != "null":
                return _BY_NAME.get(name, FlagType.UNKNOWN)
    for keyword in ("oneOf", "anyOf", "allOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            kinds = [effective_type(b, root, depth + 1) for b in branches]
            for kind in kinds:
                if kind in _AGGREGATE:
                    return kind
            for kind in kinds:
                if kind is not FlagType.UNKNOWN:
                    return kind
    if "items" in schema:
        return FlagType.ARRAY
    if "properties" in schema:
        return FlagType.OBJECT
    return FlagType.UNKNOWN


def object_properties(schema: object, root: object, depth: int = 0) -> dict[str, Any]:
    """The properties a ``key=value`` group may name: refs followed, branch properties
    merged (the first branch to name a key wins)."""
    if depth > MAX_REF_DEPTH or not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = resolve_pointer(ref, root) if ref.startswith("#/") else None
        return {} if target is None else object_properties(target, root, depth + 1)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        return properties
    merged: dict[str, Any] = {}
    for keyword in ("oneOf", "anyOf", "allOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                for key, value in object_properties(branch, root, depth + 1).items():
                    merged.setdefault(key, value)
    return merged


def usage_from_schema(schema: Mapping[str, Any]) -> str | None:
    """The usage hint of a tool (``--id <integer> --tags <json|a,b,c>``), keys sorted;
    None when the schema has no properties."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return None
    parts = []
    for key in sorted(properties):
        prop = properties[key]
        kind = effective_type(prop, schema)
        if kind is FlagType.OBJECT:
            hint = "json|key=value..."
        elif kind is FlagType.ARRAY:
            items = prop.get("items") if isinstance(prop, dict) else None
            is_objects = items is not None and effective_type(items, schema) is FlagType.OBJECT
            hint = "json|key=value..." if is_objects else "json|a,b,c"
        elif kind is FlagType.UNKNOWN:
            declared = prop.get("type") if isinstance(prop, dict) else None
            hint = declared if isinstance(declared, str) else "value"
        else:
            hint = kind.value
        parts.append(f"--{key} <{hint}>")
    return " ".join(parts)


# --- values ---------------------------------------------------------------------------


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Invalid(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise _Invalid(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Invalid(text)
    return value


def _serde_int(text: str) -> int | float:
    value = int(text)
    if value == 0 and text.startswith("-"):
        return -0.0
    if _I64_MIN <= value <= _U64_MAX:
        return value
    return float(text)


def _sorted_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(sorted(dict(pairs).items()))


def _depth_ok(value: Any, depth: int = 1) -> bool:
    if depth >= _MAX_JSON_DEPTH:
        return False
    children = value.values() if isinstance(value, dict) else value
    return all(_depth_ok(child, depth + 1) for child in children if isinstance(child, dict | list))


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


_NOT_JSON = object()


def parse_json_value(raw: str) -> Any:
    """``raw`` as serde_json reads it (keys sorted, no NaN/Infinity, no lone surrogates,
    at most 127 levels, integers beyond u64 as floats, at most 64 KiB), or ``_NOT_JSON``."""
    if utf8_len(raw) > MAX_AGGREGATE_JSON_BYTES:
        return _NOT_JSON
    try:
        value = json.loads(
            raw,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_serde_int,
            object_pairs_hook=_sorted_object,
        )
    except (ValueError, _Invalid, RecursionError):
        return _NOT_JSON
    if isinstance(value, dict | list):
        if raw.count("[") + raw.count("{") >= _MAX_JSON_DEPTH and not _depth_ok(value):
            return _NOT_JSON
        if "\\u" in raw and _has_surrogate(value):
            return _NOT_JSON
    elif "\\u" in raw and _has_surrogate(value):
        return _NOT_JSON
    return value


def coerce(raw: str, kind: FlagType) -> Any:
    """A raw token as the schema type wants it; a token that does not fit stays a string
    (the validator then names the problem)."""
    if kind is FlagType.STRING or kind is FlagType.UNKNOWN:
        return raw
    if kind is FlagType.INTEGER:
        if _INT.fullmatch(raw):
            value = int(raw)
            if _I64_MIN <= value <= _I64_MAX:
                return value
        return raw
    if kind is FlagType.NUMBER:
        if _FLOAT.fullmatch(raw):
            number = float(raw)
            # Rust parses inf/nan, and serde_json turns a non-finite f64 into null.
            return number if number - number == 0.0 else None
        return raw
    if kind is FlagType.BOOLEAN:
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no"):
            return False
        return raw
    if raw.lstrip()[:1] in ("[", "{"):
        parsed = parse_json_value(raw)
        if parsed is not _NOT_JSON:
            return parsed
    return raw


# --- the parser -------------------------------------------------------------------------


class _Budget:
    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0

    def spend(self, nbytes: int, flag: str) -> None:
        self.used += nbytes
        if self.used > MAX_PARSED_FLAG_BYTES:
            raise FlagError(f"--{flag}: parsed flag data exceeds {MAX_PARSED_FLAG_BYTES} bytes")


def _check_items(flag: str, existing: int, adding: int) -> None:
    total = existing + adding
    if total > MAX_ARRAY_FLAG_ITEMS:
        raise FlagError(
            f"--{flag}: array flag has {total} items; maximum is {MAX_ARRAY_FLAG_ITEMS}"
        )


class _Property:
    """What the parser needs of one schema property, computed once."""

    __slots__ = ("item_kind", "items", "kind", "pair_keys", "schema")

    def __init__(self, schema: object, root: dict[str, Any]) -> None:
        self.schema = schema
        self.kind = effective_type(schema, root)
        self.items: object = schema.get("items") if isinstance(schema, dict) else None
        self.item_kind = (
            effective_type(self.items, root) if self.items is not None else FlagType.UNKNOWN
        )
        pair_schema = self.items if self.kind is FlagType.ARRAY else schema
        self.pair_keys = object_properties(pair_schema, root)


_NO_PROPERTY: _Property | None = None


class FlagParser:
    """``parse(argv)`` for one schema; the schema is read once, here."""

    __slots__ = ("_closed_hint", "_props", "_root")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        root = dict(schema)
        self._root = root
        properties = root.get("properties")
        props = properties if isinstance(properties, dict) else {}
        self._props = {key: _Property(value, root) for key, value in props.items()}
        self._closed_hint: str | None = None
        if root.get("additionalProperties") is False:
            names = ", ".join(f"--{k}" for k in sorted(props))
            self._closed_hint = (
                f"expected one of: {names}" if props else "this command takes no flags"
            )

    def parse(self, argv: list[str]) -> dict[str, Any]:
        """The params object of ``argv`` (keys sorted), or ``FlagError``."""
        result: dict[str, Any] = {}
        props = self._props
        closed = self._closed_hint
        budget = _Budget()
        i, n = 0, len(argv)
        while i < n:
            arg = argv[i]
            if not arg.startswith("--"):
                raise FlagError(f"expected --flag, got: {arg}")
            flag = arg[2:]
            key, eq, raw = flag.partition("=")
            prop = props.get(key)
            if prop is None and closed is not None:
                raise FlagError(f"unknown flag: --{key} ({closed})")
            i += 1
            if eq:
                budget.spend(utf8_len(raw), key)
                result[key] = raw if prop is None else coerce(raw, prop.kind)
                continue
            kind = FlagType.UNKNOWN if prop is None else prop.kind
            if kind is FlagType.BOOLEAN:
                result[key] = True
            elif kind is FlagType.ARRAY:
                assert prop is not None
                i = self._array(argv, i, prop, key, result, budget)
            elif kind is FlagType.OBJECT:
                assert prop is not None
                i = self._object(argv, i, prop, key, result, budget)
            elif i < n and not argv[i].startswith("--"):
                raw = argv[i]
                budget.spend(utf8_len(raw), key)
                result[key] = raw if prop is None else coerce(raw, kind)
                i += 1
            else:
                result[key] = True
        if len(result) > 1:
            return dict(sorted(result.items()))
        return result

    def _array(
        self,
        argv: list[str],
        i: int,
        prop: _Property,
        key: str,
        result: dict[str, Any],
        budget: _Budget,
    ) -> int:
        if i >= len(argv) or argv[i].startswith("--"):
            raise FlagError(f"--{key}: missing value")
        token = argv[i]
        head = token.lstrip()[:1]
        items: list[Any]
        if head == "[":
            parsed = parse_json_value(token)
            if not isinstance(parsed, list):
                result[key] = token
                return i + 1
            _check_items(key, 0, len(parsed))
            budget.spend(utf8_len(token), key)
            items, i = parsed, i + 1
        elif prop.item_kind is FlagType.OBJECT:
            if head == "{":
                parsed = parse_json_value(token)
                if parsed is _NOT_JSON:
                    result[key] = token
                    return i + 1
                budget.spend(utf8_len(token), key)
                items, i = [parsed], i + 1
            elif "=" in token:
                group, i = self._pairs(argv, i, prop, key, budget)
                items = [group]
            else:
                raise FlagError(f"--{key}: expected JSON or key=value pairs, got '{token}'")
        else:
            parts = token.split(",")
            _check_items(key, 0, len(parts))
            budget.spend(utf8_len(token), key)
            item_kind = prop.item_kind
            items, i = [coerce(part, item_kind) for part in parts], i + 1
        existing = result.get(key)
        if isinstance(existing, list):
            _check_items(key, len(existing), len(items))
            existing.extend(items)
        else:
            result[key] = items
        return i

    def _object(
        self,
        argv: list[str],
        i: int,
        prop: _Property,
        key: str,
        result: dict[str, Any],
        budget: _Budget,
    ) -> int:
        if i >= len(argv) or argv[i].startswith("--"):
            result[key] = True
            return i
        token = argv[i]
        if token.lstrip()[:1] in ("{", "[") or "=" not in token:
            budget.spend(utf8_len(token), key)
            result[key] = coerce(token, FlagType.OBJECT)
            return i + 1
        result[key], i = self._pairs(argv, i, prop, key, budget)
        return i

    def _pairs(
        self, argv: list[str], i: int, prop: _Property, flag: str, budget: _Budget
    ) -> tuple[dict[str, Any], int]:
        """One ``k=v ...`` group, up to the next ``--flag``."""
        group: dict[str, Any] = {}
        known = prop.pair_keys
        root = self._root
        while i < len(argv):
            token = argv[i]
            if token.startswith("--"):
                break
            k, eq, v = token.partition("=")
            if not eq:
                raise FlagError(f"--{flag}: expected --flag or key=value, got '{token}'")
            if known and k not in known:
                valid = ", ".join(sorted(known))
                raise FlagError(f"--{flag}: unknown key '{k}'; valid keys: {valid}")
            budget.spend(utf8_len(k) + utf8_len(v), flag)
            nested = known.get(k)
            group[k] = v if nested is None else coerce(v, effective_type(nested, root))
            i += 1
        return dict(sorted(group.items())), i


def parse_flags(argv: list[str], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Parse ``argv`` (without the command name) against ``schema``; raises ``FlagError``."""
    return FlagParser(schema).parse(argv)
