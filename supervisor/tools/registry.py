"""``ToolRegistry``: one dispatcher for every surface a tool is reached from.

Shell commands of a script, structured calls from a host (``await registry.call(...)``)
and, later, MCP all go through ``dispatch``, in bashkit's order:

1. schema validation (``<n>: schema error: <msg>``, exit 2, traced);
2. the policy hook, which sees name, params, tenant and surface (``<n>: denied by
   policy``, exit 1, traced; a hook that raises denies);
3. the callback, under the request's deadline (async callbacks are cancelled at the
   deadline: ``<n>: callback timeout``, exit 1), with failures sanitised
   (``<n>: callback failed``, exit 1) unless the callback raised ``ToolFailure``;
4. the trace entry.

The registry holds definitions, callbacks and the policy; it holds no request state.
Tenant and trace come from the request (``RequestScope``), so tenants that share one
registry share callbacks and policy but never traces or identity.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import anyio

from supervisor.tools.context import (
    CallState,
    RequestScope,
    current_request,
    enter_call,
    reset_call,
)
from supervisor.tools.definition import (
    ToolCall,
    ToolCallback,
    ToolCallDecision,
    ToolCallSurface,
    ToolDef,
    ToolFailure,
    ToolOutput,
    check_command_name,
    check_dotted_name,
    copy_schema,
)
from supervisor.tools.local_audit import LEDGER_AUDITED, LocalAudit, LocalCallRefused, local_call
from supervisor.tools.schema import SchemaValidator
from supervisor.tools.trace import InvocationKind, InvocationTrace

log = logging.getLogger(__name__)

#: The policy hook: ``fn(ToolCall) -> ToolCallDecision``.
PolicyHook = Callable[[ToolCall], ToolCallDecision]
OutT = TypeVar("OutT")

_TOOL = InvocationKind.TOOL


@dataclass(frozen=True, slots=True)
class RegisteredTool:
    """A definition with its behaviour, compiled for dispatch."""

    definition: ToolDef
    callback: ToolCallback
    dry_run: ToolCallback | None
    #: The private JSON copy of the definition's schema that parsing and checks use.
    schema: dict[str, Any]
    validator: SchemaValidator
    is_async: bool
    #: Its calls are audited as local calls (not when each is a ledger operation).
    audited: bool = True

    @property
    def name(self) -> str:
        return self.definition.name


def _error(stderr: str, exit_code: int) -> ToolOutput:
    return ToolOutput("", stderr, exit_code)


class ToolRegistry:
    """Tool definitions, callbacks and policy, shared by every surface."""

    def __init__(
        self,
        tools: Sequence[tuple[ToolDef, ToolCallback]] = (),
        *,
        policy: PolicyHook | None = None,
        sanitize_errors: bool = True,
        dotted_names: bool = True,
    ) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._policy = policy
        self._sanitize = sanitize_errors
        self._dotted = dotted_names
        self._default_trace = InvocationTrace()
        #: Bumped on every registration, so surfaces can cache what they derive.
        self.version = 0
        for definition, callback in tools:
            self.register(definition, callback)

    # --- registration ----------------------------------------------------------------

    def register(
        self,
        definition: ToolDef,
        callback: ToolCallback,
        *,
        dry_run: ToolCallback | None = None,
    ) -> RegisteredTool:
        """Add a tool; names are checked and schemas compiled here, once."""
        if not isinstance(definition, ToolDef):
            raise TypeError("register() needs a ToolDef")
        name = definition.name
        if self._dotted:
            check_dotted_name(name)
        else:
            check_command_name(name)
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        if not callable(callback) or (dry_run is not None and not callable(dry_run)):
            raise TypeError(f"{name}: callback must be callable")
        schema = copy_schema(name, definition.input_schema)
        tool = RegisteredTool(
            definition=definition,
            callback=callback,
            dry_run=dry_run,
            schema=schema,
            validator=SchemaValidator(schema),
            is_async=inspect.iscoroutinefunction(callback),
            audited=not getattr(callback, LEDGER_AUDITED, False),
        )
        self._tools[name] = tool
        self.version += 1
        return tool

    def tool(
        self,
        name: str,
        description: str,
        *,
        schema: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        category: str | None = None,
    ) -> Callable[[ToolCallback], ToolCallback]:
        """Decorator form of ``register``."""

        def decorate(callback: ToolCallback) -> ToolCallback:
            definition = ToolDef(name, description, schema or {}, tuple(tags), category)
            self.register(definition, callback)
            return callback

        return decorate

    # --- reading -----------------------------------------------------------------------

    @property
    def sanitize_errors(self) -> bool:
        return self._sanitize

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def definitions(self) -> list[ToolDef]:
        return [tool.definition for tool in self._tools.values()]

    def trace(self) -> InvocationTrace:
        """A fresh trace sink, for one request or one tenant."""
        return InvocationTrace()

    @property
    def default_trace(self) -> InvocationTrace:
        """Where calls made outside any request are recorded."""
        return self._default_trace

    def discover(
        self, *, category: str | None = None, tag: str | None = None, search: str | None = None
    ) -> list[dict[str, Any]]:
        """Runtime discovery for structured surfaces: every filter given must match."""
        needle = None if search is None else search.lower()
        out = []
        for tool in self._tools.values():
            d = tool.definition
            if category is not None and d.category != category:
                continue
            if tag is not None and tag not in d.tags:
                continue
            if (
                needle is not None
                and needle not in d.name.lower()
                and (needle not in d.description.lower())
            ):
                continue
            out.append(
                {
                    "name": d.name,
                    "description": d.description,
                    "input_schema": tool.schema,
                    "tags": list(d.tags),
                    "category": d.category,
                }
            )
        return out

    # --- calling -------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        *,
        stdin: str | None = None,
        tenant: str | None = None,
        surface: ToolCallSurface = ToolCallSurface.PYTHON,
        trace: InvocationTrace | None = None,
        timeout: float | None = None,
    ) -> ToolOutput:
        """A structured call: ``params`` is normalised to JSON and goes through the same
        validation, policy, deadline, sanitisation and tracing as a shell command.
        Unknown tools give exit 127 (``<n>: unknown tool``)."""
        tool = self._tools.get(name)
        if tool is None:
            return _error(f"{name}: unknown tool\n", 127)
        try:
            normalised = json.loads(json.dumps({} if params is None else params, allow_nan=False))
        except (TypeError, ValueError) as exc:
            return _error(f"{name}: input is not JSON: {exc}\n", 2)
        if not isinstance(normalised, dict):
            return _error(f"{name}: schema error: input must be object\n", 2)
        deadline = None if timeout is None else time.monotonic() + timeout
        scope = RequestScope(tenant, self._default_trace if trace is None else trace)
        token = current_request.set(scope)
        try:
            result: ToolOutput | Awaitable[ToolOutput] = self.dispatch(
                tool, normalised, stdin, surface, [], deadline, ToolOutput
            )
            if not isinstance(result, ToolOutput):
                result = await result
        finally:
            current_request.reset(token)
        return result

    def dispatch(
        self,
        tool: RegisteredTool,
        params: dict[str, Any],
        stdin: str | None,
        surface: ToolCallSurface,
        trace_args: list[str],
        deadline: float | None,
        output: Callable[[str, str, int], OutT] = ToolOutput,  # type: ignore[assignment]
    ) -> OutT | Awaitable[OutT]:
        """The shared path: validate, ask the policy, run the callback, trace.

        Returns ``output(stdout, stderr, exit_code)`` directly when the callback is
        synchronous (no coroutine and no second result object on the hot path), else an
        awaitable of it. Tenant, trace and audit come from the request in progress
        (``current_request``).
        """
        scope = current_request.get()
        if scope is None:
            tenant, trace = None, self._default_trace
        else:
            tenant, trace = scope.tenant_id, scope.trace
            if scope.audit is not None and tool.audited:
                audited = _Audited(scope.audit, tool.definition.name, params, stdin, output)
                return audited.run(
                    lambda finish: self._call(
                        tool, params, stdin, surface, trace_args, deadline, finish, tenant, trace
                    ),
                    trace,
                    trace_args,
                )
        return self._call(tool, params, stdin, surface, trace_args, deadline, output, tenant, trace)

    def _call(
        self,
        tool: RegisteredTool,
        params: dict[str, Any],
        stdin: str | None,
        surface: ToolCallSurface,
        trace_args: list[str],
        deadline: float | None,
        output: Callable[[str, str, int], OutT],
        tenant: str | None,
        trace: InvocationTrace,
    ) -> OutT | Awaitable[OutT]:
        name = tool.definition.name
        problem = tool.validator.error(params)
        if problem is not None:
            trace.record(name, _TOOL, trace_args, 2)
            return output("", f"{name}: schema error: {problem}\n", 2)
        if self._policy is not None and not self._allowed(name, params, tenant, surface):
            trace.record(name, _TOOL, trace_args, 1)
            return output("", f"{name}: denied by policy\n", 1)
        state: CallState = [name, tenant, surface]
        if tool.is_async:
            started = self._start(tool.callback, params, stdin, state)
            return self._settle(started, state, deadline, trace, trace_args, output)
        if deadline is not None and deadline <= time.monotonic():
            state.clear()
            trace.record(name, _TOOL, trace_args, 1)
            return output("", f"{name}: callback timeout\n", 1)
        token = enter_call(state)
        try:
            result = tool.callback(params, stdin)
        except ToolFailure as failure:
            stdout, stderr, code = "", failure.message, failure.exit_code
        except Exception as exc:
            stdout, (stderr, code) = "", self._failed(name, exc)
        else:
            if type(result) is str:
                stdout, stderr, code = result, "", 0
            elif inspect.isawaitable(result):
                return self._settle(_Pending(result), state, deadline, trace, trace_args, output)
            else:
                stdout, (stderr, code) = "", self._bad_return(name, result)
        finally:
            reset_call(token)
        state.clear()
        trace.record(name, _TOOL, trace_args, code)
        return output(stdout, stderr, code)

    def dry_run(
        self, tool: RegisteredTool, params: dict[str, Any], stdin: str | None
    ) -> ToolOutput | Awaitable[ToolOutput]:
        """A custom ``--dry-run`` handler (no schema check or policy, as in bashkit; its
        failures are sanitised like a callback's). The caller traces it."""
        handler = tool.dry_run
        assert handler is not None
        scope = current_request.get()
        tenant = None if scope is None else scope.tenant_id
        state: CallState = [tool.definition.name, tenant, ToolCallSurface.SHELL]
        started = self._start(handler, params, stdin, state)
        if not isinstance(started, ToolOutput):
            return self._settle(started, state, None, None, [], ToolOutput)
        state.clear()
        return started

    # --- internals -------------------------------------------------------------------------

    def _allowed(
        self, name: str, params: dict[str, Any], tenant: str | None, surface: ToolCallSurface
    ) -> bool:
        assert self._policy is not None
        try:
            decision = self._policy(ToolCall(name, MappingProxyType(params), tenant, surface))
        except Exception:
            log.warning("policy hook raised for %s; denying", name, exc_info=True)
            return False
        return decision is ToolCallDecision.ALLOW

    def _start(
        self, callback: ToolCallback, params: dict[str, Any], stdin: str | None, state: CallState
    ) -> ToolOutput | _Pending:
        """Run the synchronous part of a callback with its call context set: the output,
        or the awaitable an async callback returned."""
        token = enter_call(state)
        try:
            result = callback(params, stdin)
        except ToolFailure as failure:
            return _error(failure.message, failure.exit_code)
        except Exception as exc:
            return _error(*self._failed(str(state[0]), exc))
        finally:
            reset_call(token)
        if type(result) is str:
            return ToolOutput(result, "", 0)
        if inspect.isawaitable(result):
            return _Pending(result)
        return _error(*self._bad_return(str(state[0]), result))

    async def _settle(
        self,
        started: ToolOutput | _Pending,
        state: CallState,
        deadline: float | None,
        trace: InvocationTrace | None,
        trace_args: list[str],
        output: Callable[[str, str, int], OutT],
    ) -> OutT:
        """Await an async callback under the deadline (the call context stays set until
        it settles, then is revoked), and trace the outcome."""
        name = str(state[0])
        out: ToolOutput
        if isinstance(started, ToolOutput):
            out = started
            state.clear()
        else:
            token = enter_call(state)
            try:
                out = await self._await(started.awaitable, name, deadline)
            finally:  # revoked even when the execution itself is cancelled
                reset_call(token)
                state.clear()
        if trace is not None:
            trace.record(name, _TOOL, trace_args, out.exit_code)
        return output(out.stdout, out.stderr, out.exit_code)

    async def _await(
        self, awaitable: Awaitable[object], name: str, deadline: float | None
    ) -> ToolOutput:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            _discard(awaitable)
            return _error(f"{name}: callback timeout\n", 1)
        try:
            with anyio.move_on_after(remaining) as cancel_scope:
                result = await awaitable
        except ToolFailure as failure:
            return _error(failure.message, failure.exit_code)
        except Exception as exc:
            return _error(*self._failed(name, exc))
        if cancel_scope.cancelled_caught:
            return _error(f"{name}: callback timeout\n", 1)
        if type(result) is str:
            return ToolOutput(result, "", 0)
        return _error(*self._bad_return(name, result))

    def _failed(self, name: str, exc: BaseException) -> tuple[str, int]:
        """The stderr and exit status of a callback that raised."""
        if self._sanitize:
            log.debug("tool %s callback failed (sanitised)", name, exc_info=exc)
            return f"{name}: callback failed\n", 1
        return str(exc) or type(exc).__name__, 1

    def _bad_return(self, name: str, result: object) -> tuple[str, int]:
        """The stderr and exit status of a callback that returned something not a str."""
        if self._sanitize:
            return f"{name}: callback failed\n", 1
        return f"{name}: callback returned {type(result).__name__}, expected str\n", 1


class _Audited(Generic[OutT]):
    """One local call under a request's audit: a pending slot before it runs (refused:
    exit 1, traced), one record after it ends, however it ends."""

    __slots__ = ("audit", "ended", "name", "output", "params", "stdin")

    def __init__(
        self,
        audit: LocalAudit,
        name: str,
        params: dict[str, Any],
        stdin: str | None,
        output: Callable[[str, str, int], OutT],
    ) -> None:
        self.audit = audit
        self.name = name
        self.params = params
        self.stdin = stdin
        self.output = output
        self.ended = False

    def run(
        self,
        call: Callable[[Callable[[str, str, int], OutT]], OutT | Awaitable[OutT]],
        trace: InvocationTrace,
        trace_args: list[str],
    ) -> OutT | Awaitable[OutT]:
        try:
            self.audit.begin(self.name)
        except LocalCallRefused as refused:
            trace.record(self.name, _TOOL, trace_args, 1)
            return self.output("", f"{self.name}: {refused}\n", 1)
        try:
            result = call(self.finish)
        except BaseException:
            self.abandon()
            raise
        if self.ended:
            return result
        assert inspect.isawaitable(result)
        return self._wait(result)

    async def _wait(self, pending: Awaitable[OutT]) -> OutT:
        try:
            return await pending
        finally:
            self.abandon()

    def finish(self, stdout: str, stderr: str, exit_code: int) -> OutT:
        """The call's output, once it is recorded (a record that cannot be written
        fails the command: nothing a script did goes unaudited)."""
        self.ended = True
        record = local_call(self.name, self.params, self.stdin, stdout, stderr, exit_code)
        try:
            self.audit.end(record)
        except Exception as exc:
            log.warning("local call %s could not be audited", self.name, exc_info=True)
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return self.output("", f"{self.name}: audit failed: {why}\n", 1)
        return self.output(stdout, stderr, exit_code)

    def abandon(self) -> None:
        """The call ended without an output (cancelled, or the engine raised)."""
        if not self.ended:
            self.ended = True
            record = local_call(self.name, self.params, self.stdin, "", "", None)
            try:
                self.audit.end(record)
            except Exception:
                log.warning("local call %s could not be audited", self.name, exc_info=True)


@dataclass(frozen=True, slots=True)
class _Pending:
    """The awaitable an async callback returned, still to be awaited."""

    awaitable: Awaitable[object]


def _discard(pending: object) -> None:
    """Close a coroutine that will never run, so it is not reported as never awaited."""
    close = getattr(pending, "close", None)
    if close is not None:
        close()
