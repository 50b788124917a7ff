"""The bashkit 0.20.1 oracle of the tool-command tests (tests/tools, tests/scripted): an
echo callback, and bashkit driven the same way (a ``ScriptedTool`` whose tool echoes its
params)."""

from __future__ import annotations

import json
import shlex
from typing import Any

from supervisor.scripted.contract import CommandResult
from supervisor.scripted.tool_commands import command_table
from supervisor.tools.definition import ToolDef
from supervisor.tools.registry import ToolRegistry


def echo_params(params: dict[str, Any], stdin: str | None) -> str:
    """What both sides' tool prints: its params as compact sorted JSON."""
    return json.dumps(params, sort_keys=True, separators=(",", ":")) + "\n"


def run_ours(schema: dict[str, Any], argv: list[str], name: str = "t") -> tuple[str, str, int]:
    """``name argv...`` through our command (no interpreter needed)."""
    registry = ToolRegistry(dotted_names=False)
    registry.register(ToolDef(name, "desc", schema), echo_params)
    result = command_table(registry)[name](list(argv), None)
    assert isinstance(result, CommandResult)
    return result.stdout, result.stderr, result.exit_code


def run_oracle(schema: dict[str, Any], argv: list[str], name: str = "t") -> tuple[str, str, int]:
    """The same command through bashkit 0.20.1."""
    from bashkit.scripted import ScriptedTool

    tool = ScriptedTool("oracle")
    tool.add_tool(name, "desc", echo_params, schema=schema)
    result = tool.execute_sync(shlex.join([name, *argv]))
    return result.stdout, result.stderr, result.exit_code
