"""Tool definitions for OpenAI and Anthropic from one `ScriptedTool`, and running the tool
calls a model sends back."""

from __future__ import annotations

import json

import pytest

from supervisor.commands.demo import example_scripted
from supervisor.commands.tooldefs import (
    anthropic_tools,
    definitions,
    mcp_tools,
    openai_tools,
    tool_call_executor,
)
from supervisor.scripted import DiscoveryMode, ScriptedTool, ScriptingToolSet, prompts

NEEDS_SANDBOX = False


def test_openai_chat_and_responses_shapes() -> None:
    shop = example_scripted()
    (chat,) = openai_tools(shop)
    assert chat["type"] == "function"
    function = chat["function"]
    assert set(function) == {"name", "description", "parameters"}
    assert function["name"] == "shop"
    assert function["parameters"] == prompts.request_schema()
    assert "`get_product --id <integer>`" in function["description"]  # flags for the model
    (flat,) = openai_tools(shop, api="responses")
    assert flat == {"type": "function", "name": "shop", "description": function["description"],
                    "parameters": function["parameters"], "strict": False}  # fmt: skip
    with pytest.raises(ValueError):
        openai_tools(shop, api="legacy")  # type: ignore[arg-type]


def test_anthropic_shape_and_discovery() -> None:
    shop = example_scripted()
    script, discover = anthropic_tools(shop, discovery=True)
    assert set(script) == {"name", "description", "input_schema"}
    assert (script["name"], discover["name"]) == ("shop", "shop_discover")
    assert discover["input_schema"] == prompts.discover_tool_schema()
    # with discovery the script tool's prompt is compact: names and one-liners
    assert "get_product (One product: name, stock and price)" in script["description"]
    assert "--id <integer>" not in script["description"]
    (full,) = anthropic_tools(shop)
    assert "--id <integer>" in full["description"]


def test_a_toolset_and_every_format_are_json() -> None:
    toolset = ScriptingToolSet("ops", mode=DiscoveryMode.WITH_DISCOVERY)
    toolset.add_tool("ping", "Ping a host", lambda params, stdin: "pong\n")
    for fmt in ("openai", "openai-responses", "anthropic", "mcp"):
        text = json.dumps(definitions(toolset, fmt, discovery=True))
        assert "ops_discover" in text
    (entry, _) = mcp_tools(toolset)
    assert set(entry) == {"name", "description", "inputSchema", "outputSchema"}
    with pytest.raises(ValueError, match="unknown format"):
        definitions(toolset, "gemini", discovery=False)


def test_names_model_apis_refuse_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not accepted by model APIs"):
        openai_tools(ScriptedTool("shop.v2"))
    with pytest.raises(TypeError):
        anthropic_tools("shop")  # type: ignore[arg-type]


async def test_the_executor_runs_what_the_model_sent() -> None:
    run = tool_call_executor(example_scripted(), discovery=True)
    result = await run("shop", '{"commands": "get_product --id 2 | jq -r .name"}')
    assert (result.stdout, result.exit_code) == ("rope\n", 0)
    result = await run("shop_discover", {"query": "product"})
    assert "get_product" in result.stdout
    with pytest.raises(KeyError, match="no tool"):
        await run("other", {})
    with pytest.raises(ValueError):
        await run("shop", "[1]")
