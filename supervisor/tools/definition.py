"""What a tool is: its definition, its callback, and the values a call produces.

These are plain values shared by every surface (shell commands of a script, structured
calls from a host, MCP later), so they know nothing of how a tool is reached.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: A tool callback: ``(params, stdin) -> stdout``, sync or async. ``params`` is the JSON
#: object of the call (flags parsed and coerced by the tool's schema); ``stdin`` is the
#: piped input, None when nothing is piped in.
ToolCallback = Callable[[dict[str, Any], "str | None"], "str | Awaitable[str]"]

_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", re.ASCII)
#: Characters a shell word cannot carry unquoted, plus ``/`` (path execution) and ``=``
#: (an assignment): a tool whose name holds one could never be called from a script.
_UNCALLABLE = frozenset(" \t\n\r|&;<>()$`\"'\\*?[]#~{}=/!")
#: The builtins every tool set provides; a tool of the same name could never be called.
RESERVED_NAMES = frozenset({"help", "discover"})
#: Words the shell parses before it looks a command up: reserved words, and the
#: declaration builtins (``local x=$(...)`` is parsed as a declaration). A tool of one of
#: these names could never run from a script.
SHELL_WORDS = frozenset(
    {
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while",
        "until", "do", "done", "in", "function", "time", "coproc", "{", "}", "!", "[[", "]]",
        "local", "export", "declare", "readonly", "typeset",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ToolDef:
    """An OpenAPI-style tool definition: metadata only, no behaviour.

    ``input_schema`` is a JSON Schema for the call's parameters (``{}``: none); ``tags``
    and ``category`` only feed ``discover``. Builder methods return a new definition.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    tags: Sequence[str] = ()
    category: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not isinstance(self.description, str):
            raise TypeError("ToolDef name and description must be str")
        if not isinstance(self.input_schema, Mapping):
            raise TypeError(f"{self.name}: input_schema must be a JSON object (a dict)")
        tags = self.tags
        if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
            raise TypeError(f"{self.name}: tags must be a list of str")
        object.__setattr__(self, "tags", tuple(tags))
        if self.category is not None and not isinstance(self.category, str):
            raise TypeError(f"{self.name}: category must be str or None")

    def with_schema(self, schema: Mapping[str, Any]) -> ToolDef:
        return replace(self, input_schema=schema)

    def with_tags(self, tags: Sequence[str]) -> ToolDef:
        return replace(self, tags=tuple(tags))

    def with_category(self, category: str) -> ToolDef:
        return replace(self, category=category)

    def to_dict(self) -> dict[str, Any]:
        """The shape ``discover`` and registry discovery return (keys as bashkit's)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.tags:
            out["tags"] = list(self.tags)
        if self.category is not None:
            out["category"] = self.category
        return out


def check_command_name(name: str) -> None:
    """Refuse a name no script could call (``ScriptedTool`` accepts dashes, unlike the
    registry's dotted identifiers, as bashkit does)."""
    if not name or any(ch in _UNCALLABLE for ch in name):
        raise ValueError(f"tool name {name!r} cannot be called as a shell command")
    check_reserved(name)


def check_reserved(name: str) -> None:
    if name in RESERVED_NAMES:
        raise ValueError(f"tool name {name!r} is reserved for the builtin of that name")
    if name in SHELL_WORDS:
        raise ValueError(
            f"tool name {name!r} is a shell keyword or declaration builtin: a script's"
            f" `{name}` is parsed before any command is looked up, so the tool could never run"
        )


def check_dotted_name(name: str) -> None:
    """Registry names: dot-separated identifiers, so each surface can namespace them."""
    if not _DOTTED_NAME.fullmatch(name):
        raise ValueError(
            f"tool name {name!r} must be dot-separated identifiers ([A-Za-z_][A-Za-z0-9_]*)"
        )
    check_reserved(name)


def copy_schema(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A private JSON copy of a schema: later changes by the host cannot desynchronise
    the compiled validator, and a schema that is not JSON fails at registration."""
    try:
        copied = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: input_schema is not JSON: {exc}") from None
    if not isinstance(copied, dict):
        raise TypeError(f"{name}: input_schema must be a JSON object")
    return copied


class ToolFailure(Exception):
    """A failure a trusted callback reports with its own message and exit status.

    Raised from a callback (sync or async), it bypasses error sanitisation: ``message``
    becomes the command's stderr verbatim (end it with a newline) and ``exit_code`` its
    status. The supervisor uses it so that an external tool's deadline, cancellation and
    failure reach the script as distinct, documented exit codes.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        if not isinstance(message, str):
            raise TypeError("ToolFailure message must be str")
        if isinstance(exit_code, bool) or not isinstance(exit_code, int):
            raise TypeError("ToolFailure exit_code must be int")
        if not 1 <= exit_code <= 255:
            raise ValueError(f"ToolFailure exit_code must be in 1..255, got {exit_code}")
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ToolCallSurface(enum.StrEnum):
    """Where a call came from: the policy hook and the callback can tell them apart."""

    SHELL = "shell"
    PYTHON = "python"
    MCP = "mcp"


class ToolCallDecision(enum.Enum):
    """What the policy hook answers."""

    ALLOW = "allow"
    DENY = "deny"


Allow = ToolCallDecision.ALLOW
Deny = ToolCallDecision.DENY


@dataclass(frozen=True, slots=True)
class ToolCall:
    """What the policy hook sees: one call, after schema validation."""

    name: str
    params: Mapping[str, Any]
    tenant_id: str | None
    surface: ToolCallSurface


@dataclass(slots=True)
class ToolOutput:
    """The outcome of one call, in the shell's terms (stdout, stderr, exit status)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def value(self) -> Any:
        """The output as structured data when it is JSON, else the text (as bashkit's
        runtime surfaces return it)."""
        try:
            return json.loads(self.stdout)
        except ValueError:
            return self.stdout
