"""Tool definitions for model APIs, from one `ScriptedTool`, and ``sandvisor tools``.

A model gets one tool (the script tool: a bash script over every command of the
`ScriptedTool`, sandboxed ones included) or two (plus ``<name>_discover``, which reads
schemas at run time; ``discovery=True``). Each definition's description is the tool's
system prompt, which names every command and its flags (compact, names and one-liners,
with discovery): that is the text the model reads before writing a script.

```python
from supervisor.commands.tooldefs import anthropic_tools, openai_tools
client.chat.completions.create(..., tools=openai_tools(shop))
client.messages.create(..., tools=anthropic_tools(shop, discovery=True))
```

Run what the model sends with `tool_call_executor` (or ``shop.execute_request``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from supervisor.scripted import ScriptedTool, ScriptingToolSet
from supervisor.scripted.contract import ExecResult
from supervisor.scripted.toolset import DiscoverTool, ScriptTool

Api = Literal["chat", "responses"]
#: What OpenAI and Anthropic accept as a function/tool name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
FORMATS = ("openai", "openai-responses", "anthropic", "mcp")


def model_tools(
    scripted: ScriptedTool | ScriptingToolSet, *, discovery: bool = False
) -> list[ScriptTool]:
    """The tool objects a model is given: the script tool, and the discover tool too
    with ``discovery`` (which also makes the script tool's prompt compact)."""
    inner = scripted.scripted_tool if isinstance(scripted, ScriptingToolSet) else scripted
    if not isinstance(inner, ScriptedTool):
        raise TypeError("tool definitions are made from a ScriptedTool or ScriptingToolSet")
    inner.compact_prompt = discovery
    tools = [ScriptTool(inner)]
    if discovery:
        tools.append(DiscoverTool(inner))
    for tool in tools:
        if not _NAME.match(tool.name):
            raise ValueError(
                f"tool name {tool.name!r} is not accepted by model APIs "
                "(letters, digits, _ and -, at most 64); rename the ScriptedTool"
            )
    return tools


def _parts(tool: ScriptTool) -> tuple[str, str, dict[str, Any]]:
    return tool.name, tool.system_prompt(), tool.input_schema


def openai_tools(
    scripted: ScriptedTool | ScriptingToolSet, *, discovery: bool = False, api: Api = "chat"
) -> list[dict[str, Any]]:
    """``tools=`` for OpenAI: Chat Completions (``{"type": "function", "function":
    {...}}``) or, with ``api="responses"``, the Responses API's flat form."""
    out: list[dict[str, Any]] = []
    for tool in model_tools(scripted, discovery=discovery):
        name, description, schema = _parts(tool)
        if api == "chat":
            out.append({
                "type": "function",
                "function": {"name": name, "description": description, "parameters": schema},
            })  # fmt: skip
        elif api == "responses":
            out.append({"type": "function", "name": name, "description": description,
                        "parameters": schema, "strict": False})  # fmt: skip
        else:
            raise ValueError(f"api is 'chat' or 'responses', not {api!r}")
    return out


def anthropic_tools(
    scripted: ScriptedTool | ScriptingToolSet, *, discovery: bool = False
) -> list[dict[str, Any]]:
    """``tools=`` for Anthropic's Messages API: ``{"name", "description", "input_schema"}``."""
    return [
        {"name": name, "description": description, "input_schema": schema}
        for name, description, schema in map(_parts, model_tools(scripted, discovery=discovery))
    ]


def mcp_tools(
    scripted: ScriptedTool | ScriptingToolSet, *, discovery: bool = True
) -> list[dict[str, Any]]:
    """The script tools as MCP ``tools/list`` entries (what `sandvisor mcp` serves)."""
    return [
        {
            "name": tool.name,
            "description": tool.system_prompt(),
            "inputSchema": tool.input_schema,
            "outputSchema": tool.output_schema,
        }
        for tool in model_tools(scripted, discovery=discovery)
    ]


def tool_call_executor(
    scripted: ScriptedTool | ScriptingToolSet, *, discovery: bool = False
) -> Callable[[str, Mapping[str, Any] | str], Awaitable[ExecResult]]:
    """``await run(name, arguments)`` for a tool call a model made (``arguments`` as the
    JSON object or its text); an unknown name raises `KeyError`."""
    by_name = {tool.name: tool for tool in model_tools(scripted, discovery=discovery)}

    async def run(name: str, arguments: Mapping[str, Any] | str) -> ExecResult:
        tool = by_name.get(name)
        if tool is None:
            raise KeyError(f"no tool {name!r}; the tools are {sorted(by_name)}")
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
            if not isinstance(arguments, dict):
                raise ValueError("tool arguments must be a JSON object")
        return await tool.execute(arguments)

    return run


def definitions(
    scripted: ScriptedTool | ScriptingToolSet, fmt: str, *, discovery: bool
) -> list[dict[str, Any]]:
    """The definitions in one of `FORMATS`."""
    if fmt == "openai":
        return openai_tools(scripted, discovery=discovery)
    if fmt == "openai-responses":
        return openai_tools(scripted, discovery=discovery, api="responses")
    if fmt == "anthropic":
        return anthropic_tools(scripted, discovery=discovery)
    if fmt == "mcp":
        return mcp_tools(scripted, discovery=discovery)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


# -- sandvisor tools ----------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    from supervisor.commands.common import add_scripted_options, add_supervisor_options

    parser.description = (
        "Print the JSON tool definitions a model API expects for a ScriptedTool (with "
        "--adapters, its sandboxed tools are commands of the script tool)."
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="openai",
        help="which API's shape (default openai: Chat Completions)",
    )
    parser.add_argument(
        "--discovery",
        action="store_true",
        help="two tools: a compact script tool and <name>_discover",
    )
    add_scripted_options(parser)
    add_supervisor_options(parser, adapters_required=False)
    parser.epilog = "Exit status: 0 printed, 1 failed, 2 bad usage, 125 cannot sandbox."


def run(args: argparse.Namespace) -> int:
    from supervisor.commands.script import scripted_for_cli, with_sandboxed_tools

    try:
        scripted = scripted_for_cli(args)
    except ValueError as exc:
        from supervisor.commands.common import EXIT_USAGE, fail

        return fail("tools", str(exc), EXIT_USAGE)

    def emit(tool: ScriptedTool) -> None:
        json.dump(definitions(tool, args.format, discovery=args.discovery), sys.stdout,
                  indent=2, ensure_ascii=False)  # fmt: skip
        sys.stdout.write("\n")

    return with_sandboxed_tools("tools", scripted, args, emit, workers=0)
