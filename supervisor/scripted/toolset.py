"""``ScriptingToolSet``: how a tool set is offered to a model, one tool or two.

``DiscoveryMode.EXCLUSIVE`` (the default) offers one script tool whose prompt carries
every tool's flags. ``DiscoveryMode.WITH_DISCOVERY`` offers a script tool with a compact
prompt (names and one-liners) plus ``<name>_discover``, which runs only ``discover`` and
``help`` so the model can read schemas before writing a script. Both share one
``ScriptedTool``, so callbacks, policy and traces are the same.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from supervisor.scripted import prompts
from supervisor.scripted.contract import ExecResult, ExecutionLimits
from supervisor.scripted.scripted_tool import ScriptedTool
from supervisor.tools.definition import ToolCallback, ToolDef
from supervisor.tools.registry import ToolRegistry
from supervisor.tools.trace import ExecutionTrace


class DiscoveryMode(enum.Enum):
    EXCLUSIVE = "exclusive"
    WITH_DISCOVERY = "with_discovery"


_FORBIDDEN = ("\n", "\r", ";", "&", "|", "`", "$(")
_DISCOVER_COMMANDS = ("discover", "help")


class DiscoverRequestError(ValueError):
    """A discover-tool request that is refused before anything runs."""


def _has_shell_control(text: str) -> bool:
    return any(token in text for token in _FORBIDDEN)


def discover_commands(arguments: Mapping[str, Any]) -> tuple[str, float | None]:
    """The script a discover-tool request stands for (``commands`` wins, then ``all``,
    then ``query``), checked to be one ``discover``/``help`` command."""
    if not isinstance(arguments, Mapping):
        raise DiscoverRequestError("arguments must be a JSON object")
    timeout_ms = arguments.get("timeout_ms")
    timeout = None
    if isinstance(timeout_ms, int) and not isinstance(timeout_ms, bool) and timeout_ms >= 0:
        timeout = timeout_ms / 1000
    commands = arguments.get("commands")
    if isinstance(commands, str):
        script = commands
    elif arguments.get("all") is True:
        script = "discover --categories"
    elif isinstance(arguments.get("query"), str):
        query = arguments["query"]
        if _has_shell_control(query):
            raise DiscoverRequestError("query contains unsupported shell control characters")
        script = f"discover --search {query}"
    else:
        raise DiscoverRequestError("one of `commands`, `all`, or `query` is required")
    if _has_shell_control(script):
        raise DiscoverRequestError("discover tool commands cannot contain shell control characters")
    words = script.split()
    if not words or words[0] not in _DISCOVER_COMMANDS:
        raise DiscoverRequestError("discover tool only supports: discover, help")
    return script, timeout


def _refused(message: str) -> ExecResult:
    return ExecResult(stdout="", stderr=message, exit_code=1, error=message)


class ScriptTool:
    """The script tool as a model sees it: name, texts, schemas and ``execute``."""

    def __init__(self, inner: ScriptedTool) -> None:
        self._inner = inner
        self.name = inner.name

    @property
    def description(self) -> str:
        return self._inner.description()

    @property
    def short_description(self) -> str:
        return self._inner.short_description

    @property
    def input_schema(self) -> dict[str, Any]:
        return prompts.request_schema()

    @property
    def output_schema(self) -> dict[str, Any]:
        return prompts.response_schema()

    def system_prompt(self) -> str:
        return self._inner.system_prompt()

    def help(self) -> str:
        return self._inner.help()

    def definition(self) -> dict[str, Any]:
        """An OpenAI-style function definition."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }

    async def execute(
        self, arguments: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        return await self._inner.execute_request(arguments, tenant=tenant)

    def execute_sync(
        self, arguments: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        return self._inner.execute_request_sync(arguments, tenant=tenant)


class DiscoverTool(ScriptTool):
    """``<name>_discover``: ``discover`` and ``help`` only, over the same tool set."""

    def __init__(self, inner: ScriptedTool) -> None:
        super().__init__(inner)
        self.name = f"{inner.name}_discover"

    @property
    def description(self) -> str:
        return prompts.discover_tool_description(self._inner.name)

    @property
    def short_description(self) -> str:
        return self.description

    @property
    def input_schema(self) -> dict[str, Any]:
        return prompts.discover_tool_schema()

    def system_prompt(self) -> str:
        return prompts.discover_tool_prompt(self.name)

    def help(self) -> str:
        return prompts.discover_tool_help(f"{self._inner.name} Discover")

    async def execute(
        self, arguments: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        try:
            script, timeout = discover_commands(arguments)
        except DiscoverRequestError as exc:
            return _refused(str(exc))
        return await self._inner.execute_request(_request(script, timeout), tenant=tenant)

    def execute_sync(
        self, arguments: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        try:
            script, timeout = discover_commands(arguments)
        except DiscoverRequestError as exc:
            return _refused(str(exc))
        return self._inner.execute_request_sync(_request(script, timeout), tenant=tenant)


def _request(script: str, timeout: float | None) -> dict[str, Any]:
    request: dict[str, Any] = {"commands": script}
    if timeout is not None:
        request["timeout_ms"] = round(timeout * 1000)
    return request


class ScriptingToolSet:
    """A ``ScriptedTool`` plus the choice of how it is offered (see the module doc)."""

    def __init__(
        self,
        name: str,
        short_description: str | None = None,
        *,
        mode: DiscoveryMode = DiscoveryMode.EXCLUSIVE,
        limits: ExecutionLimits | None = None,
        max_commands: int | None = None,
        max_loop_iterations: int | None = None,
        timeout_seconds: float | None = None,
        sanitize_errors: bool | None = None,
        registry: ToolRegistry | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(mode, DiscoveryMode):
            raise TypeError("mode must be a DiscoveryMode")
        self._mode = mode
        self._inner = ScriptedTool(
            name,
            short_description or f"ScriptingToolSet: {name}",
            max_commands,
            max_loop_iterations,
            timeout_seconds,
            limits=limits,
            compact_prompt=mode is DiscoveryMode.WITH_DISCOVERY,
            sanitize_errors=sanitize_errors,
            registry=registry,
            env=env,
        )

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def discovery_mode(self) -> DiscoveryMode:
        return self._mode

    @property
    def scripted_tool(self) -> ScriptedTool:
        return self._inner

    def with_discovery(self) -> ScriptingToolSet:
        """Switch to ``WITH_DISCOVERY`` (compact prompt plus the discover tool)."""
        self._mode = DiscoveryMode.WITH_DISCOVERY
        self._inner.compact_prompt = True
        return self

    def add_tool(
        self,
        name: str | ToolDef,
        description: str | ToolCallback | None = None,
        callback: ToolCallback | None = None,
        schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] | None = None,
        category: str | None = None,
        *,
        dry_run: ToolCallback | None = None,
    ) -> None:
        self._inner.add_tool(
            name,
            description,
            callback,
            schema,
            tags,
            category,
            dry_run=dry_run,
        )

    def env(self, key: str, value: str) -> None:
        self._inner.env(key, value)

    def tools(self) -> list[ScriptTool]:
        """The tools to give the model: one (exclusive) or two (with discovery)."""
        script = ScriptTool(self._inner)
        if self._mode is DiscoveryMode.EXCLUSIVE:
            return [script]
        return [script, DiscoverTool(self._inner)]

    def take_last_execution_trace(self) -> ExecutionTrace | None:
        return self._inner.take_last_execution_trace()
