"""Tools: definitions, the registry every surface dispatches through, traces, context.

``supervisor.scripted`` (shell commands) and the host integrations reach tools only
through this package. Names are imported lazily: ``jsonschema`` and ``anyio`` load only
when a registry is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "ToolDef": "supervisor.tools.definition",
    "ToolArgs": "supervisor.tools.args",
    "ToolCallback": "supervisor.tools.definition",
    "ToolFailure": "supervisor.tools.definition",
    "ToolCall": "supervisor.tools.definition",
    "ToolCallDecision": "supervisor.tools.definition",
    "ToolCallSurface": "supervisor.tools.definition",
    "ToolOutput": "supervisor.tools.definition",
    "Allow": "supervisor.tools.definition",
    "Deny": "supervisor.tools.definition",
    "ToolRegistry": "supervisor.tools.registry",
    "RegisteredTool": "supervisor.tools.registry",
    "PolicyHook": "supervisor.tools.registry",
    "SchemaValidator": "supervisor.tools.schema",
    "InvocationTrace": "supervisor.tools.trace",
    "InvocationKind": "supervisor.tools.trace",
    "TraceEntry": "supervisor.tools.trace",
    "ExecutionTrace": "supervisor.tools.trace",
    "CallContext": "supervisor.tools.context",
    "CapabilityRevoked": "supervisor.tools.context",
    "RequestScope": "supervisor.tools.context",
    "current_call": "supervisor.tools.context",
}

__all__ = [
    "Allow",
    "CallContext",
    "CapabilityRevoked",
    "Deny",
    "ExecutionTrace",
    "InvocationKind",
    "InvocationTrace",
    "PolicyHook",
    "RegisteredTool",
    "RequestScope",
    "SchemaValidator",
    "ToolArgs",
    "ToolCall",
    "ToolCallDecision",
    "ToolCallSurface",
    "ToolCallback",
    "ToolDef",
    "ToolFailure",
    "ToolOutput",
    "ToolRegistry",
    "TraceEntry",
    "current_call",
]

if TYPE_CHECKING:
    from supervisor.tools.args import ToolArgs
    from supervisor.tools.context import (
        CallContext,
        CapabilityRevoked,
        RequestScope,
        current_call,
    )
    from supervisor.tools.definition import (
        Allow,
        Deny,
        ToolCall,
        ToolCallback,
        ToolCallDecision,
        ToolCallSurface,
        ToolDef,
        ToolFailure,
        ToolOutput,
    )
    from supervisor.tools.registry import PolicyHook, RegisteredTool, ToolRegistry
    from supervisor.tools.schema import SchemaValidator
    from supervisor.tools.trace import ExecutionTrace, InvocationKind, InvocationTrace, TraceEntry


__getattr__ = lazy_exports(__name__, _LAZY)
