"""``help``, ``discover``, ``<tool> --help`` and ``<tool> --dry-run`` byte for byte
(reference-bashkit.md sections 1.#10-11, 3.1 and 3.2), checked against the 0.20.1
oracle where the binding can express the case (it has no tags or categories)."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from bashkit_oracle import echo_params, run_oracle, run_ours

from supervisor.scripted.contract import CommandResult
from supervisor.scripted.tool_commands import command_table
from supervisor.tools.definition import ToolDef, ToolFailure
from supervisor.tools.registry import ToolRegistry

GET_USER = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
TOOLS: list[tuple[str, str, dict[str, Any]]] = [
    ("get_user", "Fetch user", GET_USER),
    ("a_very_long_tool_name_here", "Long", {}),
    ("orders.list", "List Orders", {"type": "object", "properties": {"tags": {"type": "array"}}}),
]
LISTING = (
    "get_user             Fetch user\n"
    "a_very_long_tool_name_here Long\n"
    "orders.list          List Orders\n"
)
GET_USER_HELP = "get_user - Fetch user\nUsage: get_user --id <integer>\n"
GET_USER_JSON = """{
  "description": "Fetch user",
  "input_schema": {
    "properties": {
      "id": {
        "type": "integer"
      }
    },
    "required": [
      "id"
    ],
    "type": "object"
  },
  "name": "get_user"
}
"""
HELP_USAGE = "usage: help [--list] [<tool>] [--json]"
DISCOVER_USAGE = (
    "usage: discover --categories | --category <name> | --tag <tag> | --search <keyword> [--json]"
)


def ours(argv: list[str]) -> tuple[str, str, int]:
    registry = ToolRegistry(dotted_names=False)
    for name, description, schema in TOOLS:
        registry.register(ToolDef(name, description, schema), echo_params)
    result = command_table(registry)[argv[0]](argv[1:], None)
    assert isinstance(result, CommandResult)
    return result.stdout, result.stderr, result.exit_code


def oracle(argv: list[str]) -> tuple[str, str, int]:
    from bashkit.scripted import ScriptedTool

    tool = ScriptedTool("oracle")
    for name, description, schema in TOOLS:
        tool.add_tool(name, description, echo_params, schema=schema)
    result = tool.execute_sync(shlex.join(argv))
    return result.stdout, result.stderr, result.exit_code


CASES: list[tuple[list[str], tuple[str, str, int]]] = [
    (["help"], (LISTING, "", 0)),
    (["help", "--list"], (LISTING, "", 0)),
    (["help", "get_user"], (GET_USER_HELP, "", 0)),
    (["help", "a_very_long_tool_name_here"], ("a_very_long_tool_name_here - Long\n", "", 0)),
    (["help", "get_user", "--json"], (GET_USER_JSON, "", 0)),
    (["help", "--json", "get_user", "extra"], (GET_USER_JSON, "", 0)),
    (["help", "--json"], ("", HELP_USAGE, 1)),
    (["help", "--x"], ("", HELP_USAGE, 1)),
    (["help", "nope"], ("", "help: unknown tool: nope", 1)),
    (["help", "--list", "x"], ("", "help: unknown tool: x", 1)),
    (
        ["help", "orders.list"],
        ("orders.list - List Orders\nUsage: orders.list --tags <json|a,b,c>\n", "", 0),
    ),
    (["get_user", "--help"], (GET_USER_HELP, "", 0)),
    (["get_user", "--id", "x", "--help"], (GET_USER_HELP, "", 0)),
    (["get_user", "--help", "--dry-run"], (GET_USER_HELP, "", 0)),
    (["discover"], ("", DISCOVER_USAGE, 1)),
    (["discover", "--categories"], ("", "", 0)),
    (["discover", "--search", "USER"], ("get_user             Fetch user\n", "", 0)),
    (["discover", "--search", "orders"], ("orders.list          List Orders\n", "", 0)),
    (["discover", "--search"], (LISTING, "", 0)),
    (
        ["discover", "--json", "--search", "long"],
        (
            '[\n  {\n    "description": "Long",\n'
            '    "name": "a_very_long_tool_name_here"\n  }\n]\n',
            "",
            0,
        ),
    ),
    (["discover", "--search", "zzz", "--json"], ("[]\n", "", 0)),
    (["discover", "--category"], ("", "", 0)),
    (["discover", "--tag", "x"], ("", "", 0)),
    (["discover", "--foo"], (LISTING, "", 0)),
    (
        ["get_user", "--id", "1", "--dry-run"],
        ('{"dry_run":true,"params":{"id":1},"tool":"get_user","valid":true}\n', "", 0),
    ),
    (
        ["get_user", "--dry-run"],
        ('{"dry_run":true,"params":{},"tool":"get_user","valid":true}\n', "", 0),
    ),
    (
        ["get_user", "--dry-run", "--id", "1", "--dry-run"],
        ('{"dry_run":true,"params":{"id":1},"tool":"get_user","valid":true}\n', "", 0),
    ),
    (
        ["get_user", "--dry-run", "42"],
        (
            "",
            '{"dry_run":true,"error":"expected --flag, got: 42","tool":"get_user","valid":false}\n',
            1,
        ),
    ),
    (
        ["get_user", "--dry-run", "--id", "é"],
        ('{"dry_run":true,"params":{"id":"é"},"tool":"get_user","valid":true}\n', "", 0),
    ),
    (["get_user", "42"], ("", "expected --flag, got: 42", 2)),
    (["get_user"], ("", "get_user: schema error: required property 'id' is missing\n", 2)),
]


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[shlex.join(c[0]) for c in CASES])
def test_builtin_output(argv: list[str], expected: tuple[str, str, int]) -> None:
    assert ours(argv) == expected


@pytest.mark.parametrize(("argv", "expected"), CASES, ids=[shlex.join(c[0]) for c in CASES])
def test_builtin_output_matches_bashkit_oracle(
    argv: list[str], expected: tuple[str, str, int]
) -> None:
    assert oracle(argv) == expected


# --- tags and categories (not exposed by the binding; bashkit's source is the reference) ---


def tagged_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        ToolDef("charge", "Charge a card", {}, ["billing", "write"], "payments"), echo_params
    )
    registry.register(
        ToolDef("refund", "Refund a charge", {}, ["billing"], "payments"), echo_params
    )
    registry.register(ToolDef("whoami", "Current user", {}, [], "users"), echo_params)
    registry.register(ToolDef("ping", "Ping", {}), echo_params)
    return registry


def discover(*args: str) -> tuple[str, str, int]:
    result = command_table(tagged_registry())["discover"](list(args), None)
    assert isinstance(result, CommandResult)
    return result.stdout, result.stderr, result.exit_code


def test_discover_categories_counts_sorted() -> None:
    assert discover("--categories") == ("payments (2 tools)\nusers (1 tool)\n", "", 0)
    assert discover("--json", "--categories") == (
        '[\n  {\n    "category": "payments",\n    "count": 2\n  },\n'
        '  {\n    "category": "users",\n    "count": 1\n  }\n]\n',
        "",
        0,
    )


def test_discover_filters_and_precedence() -> None:
    charge = "charge               Charge a card\n"
    refund = "refund               Refund a charge\n"
    assert discover("--category", "payments") == (charge + refund, "", 0)
    assert discover("--tag", "write") == (charge, "", 0)
    assert discover("--tag", "billing") == (charge + refund, "", 0)
    assert discover("--search", "CHARGE") == (charge + refund, "", 0)
    # category wins over tag and search whatever the order; categories wins over all
    assert discover("--search", "ping", "--category", "users") == (
        "whoami               Current user\n",
        "",
        0,
    )
    assert discover("--tag", "write", "--categories")[0].startswith("payments (2 tools)")
    assert discover("--category", "payment")[0] == ""


def test_discover_json_lists_tags_and_category_only_when_set() -> None:
    out, _, code = discover("--json", "--all")
    assert code == 0
    assert out == (
        "[\n"
        '  {\n    "category": "payments",\n    "description": "Charge a card",\n'
        '    "name": "charge",\n    "tags": [\n      "billing",\n      "write"\n    ]\n  },\n'
        '  {\n    "category": "payments",\n    "description": "Refund a charge",\n'
        '    "name": "refund",\n    "tags": [\n      "billing"\n    ]\n  },\n'
        '  {\n    "category": "users",\n    "description": "Current user",\n'
        '    "name": "whoami"\n  },\n'
        '  {\n    "description": "Ping",\n    "name": "ping"\n  }\n'
        "]\n"
    )


# --- custom dry-run handlers and error channels ----------------------------------------------


def one_tool(
    callback: Any, *, dry_run: Any = None, sanitize: bool = True, schema: Any = None
) -> Any:
    registry = ToolRegistry(sanitize_errors=sanitize)
    registry.register(ToolDef("t", "T", schema or {}), callback, dry_run=dry_run)
    return command_table(registry)["t"]


def run(command: Any, *argv: str, stdin: str | None = None) -> tuple[str, str, int]:
    result = command(list(argv), stdin)
    assert isinstance(result, CommandResult)
    return result.stdout, result.stderr, result.exit_code


def test_custom_dry_run_replaces_default_and_skips_callback_and_schema() -> None:
    calls: list[str] = []

    def callback(params: dict[str, Any], stdin: str | None) -> str:
        calls.append("callback")
        return "ran\n"

    def preview(params: dict[str, Any], stdin: str | None) -> str:
        return f"would call with {sorted(params)} stdin={stdin!r}\n"

    command = one_tool(callback, dry_run=preview, schema=GET_USER)
    assert run(command, "--dry-run", "--x", "1", stdin="in") == (
        "would call with ['x'] stdin='in'\n",
        "",
        0,
    )
    assert calls == []


def test_custom_dry_run_failure_is_sanitised() -> None:
    def preview(params: dict[str, Any], stdin: str | None) -> str:
        raise RuntimeError("secret://dsn")

    command = one_tool(echo_params, dry_run=preview)
    assert run(command, "--dry-run") == ("", "t: callback failed\n", 1)


@pytest.mark.parametrize(
    ("callback", "sanitised", "raw"),
    [
        (lambda p, s: 1 / 0, ("", "t: callback failed\n", 1), ("", "division by zero", 1)),
        (
            lambda p, s: 5,
            ("", "t: callback failed\n", 1),
            ("", "t: callback returned int, expected str\n", 1),
        ),
        (
            lambda p, s: b"x",
            ("", "t: callback failed\n", 1),
            ("", "t: callback returned bytes, expected str\n", 1),
        ),
    ],
    ids=["exception", "int", "bytes"],
)
def test_callback_failures(
    callback: Any, sanitised: tuple[str, str, int], raw: tuple[str, str, int]
) -> None:
    assert run(one_tool(callback)) == sanitised
    assert run(one_tool(callback, sanitize=False)) == raw


def test_tool_failure_is_trusted_and_keeps_its_exit_code() -> None:
    def callback(params: dict[str, Any], stdin: str | None) -> str:
        raise ToolFailure("t: deadline exceeded after 2.0s\n", 124)

    assert run(one_tool(callback)) == ("", "t: deadline exceeded after 2.0s\n", 124)
    with pytest.raises(ValueError):
        ToolFailure("x", 0)
    with pytest.raises(TypeError):
        ToolFailure("x", True)


def test_stdout_passes_verbatim_and_stdin_reaches_the_callback() -> None:
    command = one_tool(lambda p, s: f"[{s!r}]")
    assert run(command) == ("[None]", "", 0)
    assert run(command, stdin="") == ("['']", "", 0)
    assert run(command, stdin="a\nb\n") == ("['a\\nb\\n']", "", 0)


NUMBERS = {
    "type": "object",
    "properties": {"n": {"type": "number"}, "a": {"type": "array"}, "s": {"type": "string"}},
}
FLOAT_CASES = [
    (["--n", "1e16"], '{"n":1e+16}'),
    (["--n", "1e15"], '{"n":1000000000000000.0}'),
    (["--n", "2.5e-5"], '{"n":0.000025}'),
    (["--n", "1e-5"], '{"n":0.00001}'),
    (["--n", "1.234e-6"], '{"n":1.234e-6}'),
    (["--n", "-1.5e-8"], '{"n":-1.5e-8}'),
    (["--n", "123"], '{"n":123.0}'),
    (["--n", "-0"], '{"n":-0.0}'),
    (["--n", "5e-324"], '{"n":5e-324}'),
    (["--a", "[1.0, 2.5e20, 1e-9, 100]"], '{"a":[1.0,2.5e+20,1e-9,100]}'),
    (["--s", 'a\x01\tb\u2028\x7f\\"'], '{"s":"a\\u0001\\tb\u2028\x7f\\\\\\""}'),
]


@pytest.mark.parametrize(("argv", "params"), FLOAT_CASES, ids=[c[1] for c in FLOAT_CASES])
def test_dry_run_json_is_written_as_serde_json_writes_it(argv: list[str], params: str) -> None:
    expected = (f'{{"dry_run":true,"params":{params},"tool":"t","valid":true}}\n', "", 0)
    assert run_ours(NUMBERS, [*argv, "--dry-run"]) == expected
    assert run_oracle(NUMBERS, [*argv, "--dry-run"]) == expected
