"""The text a model and a host read about a tool set (reference-bashkit.md section 3.4).

``system_prompt`` is the design's: markdown with every tool's usage and input schema
(bashkit 0.20.1's binding prints one paragraph of flag usage instead); the compact form
is bashkit's. ``description`` matches bashkit 0.20.1 byte for byte; ``help`` keeps the
structure of bashkit's markdown (``execute.rs build_help``) with the same wording. The
input and output schemas are the ``ToolRequest``/``ToolResponse`` contract.
"""

from __future__ import annotations

import json
from typing import Any

from supervisor.scripted.flags import usage_from_schema
from supervisor.tools.registry import RegisteredTool

LOCALE = "en-US"


def description(tools: list[RegisteredTool]) -> str:
    names = ", ".join(t.definition.name for t in tools)
    return f"Compose tool callbacks through bash scripts: {names}"


def system_prompt(
    name: str, tools: list[RegisteredTool], *, compact: bool, summary: str = ""
) -> str:
    """The text for the model. Full (the default): markdown with each tool's usage and
    input schema, and usage tips. Compact: one paragraph of names and one-liners, the
    schemas left to ``help`` at run time (large tool sets)."""
    if compact:
        items = [f"{t.definition.name} ({t.definition.description})" for t in tools]
        return (
            f"{name}: run bash scripts that orchestrate registered tool commands. "
            f"Commands: {', '.join(items)}. "
            "Pass args as --key value or --key=value. Shell logic and stdin pipelines are "
            "available; filesystem primitives are unavailable. Use help/discover builtins for "
            "runtime details."
        )
    parts = [f"# {name}\n\n"]
    if summary:
        parts.append(f"{summary}\n\n")
    parts.append(_FULL_INTRO)
    for tool in tools:
        d = tool.definition
        usage = usage_from_schema(tool.schema)
        parts.append(f"### {d.name}\n\n{d.description}\n\n")
        parts.append(
            f"Usage: `{d.name}`\n\n" if usage is None else f"Usage: `{d.name} {usage}`\n\n"
        )
        if tool.schema:
            parts.append(f"Input schema:\n\n```json\n{json.dumps(tool.schema)}\n```\n\n")
    if not tools:
        parts.append("(none registered)\n\n")
    parts.append(_FULL_TIPS)
    return "".join(parts)


_FULL_INTRO = """Run a bash script that calls the tool commands below: one script can call many \
tools, pipe their output through `jq`, loop, branch, and print the result you need.

## Tool commands

"""

_FULL_TIPS = """## Usage tips

- Pass arguments as `--key value` or `--key=value` (types follow the input schema; \
arrays as `--tags a,b` or JSON, objects as JSON or `key=value` pairs). A tool's output is \
its stdout, usually JSON: `get_user --id 1 | jq -r .name`.
- Bash works as usual: variables, arrays, functions, `if`/`case`/loops, pipes, `$(...)`, \
here-documents, `set -e`, and the text tools `jq grep sed awk sort uniq cut tr wc head \
tail seq expr cat`.
- There is no filesystem, network or process: file commands, redirections to files \
(other than `/dev/null`) and paths are refused.
- `help <tool>` prints a tool's usage, `help <tool> --json` its schema, `discover \
--search <word>` finds tools.
"""


_PARAMETERS = """## Parameters

| Name | Type | Required | Default | Description |
|------|------|----------|---------|-------------|
| `commands` | string | yes | — | Bash script that may call the registered tool commands |
| `timeout_ms` | integer | no | — | Per-call timeout in milliseconds |

## Tool Commands

| Name | Description | Usage |
|------|-------------|-------|
"""

_TAIL = """
## Result

| Field | Type | Description |
|------|------|-------------|
| `stdout` | string | Combined standard output |
| `stderr` | string | Tool or bash errors |
| `exit_code` | integer | Shell exit code |
| `error` | string | Error category when execution fails |

## Examples

```json
{"commands":"get_user --id 42"}
```

```json
{"commands":"user=$(get_user --id 42)\\necho \\"$user\\" | jq -r '.name'"}
```

## Notes

- Pass arguments as `--key value` or `--key=value`.
- Shell logic, variables, loops, conditionals, pipes, heredocs, here-strings, and stdin-based transforms are available.
- Filesystem primitives are unavailable: file commands, path script execution, file redirection, and process substitution are rejected.
- Use `help <tool> --json` inside the tool for runtime schema inspection.
"""  # noqa: E501 - the markdown lines are bashkit's, unwrapped


def help_markdown(name: str, version: str, tools: list[RegisteredTool]) -> str:
    """The host-facing markdown document of a tool set."""
    rows = []
    for tool in tools:
        d = tool.definition
        usage = usage_from_schema(tool.schema)
        call = f"`{d.name}`" if usage is None else f"`{d.name} {usage}`"
        rows.append(f"| `{d.name}` | {d.description} | {call} |\n")
    head = (
        f"# {name}\n\n{description(tools)}\n\n**Version:** {version}\n"
        f"**Name:** `{name}`\n**Locale:** `{LOCALE}`\n\n"
    )
    return head + _PARAMETERS + "".join(rows) + _TAIL


def request_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["commands"],
        "properties": {
            "commands": {"type": "string", "description": "Bash commands to execute"},
            "timeout_ms": {
                "type": ["integer", "null"],
                "format": "uint64",
                "minimum": 0,
                "description": "Optional per-call timeout in milliseconds",
            },
        },
    }


def response_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["stdout", "stderr", "exit_code"],
        "properties": {
            "stdout": {"type": "string", "description": "Standard output from the script"},
            "stderr": {"type": "string", "description": "Standard error from the script"},
            "exit_code": {
                "type": "integer",
                "format": "int32",
                "description": "Exit code; 0 means success",
            },
            "error": {
                "type": ["string", "null"],
                "description": "Error message if execution failed before running",
            },
            "stdout_truncated": {
                "type": "boolean",
                "default": False,
                "description": "Whether stdout was truncated due to output size limits",
            },
            "stderr_truncated": {
                "type": "boolean",
                "default": False,
                "description": "Whether stderr was truncated due to output size limits",
            },
            "final_env": {
                "type": ["object", "null"],
                "additionalProperties": {"type": "string"},
                "description": "Final environment state when requested",
            },
        },
    }


def pretty_json(value: Any) -> str:
    """serde_json's ``to_string_pretty`` with sorted keys (what the binding returns)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


# --- the discover tool of a ScriptingToolSet ------------------------------------------------


def discover_tool_description(name: str) -> str:
    return f"Discover available {name} commands"


def discover_tool_prompt(tool_name: str) -> str:
    return (
        f"{tool_name}: discover available tool commands. Use `discover --categories`, "
        "`discover --search <keyword>`, `help <tool>`, `help <tool> --json`."
    )


def discover_tool_help(display_name: str) -> str:
    return (
        f"# {display_name}\n\nDiscover available tool commands.\n\n## Commands\n\n"
        "- `discover --categories` — list categories\n"
        "- `discover --category <name>` — list tools in category\n"
        "- `discover --tag <tag>` — filter by tag\n"
        "- `discover --search <keyword>` — search by name/description\n"
        "- `help --list` — list all tools\n"
        "- `help <tool>` — human-readable usage\n"
        "- `help <tool> --json` — machine-readable schema\n\n"
        "All commands support `--json` for structured output.\n"
    )


def discover_tool_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Search query to find tools (matched against names, "
                "descriptions, and categories)",
            },
            "all": {
                "type": "boolean",
                "description": "List all available tools grouped by category. "
                "When true, query is ignored.",
            },
            "commands": {
                "type": "string",
                "description": "Raw bash commands (backward compatible). "
                "Takes precedence over query/all.",
            },
            "timeout_ms": {
                "type": "integer",
                "description": "Optional timeout in milliseconds",
            },
        },
    }
