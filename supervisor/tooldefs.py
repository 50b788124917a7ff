"""Moved to `supervisor.commands.tooldefs`; this path stays for one release (removed in
0.2)."""

from supervisor.commands.tooldefs import (
    anthropic_tools,
    definitions,
    mcp_tools,
    model_tools,
    openai_tools,
    tool_call_executor,
)

__all__ = [
    "anthropic_tools",
    "definitions",
    "mcp_tools",
    "model_tools",
    "openai_tools",
    "tool_call_executor",
]
