"""Per-request and per-call context, carried in context variables.

A request (one script execution, or one structured call) owns its tenant and its trace;
the registry itself holds neither, so one registry can serve many tenants at once
without mixing them. A callback reads the call it serves through ``current_call()``;
the handle it gets is revoked when the call ends, so a callback that keeps it cannot
learn about later requests.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass

from supervisor.tools.definition import ToolCallSurface
from supervisor.tools.local_audit import LocalAudit
from supervisor.tools.trace import InvocationTrace


class CapabilityRevoked(RuntimeError):
    """The call a context handle belonged to has ended (or there never was one)."""


@dataclass(frozen=True, slots=True)
class RequestScope:
    """The tenant, the trace sink and the audit of local calls of the request in
    progress."""

    tenant_id: str | None
    trace: InvocationTrace
    audit: LocalAudit | None = None


#: The request in progress in this task: set by ``ScriptedTool`` around an execution.
current_request: ContextVar[RequestScope | None] = ContextVar("tool_request", default=None)


#: The call in progress: ``[name, tenant_id, surface]`` while it runs, emptied when it
#: ends (so a handle kept past the call, or a task spawned from it, sees it revoked). A
#: plain list keeps the per-call cost to one small allocation.
CallState = list[object]

_current_call: ContextVar[CallState | None] = ContextVar("tool_call", default=None)


class CallContext:
    """What a callback may know about the call it serves; valid only during the call."""

    __slots__ = ("_state", "name")

    def __init__(self, state: CallState) -> None:
        self._state = state
        #: The tool's name (not request state, so readable after the call).
        self.name = str(state[0]) if state else ""

    def _live(self) -> CallState:
        state = self._state
        if not state:
            raise CapabilityRevoked("tool callback: execution capability revoked")
        return state

    @property
    def tenant_id(self) -> str | None:
        tenant = self._live()[1]
        assert tenant is None or isinstance(tenant, str)
        return tenant

    @property
    def surface(self) -> ToolCallSurface:
        surface = self._live()[2]
        assert isinstance(surface, ToolCallSurface)
        return surface


def current_call() -> CallContext:
    """The call the running callback serves (tenant, surface, tool name)."""
    state = _current_call.get()
    if not state:
        raise CapabilityRevoked("no tool call in progress")
    return CallContext(state)


def enter_call(state: CallState) -> Token[CallState | None]:
    return _current_call.set(state)


def reset_call(token: Token[CallState | None]) -> None:
    """Restore the previous call (the caller revokes the state when the call ends)."""
    _current_call.reset(token)
