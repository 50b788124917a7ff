"""Sandboxed tools as commands of a `ScriptedTool` (for `serve`, `mcp`, `script`, the demo).

Each tool a supervisor serves becomes a command of the same name: a text tool reads its
input on stdin (``echo hi | text.upper``), a json tool takes its parameters as flags (and
piped stdin as ``"stdin"``). Outcomes other than ``completed`` map to exit statuses (1,
124 timed out, 125 indeterminate, 130 cancelled; see `supervisor.workers.tool_callbacks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the commands at start-up: keep it light
    from supervisor.ledger import ToolPolicy
    from supervisor.scripted import ScriptedTool
    from supervisor.workers.tool_callbacks import ExternalCallback


def describe_tool(policy: ToolPolicy) -> str:
    """The one-line description a script (and a model) sees for a sandboxed tool."""
    how = "input on stdin" if policy.format == "text" else "JSON parameters as flags"
    limit = f", deadline {policy.deadline:g} s" if policy.deadline is not None else ""
    return f"sandboxed tool ({policy.format}: {how}{limit})"


def add_sandboxed_tools(
    scripted: ScriptedTool,
    tools: Mapping[str, ToolPolicy],
    callback_for: Callable[[str], ExternalCallback],
    *,
    category: str = "sandboxed",
) -> list[str]:
    """Add every tool in ``tools`` that ``scripted`` does not already have; returns the
    names added. ``callback_for(name)`` makes the callback (e.g. ``sup.tool_callback``)."""
    present = {tool.definition.name for tool in scripted.registry}
    added = []
    for name in sorted(tools):
        if name in present:
            continue
        policy = tools[name]
        schema = {"type": "object"} if policy.format == "json" else {}
        scripted.add_tool(
            name,
            describe_tool(policy),
            callback_for(name),
            schema=schema,
            tags=["sandboxed", policy.format],
            category=category,
        )
        added.append(name)
    return added
