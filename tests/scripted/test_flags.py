"""``parse_flags`` against reference-bashkit.md section 2.2, every example, plus the edge
cases probed on the 0.20.1 oracle. Each row states the expected output explicitly and is
also run through bashkit itself, so a drift on either side shows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bashkit_oracle import run_oracle, run_ours
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.scripted.flags import FlagError, parse_flags, usage_from_schema

INT = {"type": "integer"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
NUM = {"type": "number"}
TAGS = {"type": "array", "items": STR}
SERVER = {
    "type": "object",
    "properties": {"enabled": BOOL, "name": STR, "port": INT, "url": STR},
}
ENDPOINTS = {"type": "array", "items": {"type": "object", "properties": {"name": STR, "url": STR}}}


def props(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def closed(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def ok(params: dict[str, Any]) -> tuple[str, str, int]:
    return json.dumps(params, sort_keys=True, separators=(",", ":")) + "\n", "", 0


def parse_error(message: str) -> tuple[str, str, int]:
    return "", message, 2


def schema_error(message: str) -> tuple[str, str, int]:
    return "", f"t: schema error: {message}\n", 2


REF_LIST = {
    "type": "object",
    "properties": {"items": {"$ref": "#/$defs/L"}},
    "$defs": {"L": {"type": "array", "items": INT}},
}
ONEOF_CONFIG = {
    "type": "object",
    "properties": {"config": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/C"}]}},
    "$defs": {"C": {"type": "object", "properties": {"k": STR}}},
}

CASES: list[tuple[str, dict[str, Any], list[str], tuple[str, str, int]]] = [
    # section 2.2, in its order
    (
        "typed",
        props(id=INT, name=STR, verbose=BOOL),
        ["--id", "42", "--name", "Alice", "--verbose"],
        ok({"id": 42, "name": "Alice", "verbose": True}),
    ),
    ("equals", props(id=INT), ["--id=42"], ok({"id": 42})),
    (
        "no-schema-strings",
        {},
        ["--name", "Alice", "--count", "3"],
        ok({"count": "3", "name": "Alice"}),
    ),
    ("bare-then-value", {}, ["--a", "--b", "x"], ok({"a": True, "b": "x"})),
    ("split-first-equals", {}, ["--a=b=c"], ok({"a": "b=c"})),
    ("positional", props(id=INT), ["42"], parse_error("expected --flag, got: 42")),
    (
        "bool-never-consumes",
        props(verbose=BOOL),
        ["--verbose", "false"],
        parse_error("expected --flag, got: false"),
    ),
    ("bool-eq-false", props(verbose=BOOL), ["--verbose=false"], ok({"verbose": False})),
    ("bool-eq-yes", props(verbose=BOOL), ["--verbose=yes"], ok({"verbose": True})),
    ("bool-eq-0", props(verbose=BOOL), ["--verbose=0"], ok({"verbose": False})),
    ("bool-eq-1", props(verbose=BOOL), ["--verbose=1"], ok({"verbose": True})),
    (
        "bool-eq-other",
        props(verbose=BOOL),
        ["--verbose=maybe"],
        schema_error("input.verbose must be boolean"),
    ),
    ("last-scalar-wins", props(id=INT), ["--id", "1", "--id", "2"], ok({"id": 2})),
    ("array-json", props(tags=TAGS), ["--tags", '["a","b","c"]'], ok({"tags": ["a", "b", "c"]})),
    ("array-commas", props(tags=TAGS), ["--tags", "a,b,c"], ok({"tags": ["a", "b", "c"]})),
    ("array-repeat", props(tags=TAGS), ["--tags", "x", "--tags", "y"], ok({"tags": ["x", "y"]})),
    (
        "array-int-items",
        props(ids={"type": "array", "items": INT}),
        ["--ids", "1,2,3"],
        ok({"ids": [1, 2, 3]}),
    ),
    ("array-single", props(tags=TAGS), ["--tags", "abc"], ok({"tags": ["abc"]})),
    ("array-empty-token", props(tags=TAGS), ["--tags", ""], ok({"tags": [""]})),
    ("array-missing-end", props(tags=TAGS), ["--tags"], parse_error("--tags: missing value")),
    (
        "array-missing-flag",
        props(tags=TAGS),
        ["--tags", "--name", "x"],
        parse_error("--tags: missing value"),
    ),
    (
        "array-bad-json",
        props(tags=TAGS),
        ["--tags", "[1, 2,"],
        schema_error("input.tags must be array"),
    ),
    (
        "array-eq-no-split",
        props(tags=TAGS),
        ["--tags=a,b"],
        schema_error("input.tags must be array"),
    ),
    (
        "object-pairs",
        props(server=SERVER),
        ["--server", "name=foo", "url=https://example.com"],
        ok({"server": {"name": "foo", "url": "https://example.com"}}),
    ),
    (
        "object-pairs-coerced",
        props(server=SERVER),
        ["--server", "enabled=true", "port=8080"],
        ok({"server": {"enabled": True, "port": 8080}}),
    ),
    (
        "object-unknown-key",
        props(server=SERVER),
        ["--server", "bogus=foo"],
        parse_error("--server: unknown key 'bogus'; valid keys: enabled, name, port, url"),
    ),
    (
        "object-json-then-pair",
        props(server=SERVER),
        ["--server", '{"name":"foo"}', "name=bar"],
        parse_error("expected --flag, got: name=bar"),
    ),
    (
        "object-pair-junk",
        props(server=SERVER),
        ["--server", "name=a", "junk"],
        parse_error("--server: expected --flag or key=value, got 'junk'"),
    ),
    (
        "objects-pair-groups",
        props(endpoint=ENDPOINTS),
        ["--endpoint", "name=a", "url=u1", "--endpoint", "name=b", "url=u2"],
        ok({"endpoint": [{"name": "a", "url": "u1"}, {"name": "b", "url": "u2"}]}),
    ),
    (
        "objects-json-and-pairs",
        props(endpoint=ENDPOINTS),
        ["--endpoint", '{"name":"j"}', "--endpoint", "name=p"],
        ok({"endpoint": [{"name": "j"}, {"name": "p"}]}),
    ),
    (
        "objects-bare-token",
        props(endpoint=ENDPOINTS),
        ["--endpoint", "foo"],
        parse_error("--endpoint: expected JSON or key=value pairs, got 'foo'"),
    ),
    ("ref-array", REF_LIST, ["--items", "[1,2,3]"], ok({"items": [1, 2, 3]})),
    ("oneof-ref-pairs", ONEOF_CONFIG, ["--config", "k=v"], ok({"config": {"k": "v"}})),
    ("number-float", props(n=NUM), ["--n", "3.5"], ok({"n": 3.5})),
    ("number-int-text", props(n=NUM), ["--n", "3"], ok({"n": 3.0})),
    ("number-exp", props(n=NUM), ["--n", "1e3"], ok({"n": 1000.0})),
    ("int-plus", props(i=INT), ["--i", "+5"], ok({"i": 5})),
    ("int-space", props(i=INT), ["--i", " 3"], schema_error("input.i must be integer")),
    ("int-decimal", props(i=INT), ["--i", "1.5"], schema_error("input.i must be integer")),
    (
        "closed-typo",
        closed(limit=INT, name=STR),
        ["--limti", "10"],
        parse_error("unknown flag: --limti (expected one of: --limit, --name)"),
    ),
    (
        "items-4097",
        props(tags=TAGS),
        ["--tags", "," * 4096],
        parse_error("--tags: array flag has 4097 items; maximum is 4096"),
    ),
    (
        "bytes-65537",
        props(name=STR),
        ["--name", "x" * 65537],
        parse_error("--name: parsed flag data exceeds 65536 bytes"),
    ),
    ("bytes-65536", props(name=STR), ["--name", "x" * 65536], ok({"name": "x" * 65536})),
    # edges probed on the oracle
    (
        "closed-in-order",
        closed(limit=INT),
        ["--limti", "10", "42"],
        parse_error("unknown flag: --limti (expected one of: --limit)"),
    ),
    (
        "positional-first",
        closed(limit=INT),
        ["42", "--limti", "10"],
        parse_error("expected --flag, got: 42"),
    ),
    (
        "closed-eq-form",
        closed(limit=INT),
        ["--limti=5"],
        parse_error("unknown flag: --limti (expected one of: --limit)"),
    ),
    (
        "closed-no-props",
        closed(),
        ["--x", "1"],
        parse_error("unknown flag: --x (this command takes no flags)"),
    ),
    (
        "items-appended-total",
        props(tags=TAGS),
        ["--tags", "," * 4000, "--tags", "," * 100],
        parse_error("--tags: array flag has 4102 items; maximum is 4096"),
    ),
    ("items-4096", props(tags=TAGS), ["--tags", "," * 4095], ok({"tags": [""] * 4096})),
    (
        "bytes-eq-form",
        props(name=STR),
        ["--name=" + "x" * 65537],
        parse_error("--name: parsed flag data exceeds 65536 bytes"),
    ),
    (
        "bytes-summed",
        props(name=STR),
        ["--name", "x" * 40000, "--o", "y" * 30000],
        parse_error("--o: parsed flag data exceeds 65536 bytes"),
    ),
    (
        "bytes-utf8",
        props(name=STR),
        ["--name", "é" * 32769],
        parse_error("--name: parsed flag data exceeds 65536 bytes"),
    ),
    (
        "objects-bad-json",
        props(endpoint=ENDPOINTS),
        ["--endpoint", "{bad"],
        schema_error("input.endpoint must be array"),
    ),
    (
        "array-json-too-big",
        props(tags=TAGS),
        ["--tags", "[" + "1," * 40000 + "1]"],
        schema_error("input.tags must be array"),
    ),
    (
        "nested-object-pair",
        props(o={"type": "object", "properties": {"a": {"type": "object"}}}),
        ["--o", "a=1"],
        schema_error("input.o.a must be object"),
    ),
    (
        "open-object-pairs",
        props(o={"type": "object"}),
        ["--o", "x=1", "y=2"],
        ok({"o": {"x": "1", "y": "2"}}),
    ),
    (
        "object-bare",
        props(server=SERVER),
        ["--server"],
        schema_error("input.server must be object"),
    ),
    (
        "object-then-flag",
        props(server=SERVER),
        ["--server", "--x", "1"],
        schema_error("input.server must be object"),
    ),
    (
        "object-plain",
        props(server=SERVER),
        ["--server", "plain"],
        schema_error("input.server must be object"),
    ),
    (
        "object-eq-pairs",
        props(o={"type": "object", "properties": {"a": INT}}),
        ["--o=a=1"],
        schema_error("input.o must be object"),
    ),
    (
        "object-eq-json",
        props(o={"type": "object", "properties": {"a": INT}}),
        ['--o={"a":1}'],
        ok({"o": {"a": 1}}),
    ),
    ("object-leading-space", props(o={"type": "object"}), ["--o", ' {"a":1}'], ok({"o": {"a": 1}})),
    ("empty-key", {}, ["--=5"], ok({"": "5"})),
    ("number-nan", props(n=NUM), ["--n", "nan"], schema_error("input.n must be number")),
    ("number-leading-dot", props(n=NUM), ["--n", ".5"], ok({"n": 0.5})),
    ("number-trailing-dot", props(n=NUM), ["--n", "5."], ok({"n": 5.0})),
    ("number-underscore", props(n=NUM), ["--n", "1_0"], schema_error("input.n must be number")),
    ("number-infinity", props(n=NUM), ["--n", "Infinity"], schema_error("input.n must be number")),
    ("number-overflow", props(n=NUM), ["--n", "1e400"], schema_error("input.n must be number")),
    (
        "int-above-i64",
        props(i=INT),
        ["--i", "9223372036854775808"],
        schema_error("input.i must be integer"),
    ),
    ("int-i64-min", props(i=INT), ["--i", "-9223372036854775808"], ok({"i": -9223372036854775808})),
    ("int-hex", props(i=INT), ["--i", "0x10"], schema_error("input.i must be integer")),
    ("int-leading-zeros", props(i=INT), ["--i", "007"], ok({"i": 7})),
    ("bool-flag-then-token", props(b=BOOL), ["--b", "x"], parse_error("expected --flag, got: x")),
    (
        "json-nan-refused",
        props(n={"type": "array"}),
        ["--n", "[NaN]"],
        schema_error("input.n must be array"),
    ),
    (
        "json-inf-refused",
        props(n={"type": "array"}),
        ["--n", "[1e400]"],
        schema_error("input.n must be array"),
    ),
    (
        "json-lone-surrogate",
        props(n={"type": "array"}),
        ["--n", '["\\ud800"]'],
        schema_error("input.n must be array"),
    ),
    (
        "json-too-deep",
        props(n={"type": "array"}),
        ["--n", "[" * 128 + "]" * 128],
        schema_error("input.n must be array"),
    ),
    (
        "json-big-ints",
        props(n={"type": "array", "items": INT}),
        ["--n", "[18446744073709551615, 18446744073709551616]"],
        schema_error("input.n[1] must be integer"),
    ),
    (
        "json-duplicate-key",
        props(n={"type": "object"}),
        ["--n", '{"a":1,"a":2}'],
        ok({"n": {"a": 2}}),
    ),
    (
        "json-keys-sorted",
        props(n={"type": "object"}),
        ["--n", '{"b":1,"a":{"d":1,"c":2}}'],
        ok({"n": {"a": {"c": 2, "d": 1}, "b": 1}}),
    ),
]


@pytest.mark.parametrize(
    ("schema", "argv", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_flags_match_reference(
    schema: dict[str, Any], argv: list[str], expected: tuple[str, str, int]
) -> None:
    assert run_ours(schema, argv) == expected


@pytest.mark.parametrize(
    ("schema", "argv", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_flags_match_bashkit_oracle(
    schema: dict[str, Any], argv: list[str], expected: tuple[str, str, int]
) -> None:
    assert run_oracle(schema, argv) == expected


def test_parse_flags_returns_sorted_keys_and_raises_flag_error() -> None:
    params = parse_flags(["--b", "1", "--a", "2"], {})
    assert list(params) == ["a", "b"]
    with pytest.raises(FlagError, match="expected --flag, got: x"):
        parse_flags(["x"], {})


def test_ref_depth_is_bounded() -> None:
    """A ref chain longer than 16 hops resolves to no type, so the value stays a string
    instead of recursing without bound."""
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(40)}
    defs["d40"] = INT
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}
    assert parse_flags(["--x", "5"], schema) == {"x": "5"}
    cyclic = {"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}}
    assert parse_flags(["--x", "5"], cyclic) == {"x": "5"}


# --- usage hints (section 2.3) ----------------------------------------------------------


def test_usage_hints() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": STR,
            "i": INT,
            "n": NUM,
            "b": BOOL,
            "o": SERVER,
            "eps": ENDPOINTS,
            "tags": TAGS,
            "null": {"type": "null"},
            "any": {},
            "ref": {"$ref": "#/$defs/L"},
            "maybe": {"type": ["array", "null"], "items": {"type": "object"}},
        },
        "$defs": {"L": {"type": "array", "items": {"type": "object"}}},
    }
    assert usage_from_schema(schema) == (
        "--any <value> --b <boolean> --eps <json|key=value...> --i <integer> "
        "--maybe <json|key=value...> --n <number> --null <null> --o <json|key=value...> "
        "--ref <json|a,b,c> --s <string> --tags <json|a,b,c>"
    )
    assert usage_from_schema({}) is None
    assert usage_from_schema({"type": "object", "properties": {}}) is None


# --- random argv, both sides ------------------------------------------------------------

RANDOM_SCHEMA = props(
    id=INT,
    name=STR,
    tags=TAGS,
    server=SERVER,
    flag=BOOL,
    n=NUM,
    endpoint=ENDPOINTS,
)
TOKENS = st.sampled_from(
    [
        "--id", "--name", "--tags", "--server", "--flag", "--n", "--endpoint", "--other",
        "--id=3", "--tags=a,b", "--flag=no", "--n=1e2", "x", "1", "-2", "1.5", "a,b", "",
        "name=foo", "port=80", "url=u", "bogus=1", "enabled=yes", "[1,2]", '["a"]',
        '{"name":"j"}', "{bad", "true", "é", "--",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(TOKENS, max_size=6))
def test_random_argv_matches_bashkit_oracle(argv: list[str]) -> None:
    assert run_ours(RANDOM_SCHEMA, argv) == run_oracle(RANDOM_SCHEMA, argv)


def test_hostile_flags_are_bounded_per_call_and_never_reach_python_limits() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "o": {"type": "object"}}}
    # integers of any length: in range or the string, as Rust's i64 parse (no digit limit)
    assert parse_flags(["--id", "9" * 5000], schema) == {"id": "9" * 5000}
    assert parse_flags(["--id", "0" * 5000 + "42"], schema) == {"id": 42}
    assert parse_flags(["--o", '{"a": ' + "9" * 30 + "}"], schema) == {"o": {"a": 1e30}}
    assert (
        parse_flags(["--o", '{"a": ' + "9" * 5000 + "}"], schema)["o"]
        == '{"a": ' + "9" * 5000 + "}"
    )
    # many flags without values: the names have their budget too
    with pytest.raises(FlagError, match="parsed flag data exceeds 65536 bytes"):
        parse_flags([f"--k{i}" for i in range(20_000)], {"type": "object"})
