"""Scripted tool orchestration: a logic-only bash interpreter with tools as builtins.

Its rooms: ``syntax`` (the script text to a tree), ``shell`` (the tree run: interpreter,
expansion, arithmetic, conditions, builtins), ``text_tools`` (jq, grep, sed, awk ...); the
modules at this level are the API (`ScriptedTool`, `ScriptingToolSet`) and tools as
commands. Tools are reached only through ``supervisor.tools``.

Public names are imported lazily, so ``import supervisor.scripted`` stays cheap and
pulls in the interpreter, ``jsonschema`` and ``jq`` only when they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

_LAZY: dict[str, str] = {
    "ScriptedTool": "supervisor.scripted.scripted_tool",
    "BuiltinContext": "supervisor.scripted.custom_builtins",
    "BuiltinResult": "supervisor.scripted.custom_builtins",
    "ToolArgs": "supervisor.tools.args",
    "ScriptingToolSet": "supervisor.scripted.toolset",
    "DiscoveryMode": "supervisor.scripted.toolset",
    "ScriptTool": "supervisor.scripted.toolset",
    "DiscoverTool": "supervisor.scripted.toolset",
    "ExecResult": "supervisor.scripted.contract",
    "ExecutionLimits": "supervisor.scripted.contract",
    "ToolDef": "supervisor.tools.definition",
    "ToolFailure": "supervisor.tools.definition",
    "ToolRegistry": "supervisor.tools.registry",
    "ExecutionTrace": "supervisor.tools.trace",
    "TraceEntry": "supervisor.tools.trace",
    "parse_flags": "supervisor.scripted.flags",
    "usage_from_schema": "supervisor.scripted.flags",
    "FlagError": "supervisor.scripted.flags",
}

__all__ = [
    "BuiltinContext",
    "BuiltinResult",
    "DiscoverTool",
    "DiscoveryMode",
    "ExecResult",
    "ExecutionLimits",
    "ExecutionTrace",
    "FlagError",
    "ScriptTool",
    "ScriptedTool",
    "ScriptingToolSet",
    "ToolArgs",
    "ToolDef",
    "ToolFailure",
    "ToolRegistry",
    "TraceEntry",
    "parse_flags",
    "usage_from_schema",
]

if TYPE_CHECKING:
    from supervisor.scripted.contract import ExecResult, ExecutionLimits
    from supervisor.scripted.custom_builtins import BuiltinContext, BuiltinResult
    from supervisor.scripted.flags import FlagError, parse_flags, usage_from_schema
    from supervisor.scripted.scripted_tool import ScriptedTool
    from supervisor.scripted.toolset import (
        DiscoverTool,
        DiscoveryMode,
        ScriptingToolSet,
        ScriptTool,
    )
    from supervisor.tools.args import ToolArgs
    from supervisor.tools.definition import ToolDef, ToolFailure
    from supervisor.tools.registry import ToolRegistry
    from supervisor.tools.trace import ExecutionTrace, TraceEntry


__getattr__ = lazy_exports(__name__, _LAZY)
