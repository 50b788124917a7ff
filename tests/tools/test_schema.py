"""Schema validation (reference-bashkit.md section 2.4 and 1.#9): bashkit's keyword set,
order and messages, local ``$ref`` with fail-closed cyclic/unresolved/external refs; and
the fast accept path kept in agreement with the jsonschema-based authority."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bashkit_oracle import run_oracle, run_ours
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.tools.schema import SchemaValidator, compile_fast

INT = {"type": "integer"}
STR = {"type": "string"}


def obj(required: list[str] | None = None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def with_defs(schema: dict[str, Any], **defs: Any) -> dict[str, Any]:
    return {**schema, "$defs": defs}


NODE = {"type": "object", "properties": {"v": INT, "next": {"$ref": "#/$defs/node"}}}

# (id, schema, argv, expected message or None when valid)
CASES: list[tuple[str, dict[str, Any], list[str], str | None]] = [
    ("type", obj(a=INT), ["--a", "x"], "input.a must be integer"),
    (
        "type-list",
        obj(c={"type": ["integer", "null"]}),
        ["--c", "x"],
        "input.c must be integer or null",
    ),
    ("nested-path", obj(a=obj(b=INT)), ["--a", '{"b":"x"}'], "input.a.b must be integer"),
    (
        "item-path",
        obj(ids={"type": "array", "items": INT}),
        ["--ids", "1,x,y"],
        "input.ids[1] must be integer",
    ),
    ("enum", obj(c={"enum": ["r", "g"]}), ["--c", "b"], "input.c is not an allowed value"),
    (
        "enum-bool-is-not-1",
        obj(n={"type": "array", "items": {"enum": [1]}}),
        ["--n", "[true]"],
        "input.n[0] is not an allowed value",
    ),
    (
        "enum-float-is-not-int",
        obj(n={"type": "array", "items": {"enum": [1]}}),
        ["--n", "[1.0]"],
        "input.n[0] is not an allowed value",
    ),
    (
        "enum-object",
        obj(n={"type": "array", "items": {"enum": [{"a": 1}]}}),
        ["--n", '[{"a":1}]'],
        None,
    ),
    ("required-first-missing", obj(["c", "d"], c=STR), [], "required property 'c' is missing"),
    ("required-order", obj(["d", "c"], c=STR), [], "required property 'd' is missing"),
    (
        "required-before-properties",
        {**obj(["z"], c={"type": "integer", "enum": [1]})},
        ["--c", "x"],
        "required property 'z' is missing",
    ),
    (
        "nested-closed-object",
        obj(o={"type": "object", "properties": {"a": INT}, "additionalProperties": False}),
        ["--o", '{"b":1,"a":"x"}'],
        "unknown property 'b'",
    ),
    (
        "oneof-any",
        obj(c={"oneOf": [INT, {"type": "boolean"}]}),
        ["--c", "x"],
        "input.c does not match any oneOf branch",
    ),
    ("oneof-two-match", obj(n={"oneOf": [INT, {"type": "number"}]}), ["--n=3"], None),
    (
        "anyof",
        obj(c={"anyOf": [INT, {"type": "boolean"}]}),
        ["--c", "x"],
        "input.c does not match any anyOf branch",
    ),
    (
        "allof-first-error",
        obj(c={"allOf": [INT, {"type": "boolean"}]}),
        ["--c", "x"],
        "input.c must be integer",
    ),
    ("keys-sorted", obj(a=INT, b=INT), ["--b", "x", "--a", "y"], "input.a must be integer"),
    ("int-float", obj(n=INT), ["--n=3.0"], "input.n must be integer"),
    (
        "unenforced-keywords",
        obj(
            n={"type": "integer", "minimum": 0},
            s={"type": "string", "pattern": "^a", "minLength": 3},
        ),
        ["--n", "-5", "--s", "b"],
        None,
    ),
    (
        "ref",
        with_defs(obj(c={"$ref": "#/$defs/X"}), X=INT),
        ["--c", "x"],
        "input.c must be integer",
    ),
    (
        "ref-then-siblings",
        with_defs(obj(c={"$ref": "#/$defs/X", "type": "string"}), X=INT),
        ["--c", "5"],
        "input.c must be string",
    ),
    (
        "ref-first",
        with_defs(obj(c={"$ref": "#/$defs/X", "type": "string"}), X=INT),
        ["--c", "x"],
        "input.c must be integer",
    ),
    (
        "ref-unresolved",
        with_defs(obj(c={"$ref": "#/$defs/Y"}), X=INT),
        ["--c", "x"],
        "input.c schema has unresolved $ref '#/$defs/Y'",
    ),
    (
        "ref-anchor-unresolved",
        obj(d={"$ref": "#foo"}),
        ["--d", "1"],
        "input.d schema has unresolved $ref '#foo'",
    ),
    (
        "ref-external-url",
        obj(c={"$ref": "http://e.com/s.json"}),
        ["--c", "x"],
        "input.c schema uses unsupported external $ref 'http://e.com/s.json'",
    ),
    (
        "ref-external-file",
        obj(d={"$ref": "defs.json#/a"}),
        ["--d", "1"],
        "input.d schema uses unsupported external $ref 'defs.json#/a'",
    ),
    (
        "ref-empty",
        obj(d={"$ref": ""}),
        ["--d", "1"],
        "input.d schema uses unsupported external $ref ''",
    ),
    ("ref-non-string", obj(c={"$ref": 5}), ["--c", "x"], "input.c schema has a non-string $ref"),
    (
        "ref-self",
        with_defs(obj(c={"$ref": "#/$defs/A"}), A={"$ref": "#/$defs/A"}),
        ["--c", "x"],
        "input.c schema has cyclic $ref '#/$defs/A'",
    ),
    (
        "ref-cycle-two",
        with_defs(obj(c={"$ref": "#/$defs/A"}), A={"$ref": "#/$defs/B"}, B={"$ref": "#/$defs/A"}),
        ["--c", "x"],
        "input.c schema has cyclic $ref '#/$defs/A'",
    ),
    (
        "ref-recursive-instance",
        with_defs(obj(c={"$ref": "#/$defs/node"}), node=NODE),
        ["--c", '{"v":1,"next":{"v":2}}'],
        "input.c.next schema has cyclic $ref '#/$defs/node'",
    ),
    (
        "ref-recursive-unused",
        with_defs(obj(c={"$ref": "#/$defs/node"}), node=NODE),
        ["--c", '{"v":1}'],
        None,
    ),
    ("ref-root", {"$ref": "#/$defs/Y"}, [], "input schema has unresolved $ref '#/$defs/Y'"),
    ("ref-hash", obj(c=INT, d={"$ref": "#"}), ["--d", "x"], "input.d must be object"),
    (
        "ref-pointer-into-properties",
        obj(c=INT, d={"$ref": "#/properties/c"}),
        ["--d", "x"],
        "input.d must be integer",
    ),
    (
        "ref-escaped",
        with_defs(obj(d={"$ref": "#/$defs/a~1b"}), **{"a/b": INT}),
        ["--d", "x"],
        "input.d must be integer",
    ),
    (
        "ref-definitions",
        {**obj(d={"$ref": "#/definitions/a"}), "definitions": {"a": INT}},
        ["--d", "x"],
        "input.d must be integer",
    ),
    (
        "ref-in-items",
        with_defs(obj(d={"type": "array", "items": {"$ref": "#/$defs/a"}}), a=INT),
        ["--d", "1,x"],
        "input.d[1] must be integer",
    ),
    (
        "ref-twice-siblings",
        with_defs(obj(a={"$ref": "#/$defs/X"}, b={"$ref": "#/$defs/X"}), X=INT),
        ["--a", "1", "--b", "x"],
        "input.b must be integer",
    ),
    (
        "ref-cycle-in-allof",
        with_defs(obj(d={"$ref": "#/$defs/A"}), A={"allOf": [{"$ref": "#/$defs/A"}]}),
        ["--d", "1"],
        "input.d schema has cyclic $ref '#/$defs/A'",
    ),
    (
        "ref-cycle-in-anyof-pass",
        with_defs(obj(d={"$ref": "#/$defs/A"}), A={"anyOf": [INT, {"$ref": "#/$defs/A"}]}),
        ["--d", "1"],
        None,
    ),
    (
        "ref-cycle-in-anyof-fail",
        with_defs(obj(d={"$ref": "#/$defs/A"}), A={"anyOf": [INT, {"$ref": "#/$defs/A"}]}),
        ["--d", "x"],
        "input.d does not match any anyOf branch",
    ),
    ("empty-schema", {}, ["--anything", "1"], None),
]


def expected_output(argv_ok: str | None) -> tuple[str, int]:
    if argv_ok is None:
        return "", 0
    return f"t: schema error: {argv_ok}\n", 2


@pytest.mark.parametrize(
    ("schema", "argv", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_messages(schema: dict[str, Any], argv: list[str], message: str | None) -> None:
    _, stderr, code = run_ours(schema, argv)
    assert (stderr, code) == expected_output(message)


@pytest.mark.parametrize(
    ("schema", "argv", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_messages_match_bashkit_oracle(
    schema: dict[str, Any], argv: list[str], message: str | None
) -> None:
    _, stderr, code = run_oracle(schema, argv)
    assert (stderr, code) == expected_output(message)


def test_closed_schema_names_unknown_property_for_structured_calls() -> None:
    validator = SchemaValidator(
        {"type": "object", "additionalProperties": False, "properties": {"a": INT}}
    )
    assert validator.error({"b": 1, "a": 1}) == "unknown property 'b'"
    assert validator.error({"a": 1}) is None


def test_integer_bounds_are_i64_or_u64() -> None:
    validator = SchemaValidator(obj(n=INT))
    assert validator.error({"n": 2**64 - 1}) is None
    assert validator.error({"n": 2**64}) == "input.n must be integer"
    assert validator.error({"n": -(2**63) - 1}) == "input.n must be integer"
    assert validator.error({"n": True}) == "input.n must be integer"


# --- the fast path agrees with the authority ---------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])
TYPE_NAMES = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from(["", "x", "a"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.one_of(
        st.just({}),
        TYPE_NAMES.map(lambda t: {"type": t}),
        st.lists(TYPE_NAMES, min_size=1, max_size=2).map(lambda ts: {"type": ts}),
        st.lists(SCALARS, min_size=1, max_size=3).map(lambda vs: {"enum": vs}),
    )

    def extend(inner: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        objects = st.builds(
            lambda p, r, closed, typed: {
                **({"type": "object"} if typed else {}),
                "properties": p,
                "required": r,
                **({"additionalProperties": False} if closed else {}),
            },
            st.dictionaries(KEYS, inner, max_size=3),
            st.lists(KEYS, max_size=2),
            st.booleans(),
            st.booleans(),
        )
        arrays = st.builds(
            lambda i, typed: {**({"type": "array"} if typed else {}), "items": i},
            inner,
            st.booleans(),
        )
        return st.one_of(objects, arrays)

    return st.recursive(leaf, extend, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), instance=JSON)
def test_fast_path_agrees_with_authority(schema: dict[str, Any], instance: Any) -> None:
    fast = compile_fast(schema)
    assert fast is not None  # the generated subset never needs the authority
    validator = SchemaValidator(schema)
    assert fast(instance) == (validator.explain(instance) is None)
    assert validator.error(instance) == validator.explain(instance)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schema=_schemas(),
    instance=st.one_of(st.lists(JSON, max_size=3), st.dictionaries(KEYS, JSON, max_size=3)),
)
def test_authority_matches_bashkit_oracle(schema: dict[str, Any], instance: Any) -> None:
    """Random schemas and instances, passed as one JSON flag, through both sides."""
    wrapper = {
        "type": "object",
        "properties": {
            "p": {"type": "array" if isinstance(instance, list) else "object", "allOf": [schema]}
        },
    }
    argv = ["--p", json.dumps(instance)]
    assert run_ours(wrapper, argv) == run_oracle(wrapper, argv)
