"""``ScriptedTool``: tools as builtin commands of a logic-only bash, call-compatible with
bashkit's Python binding (``bashkit.scripted.ScriptedTool``, 0.20.1).

Each execution builds a fresh interpreter (the language core's ``run_script``) over one
command table: the text tools, ``help``, ``discover`` and one command per tool, tools
overriding builtins of the same name. Shell state never carries over; host state lives
in the callbacks. The table is built once per set of tools and reused; what belongs to
one execution (its trace and tenant) travels in a context variable, so concurrent
executions of one tool never mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import importlib.metadata
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from supervisor._loop import in_event_loop
from supervisor.scripted import prompts
from supervisor.scripted.contract import ExecResult, ExecutionLimits, ScriptRequest
from supervisor.scripted.custom_builtins import BuiltinCallback, builtin_command
from supervisor.tools.context import RequestScope, current_request
from supervisor.tools.definition import ToolCallback, ToolDef, check_command_name
from supervisor.tools.local_audit import LocalAudit
from supervisor.tools.registry import RegisteredTool, ToolRegistry
from supervisor.tools.trace import ExecutionTrace, InvocationTrace

if TYPE_CHECKING:
    from supervisor.scripted.isolation import ScriptPool

T = TypeVar("T")
Backend = Literal["asyncio", "trio"]


@functools.cache
def package_version() -> str:
    return importlib.metadata.version("sandvisor")


def merge_limits(
    limits: ExecutionLimits | None,
    max_commands: int | None,
    max_loop_iterations: int | None,
    timeout_seconds: float | None,
) -> ExecutionLimits:
    """The binding's three keyword limits applied over ``limits`` (or the defaults)."""
    base = limits if limits is not None else ExecutionLimits()
    if not isinstance(base, ExecutionLimits):
        raise TypeError("limits must be an ExecutionLimits")
    changes: dict[str, Any] = {}
    for key, value in (
        ("max_commands", max_commands),
        ("max_loop_iterations", max_loop_iterations),
    ):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive int, got {value!r}")
            changes[key] = value
    if timeout_seconds is not None:
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, int | float):
            raise ValueError(f"timeout_seconds must be a number, got {timeout_seconds!r}")
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be positive, got {timeout_seconds!r}")
        changes["timeout_seconds"] = float(timeout_seconds)
    return dataclasses.replace(base, **changes) if changes else base


def parse_request(request: Mapping[str, Any]) -> tuple[str, float | None]:
    """A ``{commands, timeout_ms}`` tool request as (script, timeout in seconds)."""
    if not isinstance(request, Mapping):
        raise TypeError("a tool request is a JSON object")
    commands = request.get("commands")
    if not isinstance(commands, str):
        raise ValueError("a tool request needs `commands` (a string)")
    timeout_ms = request.get("timeout_ms")
    if timeout_ms is None:
        return commands, None
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
        raise ValueError("`timeout_ms` must be a non-negative integer")
    return commands, timeout_ms / 1000


class ScriptedTool:
    """Compose tool callbacks through bash scripts (see ``docs/scripted.md``)."""

    def __init__(
        self,
        name: str,
        short_description: str | None = None,
        max_commands: int | None = None,
        max_loop_iterations: int | None = None,
        timeout_seconds: float | None = None,
        *,
        limits: ExecutionLimits | None = None,
        compact_prompt: bool = False,
        sanitize_errors: bool | None = None,
        registry: ToolRegistry | None = None,
        env: Mapping[str, str] | None = None,
        isolation: ScriptPool | None = None,
        audit: LocalAudit | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a ScriptedTool needs a non-empty name")
        self.name = name
        self.short_description = short_description or f"ScriptedTool: {name}"
        self._summary = short_description or ""
        self.compact_prompt = compact_prompt
        self.limits = merge_limits(limits, max_commands, max_loop_iterations, timeout_seconds)
        if registry is None:
            registry = ToolRegistry(
                sanitize_errors=True if sanitize_errors is None else sanitize_errors,
                dotted_names=False,
            )
        elif sanitize_errors is not None and sanitize_errors != registry.sanitize_errors:
            raise ValueError("sanitize_errors belongs to the shared registry; set it there")
        self._registry = registry
        self._env: dict[str, str] = {}
        for key, value in (env or {}).items():
            self.env(key, value)
        self._builtins: dict[str, BuiltinCallback] = {}
        #: run each execution in a child process of this pool (the services' backstop);
        #: None runs it in this process (the library's default)
        self.isolation = isolation
        #: where each local tool call of a script is reported (``sup.local_audit()``:
        #: the supervisor's pending bound and audit chain); None: only the trace
        self.audit = audit
        self._table: tuple[tuple[int, int], dict[str, Any], frozenset[str]] | None = None
        self._last_trace: ExecutionTrace | None = None
        self._lock = threading.Lock()

    # --- configuration ---------------------------------------------------------------------

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
        """Register a tool: ``add_tool(name, description, callback, schema=None,
        tags=None, category=None)`` as in bashkit's binding, or ``add_tool(ToolDef,
        callback)``. ``dry_run`` is an optional handler for ``<tool> --dry-run``."""
        if isinstance(name, ToolDef):
            definition = name
            handler = callback if callback is not None else description
            if isinstance(handler, str) or handler is None:
                raise TypeError("add_tool(ToolDef, callback) needs a callback")
        else:
            if not isinstance(description, str):
                raise TypeError("add_tool(name, description, callback): description is a str")
            if callback is None:
                raise TypeError(f"{name}: add_tool needs a callback")
            definition = ToolDef(name, description, schema or {}, tuple(tags or ()), category)
            handler = callback
        if definition.name in self._builtins:
            raise ValueError(f"{definition.name!r} is already registered as a builtin")
        self._registry.register(definition, handler, dry_run=dry_run)

    def builtin(self, name: str, callback: BuiltinCallback) -> None:
        """Register a raw-argv builtin (bashkit's ``.builtin``): ``callback(ctx)`` gets a
        ``BuiltinContext`` (``name``, ``argv`` unparsed, ``stdin``) and returns the stdout
        string or a ``BuiltinResult``, sync or async. It overrides a shell builtin of
        the same name; it may not take a tool's name, ``help`` or ``discover``."""
        if not isinstance(name, str):
            raise TypeError("builtin(name, callback): name is a str")
        if not callable(callback):
            raise TypeError(f"{name}: builtin needs a callable")
        check_command_name(name)
        if name in self._builtins or any(t.definition.name == name for t in self._tools()):
            raise ValueError(f"{name!r} is already registered")
        self._builtins[name] = callback

    def env(self, key: str, value: str) -> None:
        """Set a variable every later execution starts with."""
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("env(key, value) takes two str")
        if not key.isidentifier() or not key.isascii():
            raise ValueError(f"{key!r} is not a shell variable name")
        self._env[key] = value

    @property
    def registry(self) -> ToolRegistry:
        return self._registry

    @property
    def version(self) -> str:
        return package_version()

    def tool_count(self) -> int:
        return len(self._registry)

    def _tools(self) -> list[RegisteredTool]:
        return list(self._registry)

    # --- text for the model and the host -------------------------------------------------------

    def description(self) -> str:
        return prompts.description(self._tools())

    def system_prompt(self) -> str:
        """Markdown with every tool's usage and input schema, or with ``compact_prompt``
        one paragraph of names and one-liners (schemas left to ``help`` at run time)."""
        return prompts.system_prompt(
            self.name, self._tools(), compact=self.compact_prompt, summary=self._summary
        )

    def help(self) -> str:
        return prompts.help_markdown(self.name, self.version, self._tools())

    def input_schema(self) -> str:
        return prompts.pretty_json(prompts.request_schema())

    def output_schema(self) -> str:
        return prompts.pretty_json(prompts.response_schema())

    # --- execution ---------------------------------------------------------------------------

    async def execute(self, script: str, *, tenant: str | None = None) -> ExecResult:
        """Run ``script`` (under trio or asyncio; async callbacks run in the caller's
        event loop). ``tenant`` reaches the policy hook and the callbacks."""
        return await self._run(script, None, tenant)

    def execute_sync(
        self, script: str, *, tenant: str | None = None, backend: Backend = "asyncio"
    ) -> ExecResult:
        """Run ``script`` from synchronous code; async callbacks run on a private event
        loop (``backend``). Called from inside a running event loop, the work moves to a
        private thread rather than deadlock (the caller's loop then waits)."""
        return run_blocking(lambda: self._run(script, None, tenant), backend)

    async def execute_request(
        self, request: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        """Run a ``{"commands": ..., "timeout_ms": ...}`` tool request; ``timeout_ms``
        aborts the whole execution (exit 124)."""
        script, timeout = parse_request(request)
        return await self._run(script, timeout, tenant)

    def execute_request_sync(
        self, request: Mapping[str, Any], *, tenant: str | None = None
    ) -> ExecResult:
        script, timeout = parse_request(request)
        return run_blocking(lambda: self._run(script, timeout, tenant), "asyncio")

    def take_last_execution_trace(self) -> ExecutionTrace | None:
        """The invocations of the most recent execution, then forget them."""
        with self._lock:
            trace, self._last_trace = self._last_trace, None
        return trace

    def command_table(self) -> tuple[dict[str, Any], frozenset[str]]:
        """The commands a script sees (text tools, help, discover, tools) and the names
        that override shell builtins; rebuilt only when tools were added."""
        cached = self._table
        version = (self._registry.version, len(self._builtins))
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        from supervisor.scripted.text_tools import TEXT_COMMANDS
        from supervisor.scripted.tool_commands import command_table

        own = command_table(self._registry)
        sanitize = self._registry.sanitize_errors
        builtins = {
            name: builtin_command(name, callback, sanitize)
            for name, callback in self._builtins.items()
        }
        table = {**TEXT_COMMANDS, **builtins, **own}  # a tool, help or discover wins
        overrides = frozenset(own) | frozenset(builtins)
        self._table = (version, table, overrides)
        return table, overrides

    async def _run(self, script: str, timeout: float | None, tenant: str | None) -> ExecResult:
        if not isinstance(script, str):
            raise TypeError("a script is a str")
        trace = InvocationTrace()
        if not script:
            self._store(trace)
            return ExecResult()
        from supervisor.scripted.shell.execution import run_script

        table, overrides = self.command_table()
        request = ScriptRequest(
            script=script,
            commands=table,
            env=dict(self._env),
            limits=self.limits,
            overrides=overrides,
            request_timeout_seconds=timeout,
        )
        token = current_request.set(RequestScope(tenant, trace, self.audit))
        try:
            if self.isolation is not None:
                return await self.isolation.execute(request)
            result: ExecResult = await run_script(request)
            return result
        finally:
            current_request.reset(token)
            self._store(trace)

    def _store(self, trace: InvocationTrace) -> None:
        with self._lock:
            self._last_trace = ExecutionTrace(trace.take())


# --- running a coroutine from synchronous code ---------------------------------------------


class _RunnerBox:
    """A thread's reusable asyncio runner (a new loop per call costs ~3x more), closed
    when the thread ends and its thread-local storage is dropped."""

    __slots__ = ("runner",)

    def __init__(self) -> None:
        self.runner = asyncio.Runner()

    def __del__(self) -> None:
        # At interpreter shutdown closing may fail; the loop then goes with the process.
        with contextlib.suppress(Exception):
            self.runner.close()


_local = threading.local()


def _thread_runner() -> asyncio.Runner:
    box: _RunnerBox | None = getattr(_local, "box", None)
    if box is None:
        box = _local.box = _RunnerBox()
    return box.runner


def _run_here(
    make: Callable[[], Coroutine[Any, Any, T]], backend: Backend, context: contextvars.Context
) -> T:
    if backend == "trio":
        import trio

        async def main() -> T:
            return await make()

        return context.run(trio.run, main)
    # The runner would reuse the context it was created in: pass the caller's.
    return _thread_runner().run(make(), context=context)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]], backend: Backend) -> T:
    """Run ``make()`` to completion from synchronous code, with the caller's context
    variables visible to it; on a private thread when this thread runs an event loop."""
    if backend not in ("asyncio", "trio"):
        raise ValueError(f"unknown backend {backend!r}")
    context = contextvars.copy_context()
    if not in_event_loop():
        return _run_here(make, backend, context)
    outcome: list[Any] = []

    def worker() -> None:
        try:
            outcome.append((True, _run_here(make, backend, context)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=worker, name="sandvisor-execute-sync")
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
