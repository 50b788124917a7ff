"""Moved to `supervisor.workers.call_audit` (`CallEvent` and `AuditStream` are also
``supervisor.CallEvent`` and ``supervisor.AuditStream``); this path stays for one release
(removed in 0.2)."""

from supervisor.workers.call_audit import AuditStream, CallEvent

__all__ = ["AuditStream", "CallEvent"]
