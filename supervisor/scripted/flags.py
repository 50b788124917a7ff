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
from collections.abc import Callable, Mapping
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
    if len(text) > 21:  # past u64 whatever its zeros: serde_json's f64, or out of range
        value_f = float(text)
        if value_f in (float("inf"), float("-inf")):
            raise _Invalid(text)
        return value_f
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


def _keep(raw: str) -> Any:
    return raw


def _to_integer(raw: str) -> Any:
    """Rust's ``i64`` parse: optional sign, ASCII digits, in range; else the string."""
    if raw.isdigit() and raw.isascii() and len(raw) < 19:
        return int(raw)
    if _INT.fullmatch(raw):
        sign = "-" if raw[0] == "-" else ""
        digits = raw.lstrip("+-").lstrip("0") or "0"
        if len(digits) <= 19:  # longer is out of range (no Python digit limit to meet)
            value = int(sign + digits)
            if _I64_MIN <= value <= _I64_MAX:
                return value
    return raw


def _to_number(raw: str) -> Any:
    """Rust's ``f64`` parse; a non-finite result becomes null, as serde_json writes it."""
    if _FLOAT.fullmatch(raw):
        number = float(raw)
        return number if number - number == 0.0 else None
    return raw


def _to_boolean(raw: str) -> Any:
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no"):
        return False
    return raw


def _to_aggregate(raw: str) -> Any:
    if raw.lstrip()[:1] in ("[", "{"):
        parsed = parse_json_value(raw)
        if parsed is not _NOT_JSON:
            return parsed
    return raw


_CONVERTERS: dict[FlagType, Callable[[str], Any]] = {
    FlagType.STRING: _keep,
    FlagType.UNKNOWN: _keep,
    FlagType.INTEGER: _to_integer,
    FlagType.NUMBER: _to_number,
    FlagType.BOOLEAN: _to_boolean,
    FlagType.ARRAY: _to_aggregate,
    FlagType.OBJECT: _to_aggregate,
}


def coerce(raw: str, kind: FlagType) -> Any:
    """A raw token as the schema type wants it; a token that does not fit stays a string
    (the validator then names the problem)."""
    return _CONVERTERS[kind](raw)


# --- the parser -------------------------------------------------------------------------


def _spend(used: int, raw: str, flag: str) -> int:
    """The byte budget after adding ``raw``; ``FlagError`` once it passes 64 KiB."""
    used += len(raw) if raw.isascii() else utf8_len(raw)
    if used > MAX_PARSED_FLAG_BYTES:
        raise FlagError(f"--{flag}: parsed flag data exceeds {MAX_PARSED_FLAG_BYTES} bytes")
    return used


def _check_items(flag: str, existing: int, adding: int) -> None:
    total = existing + adding
    if total > MAX_ARRAY_FLAG_ITEMS:
        raise FlagError(
            f"--{flag}: array flag has {total} items; maximum is {MAX_ARRAY_FLAG_ITEMS}"
        )


class _Property:
    """What the parser needs of one schema property, computed once."""

    __slots__ = ("convert", "item_convert", "item_kind", "kind", "pair_keys")

    def __init__(self, schema: object, root: dict[str, Any]) -> None:
        self.kind = effective_type(schema, root)
        self.convert = _CONVERTERS[self.kind]
        items = schema.get("items") if isinstance(schema, dict) else None
        self.item_kind = effective_type(items, root) if items is not None else FlagType.UNKNOWN
        self.item_convert = _CONVERTERS[self.item_kind]
        pair_schema = items if self.kind is FlagType.ARRAY else schema
        #: The keys a ``k=v`` group may use, each with its converter.
        self.pair_keys = {
            key: _CONVERTERS[effective_type(value, root)]
            for key, value in object_properties(pair_schema, root).items()
        }


class FlagParser:
    """``parse(argv)`` for one schema; the schema is read once, here."""

    __slots__ = ("_closed_hint", "_props")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        root = dict(schema)
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
        used = names = 0
        i, n = 0, len(argv)
        while i < n:
            arg = argv[i]
            if arg[:2] != "--":
                raise FlagError(f"expected --flag, got: {arg}")
            key, eq, raw = arg[2:].partition("=")
            prop = props.get(key)
            if prop is None and closed is not None:
                raise FlagError(f"unknown flag: --{key} ({closed})")
            # the names have a budget of their own (the values' is the reference's): a
            # call of 100,000 boolean flags is refused too
            names = _spend(names, key, key)
            i += 1
            if eq:
                used = _spend(used, raw, key)
                result[key] = raw if prop is None else prop.convert(raw)
                continue
            kind = FlagType.UNKNOWN if prop is None else prop.kind
            if kind is FlagType.BOOLEAN:
                result[key] = True
            elif kind is FlagType.ARRAY:
                assert prop is not None
                i, used = self._array(argv, i, prop, key, result, used)
            elif kind is FlagType.OBJECT:
                assert prop is not None
                i, used = self._object(argv, i, prop, key, result, used)
            elif i < n and argv[i][:2] != "--":
                raw = argv[i]
                used += len(raw) if raw.isascii() else utf8_len(raw)
                if used > MAX_PARSED_FLAG_BYTES:
                    _spend(used, "", key)
                result[key] = raw if prop is None else prop.convert(raw)
                i += 1
            else:
                result[key] = True
        if len(result) > 1:
            return dict(sorted(result.items()))
        return result

    @staticmethod
    def _array(
        argv: list[str], i: int, prop: _Property, key: str, result: dict[str, Any], used: int
    ) -> tuple[int, int]:
        if i >= len(argv) or argv[i][:2] == "--":
            raise FlagError(f"--{key}: missing value")
        token = argv[i]
        head = token.lstrip()[:1]
        items: list[Any]
        if head == "[":
            parsed = parse_json_value(token)
            if not isinstance(parsed, list):
                result[key] = token
                return i + 1, used
            _check_items(key, 0, len(parsed))
            used = _spend(used, token, key)
            items, i = parsed, i + 1
        elif prop.item_kind is FlagType.OBJECT:
            if head == "{":
                parsed = parse_json_value(token)
                if parsed is _NOT_JSON:
                    result[key] = token
                    return i + 1, used
                used = _spend(used, token, key)
                items, i = [parsed], i + 1
            elif "=" in token:
                group, i, used = _pairs(argv, i, prop, key, used)
                items = [group]
            else:
                raise FlagError(f"--{key}: expected JSON or key=value pairs, got '{token}'")
        else:
            parts = token.split(",")
            _check_items(key, 0, len(parts))
            used = _spend(used, token, key)
            convert = prop.item_convert
            items, i = [convert(part) for part in parts], i + 1
        existing = result.get(key)
        if isinstance(existing, list):
            _check_items(key, len(existing), len(items))
            existing.extend(items)
        else:
            result[key] = items
        return i, used

    @staticmethod
    def _object(
        argv: list[str], i: int, prop: _Property, key: str, result: dict[str, Any], used: int
    ) -> tuple[int, int]:
        if i >= len(argv) or argv[i][:2] == "--":
            result[key] = True
            return i, used
        token = argv[i]
        if token.lstrip()[:1] in ("{", "[") or "=" not in token:
            used = _spend(used, token, key)
            result[key] = _to_aggregate(token)
            return i + 1, used
        result[key], i, used = _pairs(argv, i, prop, key, used)
        return i, used


def _pairs(
    argv: list[str], i: int, prop: _Property, flag: str, used: int
) -> tuple[dict[str, Any], int, int]:
    """One ``k=v ...`` group, up to the next ``--flag``."""
    group: dict[str, Any] = {}
    known = prop.pair_keys
    while i < len(argv):
        token = argv[i]
        if token[:2] == "--":
            break
        k, eq, v = token.partition("=")
        if not eq:
            raise FlagError(f"--{flag}: expected --flag or key=value, got '{token}'")
        if known and k not in known:
            valid = ", ".join(sorted(known))
            raise FlagError(f"--{flag}: unknown key '{k}'; valid keys: {valid}")
        used = _spend(used, k + v, flag)
        convert = known.get(k)
        group[k] = v if convert is None else convert(v)
        i += 1
    return dict(sorted(group.items())), i, used


def parse_flags(argv: list[str], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Parse ``argv`` (without the command name) against ``schema``; raises ``FlagError``."""
    return FlagParser(schema).parse(argv)
