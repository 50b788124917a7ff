"""The commands a tool set adds to a script: one per tool, plus ``help`` and ``discover``.

Each is an entry of the contract's command table: ``(args, stdin) -> CommandResult``,
returned directly when nothing waits (sync callbacks, help, discover), so a tool call
from a loop costs no coroutine. Output formats are bashkit 0.20.1's, byte for byte
(reference-bashkit.md sections 1.#10-11 and 3); the registry does validation, policy,
deadline, sanitisation and tracing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable
from typing import Any

from supervisor.scripted.contract import CommandResult, execution_deadline
from supervisor.scripted.flags import FlagError, FlagParser, usage_from_schema
from supervisor.tools.context import current_request
from supervisor.tools.definition import ToolCallSurface, ToolOutput
from supervisor.tools.registry import RegisteredTool, ToolRegistry
from supervisor.tools.trace import InvocationKind, InvocationTrace

HELP_USAGE = "usage: help [--list] [<tool>] [--json]"
DISCOVER_USAGE = (
    "usage: discover --categories | --category <name> | --tag <tag> | --search <keyword> [--json]"
)

_SHELL = ToolCallSurface.SHELL


def _trace(registry: ToolRegistry) -> InvocationTrace:
    scope = current_request.get()
    return registry.default_trace if scope is None else scope.trace


def serde_float(value: float) -> str:
    """A float as serde_json writes it: like Python's ``repr`` except that numbers from
    1e-5 up to 1e-4 stay decimal and exponents are not zero-padded (``1.5e-7``)."""
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    power = int(exponent)
    if -5 < power + 1 <= 0:
        sign = "-" if mantissa.startswith("-") else ""
        digits = mantissa.lstrip("-").replace(".", "")
        return f"{sign}0.{'0' * -(power + 1)}{digits}"
    return f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"


_FLOAT_SLOT = re.compile(r'"\\u0000([0-9a-f]{16}):(\d+)"')


def serde_dumps(value: Any, *, pretty: bool = False) -> str:
    """JSON with sorted keys as serde_json writes it (compact, or 2-space pretty)."""
    floats: list[float] = []
    nonce = os.urandom(8).hex()  # a string of the value cannot forge a float's slot

    def mark(v: Any) -> Any:
        if type(v) is float:
            floats.append(v)
            return f"\x00{nonce}:{len(floats) - 1}"
        if isinstance(v, dict):
            return {k: mark(x) for k, x in v.items()}
        if isinstance(v, list):
            return [mark(x) for x in v]
        return v

    marked = mark(value)
    if pretty:
        text = json.dumps(marked, indent=2, sort_keys=True, ensure_ascii=False)
    else:
        text = json.dumps(marked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not floats:
        return text

    def unmark(match: re.Match[str]) -> str:
        if match.group(1) != nonce:
            return match.group(0)
        return serde_float(floats[int(match.group(2))])

    return _FLOAT_SLOT.sub(unmark, text)


def _compact(value: Any) -> str:
    return serde_dumps(value)


def _pretty(value: Any) -> str:
    return serde_dumps(value, pretty=True) + "\n"


def tool_help(tool: RegisteredTool) -> str:
    """``<name> - <description>`` and, when the schema has properties, a usage line."""
    d = tool.definition
    text = f"{d.name} - {d.description}\n"
    usage = usage_from_schema(tool.schema)
    if usage is not None:
        text += f"Usage: {d.name} {usage}\n"
    return text


def _listing(tools: list[RegisteredTool]) -> str:
    return "".join(f"{t.definition.name:<20} {t.definition.description}\n" for t in tools)


class ToolCommand:
    """One tool as a shell command: ``--help``, ``--dry-run``, flags, then dispatch."""

    __slots__ = ("_help", "_name", "_parser", "_registry", "_tool")

    def __init__(self, registry: ToolRegistry, tool: RegisteredTool) -> None:
        self._registry = registry
        self._tool = tool
        self._name = tool.definition.name
        self._parser = FlagParser(tool.schema)
        self._help = tool_help(tool)

    def __call__(
        self, args: list[str], stdin: str | None
    ) -> CommandResult | Awaitable[CommandResult]:
        if "--help" in args:
            _trace(self._registry).record(self._name, InvocationKind.HELP, args, 0)
            return CommandResult(self._help)
        if "--dry-run" in args:
            return self._dry_run(args, stdin)
        try:
            params = self._parser.parse(args)
        except FlagError as exc:
            return CommandResult("", str(exc), 2)
        return self._registry.dispatch(
            self._tool, params, stdin, _SHELL, args, execution_deadline.get(), CommandResult
        )

    def _dry_run(
        self, args: list[str], stdin: str | None
    ) -> CommandResult | Awaitable[CommandResult]:
        """Parse without calling: the params as JSON, or the parse error as JSON on
        stderr (exit 1); a registered dry-run handler answers instead. No schema check."""
        trace = _trace(self._registry)
        try:
            params = self._parser.parse([a for a in args if a != "--dry-run"])
        except FlagError as exc:
            report = {"dry_run": True, "error": str(exc), "tool": self._name, "valid": False}
            trace.record(self._name, InvocationKind.TOOL, args, 1)
            return CommandResult("", _compact(report) + "\n", 1)
        if self._tool.dry_run is None:
            report = {"dry_run": True, "params": params, "tool": self._name, "valid": True}
            trace.record(self._name, InvocationKind.TOOL, args, 0)
            return CommandResult(_compact(report) + "\n")
        out = self._registry.dry_run(self._tool, params, stdin)
        if isinstance(out, ToolOutput):
            trace.record(self._name, InvocationKind.TOOL, args, out.exit_code)
            return CommandResult(out.stdout, out.stderr, out.exit_code)
        return self._traced(out, trace, args)

    async def _traced(
        self, pending: Awaitable[ToolOutput], trace: InvocationTrace, args: list[str]
    ) -> CommandResult:
        out = await pending
        trace.record(self._name, InvocationKind.TOOL, args, out.exit_code)
        return CommandResult(out.stdout, out.stderr, out.exit_code)


class HelpCommand:
    """``help``: list the tools, or describe one (text or ``--json``)."""

    __slots__ = ("_registry",)

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry

    def __call__(self, args: list[str], stdin: str | None) -> CommandResult:
        result = self._answer(args)
        _trace(self._registry).record("help", InvocationKind.HELP, args, result.exit_code)
        return result

    def _answer(self, args: list[str]) -> CommandResult:
        if not args or args == ["--list"]:
            return CommandResult(_listing(list(self._registry)))
        name = next((a for a in args if not a.startswith("--")), None)
        if name is None:
            return CommandResult("", HELP_USAGE, 1)
        tool = self._registry.get(name)
        if tool is None:
            return CommandResult("", f"help: unknown tool: {name}", 1)
        if "--json" in args:
            d = tool.definition
            return CommandResult(
                _pretty({"description": d.description, "input_schema": tool.schema, "name": d.name})
            )
        return CommandResult(tool_help(tool))


class DiscoverCommand:
    """``discover``: categories, or tools filtered by category, tag or search."""

    __slots__ = ("_registry",)

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry

    def __call__(self, args: list[str], stdin: str | None) -> CommandResult:
        result = self._answer(args)
        _trace(self._registry).record("discover", InvocationKind.DISCOVER, args, result.exit_code)
        return result

    def _answer(self, args: list[str]) -> CommandResult:
        if not args:
            return CommandResult("", DISCOVER_USAGE, 1)
        as_json = "--json" in args
        tools = list(self._registry)
        if "--categories" in args:
            counts: dict[str, int] = {}
            for tool in tools:
                category = tool.definition.category
                if category is not None:
                    counts[category] = counts.get(category, 0) + 1
            ordered = sorted(counts.items())
            if as_json:
                return CommandResult(_pretty([{"category": c, "count": n} for c, n in ordered]))
            return CommandResult(
                "".join(f"{c} ({n} {'tool' if n == 1 else 'tools'})\n" for c, n in ordered)
            )
        chosen = _filter(tools, args)
        if as_json:
            return CommandResult(_pretty([t.definition.to_dict() for t in chosen]))
        return CommandResult(_listing(chosen))


def _value_after(args: list[str], flag: str) -> str | None:
    """The argument after the first ``flag`` ("" when it is last); None when absent."""
    if flag not in args:
        return None
    index = args.index(flag) + 1
    return args[index] if index < len(args) else ""


def _filter(tools: list[RegisteredTool], args: list[str]) -> list[RegisteredTool]:
    """bashkit's precedence, whatever the argument order: category, tag, search, all."""
    category = _value_after(args, "--category")
    if category is not None:
        return [t for t in tools if t.definition.category == category]
    tag = _value_after(args, "--tag")
    if tag is not None:
        return [t for t in tools if tag in t.definition.tags]
    keyword = _value_after(args, "--search")
    if keyword is not None:
        needle = keyword.lower()
        return [
            t
            for t in tools
            if needle in t.definition.name.lower() or needle in t.definition.description.lower()
        ]
    return tools


def command_table(registry: ToolRegistry) -> dict[str, Any]:
    """Every tool of ``registry`` as a command, plus ``help`` and ``discover``."""
    table: dict[str, Any] = {tool.name: ToolCommand(registry, tool) for tool in registry}
    table["help"] = HelpCommand(registry)
    table["discover"] = DiscoverCommand(registry)
    return table
