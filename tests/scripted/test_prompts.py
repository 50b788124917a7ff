"""The text a model and a host read (reference-bashkit.md section 3.4), byte for byte
against the 0.20.1 oracle, and the toolset's discovery rules (section 1.#23)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from supervisor.scripted import DiscoveryMode, ScriptedTool, ScriptingToolSet, ToolDef
from supervisor.scripted.toolset import DiscoverRequestError, discover_commands

TOOLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("get_user", "Fetch user", {"type": "object", "properties": {"id": {"type": "integer"}}}),
    ("ping", "Ping", None),
    (
        "configure",
        "Configure | things",
        {
            "type": "object",
            "properties": {
                "server": {"type": "object"},
                "endpoints": {"type": "array", "items": {"type": "object"}},
                "tags": {"type": "array"},
                "mode": {"type": "null"},
                "weird": {"enum": [1]},
                "ratio": {"type": "number"},
                "dry": {"type": "boolean"},
            },
        },
    ),
]


def noop(params: dict[str, Any], stdin: str | None) -> str:
    return ""


def both(short: str | None = None) -> tuple[ScriptedTool, Any]:
    from bashkit.scripted import ScriptedTool as Oracle

    ours, oracle = ScriptedTool("shop", short), Oracle("shop", short)
    for name, description, schema in TOOLS:
        ours.add_tool(name, description, noop, schema=schema)
        oracle.add_tool(name, description, noop, schema=schema)
    return ours, oracle


def test_system_prompt_is_markdown_with_usage_and_schemas() -> None:
    ours, _ = both("Shop API")
    prompt = ours.system_prompt()
    assert prompt.startswith("# shop\n\nShop API\n\nRun a bash script that calls the tool")
    assert "### get_user\n\nFetch user\n\nUsage: `get_user --id <integer>`\n\n" in prompt
    assert (
        'Input schema:\n\n```json\n{"type": "object", "properties": {"id": {"type": '
        '"integer"}}}\n```\n\n'
    ) in prompt
    assert "### ping\n\nPing\n\nUsage: `ping`\n\n### configure" in prompt  # no schema
    assert '"weird": {"enum": [1]}' in prompt  # enums and required fields reach the model
    assert "--tags <json|a,b,c>" in prompt
    assert prompt.endswith("its schema, `discover --search <word>` finds tools.\n")
    assert "(none registered)" in ScriptedTool("e").system_prompt()
    assert not both()[0].system_prompt().startswith("# shop\n\nScriptedTool")


def test_description_and_names_match_oracle() -> None:
    ours, oracle = both()
    assert ours.description() == oracle.description()
    assert (
        ours.description()
        == "Compose tool callbacks through bash scripts: get_user, ping, configure"
    )
    assert ours.short_description == oracle.short_description == "ScriptedTool: shop"
    assert both("Shop API")[0].short_description == "Shop API"
    assert ours.name == "shop" and ours.tool_count() == 3


def test_schemas_match_oracle() -> None:
    ours, oracle = both()
    assert ours.input_schema() == oracle.input_schema()
    assert ours.output_schema() == oracle.output_schema()


def test_help_markdown_matches_oracle_except_version() -> None:
    ours, oracle = both()
    assert (
        ours.help().replace(f"**Version:** {ours.version}", "**Version:** 0.20.1") == oracle.help()
    )
    assert "| `get_user` | Fetch user | `get_user --id <integer>` |" in ours.help()


def test_compact_prompt_lists_descriptions() -> None:
    tool = ScriptedTool("shop", compact_prompt=True)
    tool.add_tool(ToolDef("get_user", "Fetch user", {"type": "object"}), noop)
    tool.add_tool("ping", "Ping", noop)
    assert tool.system_prompt() == (
        "shop: run bash scripts that orchestrate registered tool commands. Commands: "
        "get_user (Fetch user), ping (Ping). Pass args as --key value or --key=value. "
        "Shell logic and stdin pipelines are available; filesystem primitives are "
        "unavailable. Use help/discover builtins for runtime details."
    )


def test_toolset_modes() -> None:
    exclusive = ScriptingToolSet("api")
    exclusive.add_tool(
        "greet",
        "Greet someone",
        noop,
        {"type": "object", "properties": {"name": {"type": "string"}}},
    )
    (tool,) = exclusive.tools()
    assert exclusive.discovery_mode is DiscoveryMode.EXCLUSIVE
    assert tool.name == "api" and "`greet --name <string>`" in tool.system_prompt()
    assert tool.short_description == "ScriptingToolSet: api"
    assert tool.input_schema["required"] == ["commands"]
    assert tool.definition()["function"]["name"] == "api"

    discovery = ScriptingToolSet("api", mode=DiscoveryMode.WITH_DISCOVERY)
    discovery.add_tool(ToolDef("greet", "Greet someone").with_category("social"), noop)
    script, disc = discovery.tools()
    assert (script.name, disc.name) == ("api", "api_discover")
    assert "greet (Greet someone)" in script.system_prompt()
    assert disc.description == "Discover available api commands"
    assert disc.system_prompt().startswith("api_discover: discover available tool commands.")
    assert disc.help().startswith("# api Discover\n")
    assert set(disc.input_schema["properties"]) == {"query", "all", "commands", "timeout_ms"}
    assert ScriptingToolSet("x").with_discovery().discovery_mode is DiscoveryMode.WITH_DISCOVERY


@pytest.mark.parametrize(
    ("arguments", "script"),
    [
        ({"commands": "help --list", "all": True}, "help --list"),
        ({"all": True, "query": "x"}, "discover --categories"),
        ({"query": "user"}, "discover --search user"),
        ({"commands": "discover --tag read"}, "discover --tag read"),
    ],
)
def test_discover_requests(arguments: dict[str, Any], script: str) -> None:
    assert discover_commands(arguments)[0] == script


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "one of `commands`, `all`, or `query` is required"),
        ({"all": False}, "one of `commands`, `all`, or `query` is required"),
        ({"query": "x; rm"}, "query contains unsupported shell control characters"),
        ({"query": "$(x)"}, "query contains unsupported shell control characters"),
        (
            {"commands": "help | jq"},
            "discover tool commands cannot contain shell control characters",
        ),
        (
            {"commands": "help\nget_user"},
            "discover tool commands cannot contain shell control characters",
        ),
        ({"commands": "get_user --id 1"}, "discover tool only supports: discover, help"),
        ({"commands": "  "}, "discover tool only supports: discover, help"),
    ],
)
def test_discover_requests_refused(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(DiscoverRequestError, match="^" + re.escape(message) + "$"):
        discover_commands(arguments)
    toolset = ScriptingToolSet("api", mode=DiscoveryMode.WITH_DISCOVERY)
    result = toolset.tools()[1].execute_sync(arguments)
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (
        "",
        message,
        1,
        message,
    )


def test_limits_from_binding_keywords() -> None:
    tool = ScriptedTool("x", max_commands=5, max_loop_iterations=7, timeout_seconds=1.5)
    assert (
        tool.limits.max_commands,
        tool.limits.max_loop_iterations,
        tool.limits.timeout_seconds,
    ) == (5, 7, 1.5)
    for bad in (
        {"max_commands": 0},
        {"max_loop_iterations": -1},
        {"timeout_seconds": 0},
        {"max_commands": True},
    ):
        with pytest.raises(ValueError):
            ScriptedTool("x", **bad)
