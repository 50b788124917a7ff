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
    from typing import Any

    from supervisor.ledger import ToolPolicy
    from supervisor.scripted import ScriptedTool
    from supervisor.workers.tool_callbacks import ExternalCallback
    from worker_runtime.protocol.messages import ToolSpec


def describe_tool(policy: ToolPolicy, spec: ToolSpec | None = None) -> str:
    """The description a script (and a model) sees for a sandboxed tool: the worker's
    own, then how it takes its input."""
    how = "input on stdin" if policy.format == "text" else "JSON parameters as flags"
    limit = f", deadline {policy.deadline:g} s" if policy.deadline is not None else ""
    own = spec.description.strip() if spec is not None else ""
    kind = f"sandboxed tool ({policy.format}: {how}{limit})"
    return f"{own} [{kind}]" if own else kind


def input_schema(policy: ToolPolicy, spec: ToolSpec | None = None) -> dict[str, Any]:
    """The schema a sandboxed tool's flags are parsed and checked by: the worker's own
    for a json tool that has one, else any object (json) or none (text)."""
    if policy.format != "json":
        return {}
    if spec is not None and spec.schema:
        return dict(spec.schema)
    return {"type": "object"}


def add_sandboxed_tools(
    scripted: ScriptedTool,
    tools: Mapping[str, ToolPolicy],
    callback_for: Callable[[str], ExternalCallback],
    *,
    category: str = "sandboxed",
    specs: Mapping[str, ToolSpec] | None = None,
) -> list[str]:
    """Add every tool in ``tools`` that ``scripted`` does not already have; returns the
    names added. ``callback_for(name)`` makes the callback (e.g. ``sup.tool_callback``);
    ``specs`` (``sup.specs``) gives each tool its worker's description and schema."""
    present = {tool.definition.name for tool in scripted.registry}
    added = []
    for name in sorted(tools):
        if name in present:
            continue
        policy = tools[name]
        spec = None if specs is None else specs.get(name)
        scripted.add_tool(
            name,
            describe_tool(policy, spec),
            callback_for(name),
            schema=input_schema(policy, spec),
            tags=["sandboxed", policy.format],
            category=category,
        )
        added.append(name)
    return added
