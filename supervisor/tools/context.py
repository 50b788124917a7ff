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
from supervisor.tools.trace import InvocationTrace


class CapabilityRevoked(RuntimeError):
    """The call a context handle belonged to has ended (or there never was one)."""


@dataclass(frozen=True, slots=True)
class RequestScope:
    """The tenant and the trace sink of the request in progress."""

    tenant_id: str | None
    trace: InvocationTrace


#: The request in progress in this task: set by ``ScriptedTool`` around an execution.
current_request: ContextVar[RequestScope | None] = ContextVar("tool_request", default=None)


class CallContext:
    """What a callback may know about the call it serves; valid only during the call."""

    __slots__ = ("_revoked", "_surface", "_tenant_id", "name")

    def __init__(self, name: str, tenant_id: str | None, surface: ToolCallSurface) -> None:
        #: The tool's name (not request state, so readable after the call).
        self.name = name
        self._tenant_id = tenant_id
        self._surface = surface
        self._revoked = False

    def _check(self) -> None:
        if self._revoked:
            raise CapabilityRevoked("tool callback: execution capability revoked")

    @property
    def tenant_id(self) -> str | None:
        self._check()
        return self._tenant_id

    @property
    def surface(self) -> ToolCallSurface:
        self._check()
        return self._surface

    def revoke(self) -> None:
        self._revoked = True


_current_call: ContextVar[CallContext | None] = ContextVar("tool_call", default=None)


def current_call() -> CallContext:
    """The call the running callback serves (tenant, surface, tool name)."""
    call = _current_call.get()
    if call is None:
        raise CapabilityRevoked("no tool call in progress")
    call._check()
    return call


def enter_call(call: CallContext) -> Token[CallContext | None]:
    return _current_call.set(call)


def leave_call(call: CallContext, token: Token[CallContext | None]) -> None:
    """End a call: its handle is revoked and the previous call (if any) restored."""
    call.revoke()
    _current_call.reset(token)


def reset_call(token: Token[CallContext | None]) -> None:
    """Restore the previous call without revoking (the call continues elsewhere)."""
    _current_call.reset(token)
