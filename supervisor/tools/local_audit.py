"""Local tool calls of a script, reported to an audit (issue 18 item 3).

A script's local tools run in the host; its external tools are operations of a
`Supervisor`'s ledger. With ``ScriptedTool(audit=sup.local_audit())`` the local calls take
a slot of the same pending bound before they run (``begin``: refused when it is full)
and end as one event of the same hash chain (``end``), so one ``verify_audit_chain``
covers everything a script did. A callback that is itself a ledger operation (a
``sup.tool_callback``) says so with `LEDGER_AUDITED` and is not counted twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

#: An attribute a callback carries when each of its calls is a ledger operation already.
LEDGER_AUDITED = "__sandvisor_ledger_audited__"


class LocalCallRefused(Exception):
    """The audit refuses to begin a local call (its pending bound is reached); the
    message is one line and becomes the command's stderr."""


@dataclass(frozen=True, slots=True)
class LocalCall:
    """What the audit records of one local call."""

    tool: str
    bytes_in: int  # the parameters as compact JSON, plus stdin, in UTF-8
    bytes_out: int  # stdout and stderr, in UTF-8
    digest: str  # SHA-256 of the call: parameters, stdin, stdout, stderr, exit status
    outcome: str  # ``exit N``, or ``cancelled``


class LocalAudit(Protocol):
    """Where a script's local calls go: called in the script's thread, quick."""

    def begin(self, tool: str) -> None:
        """Before the call runs; raises `LocalCallRefused` to refuse it."""

    def end(self, call: LocalCall) -> None:
        """After it ended (exactly once per ``begin`` that did not raise)."""


def local_call(
    tool: str,
    params: dict[str, Any],
    stdin: str | None,
    stdout: str,
    stderr: str,
    exit_code: int | None,
) -> LocalCall:
    """The record of one call; ``exit_code`` None: it was cancelled."""
    inp = json.dumps(params, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    body = json.dumps(
        [inp, stdin, stdout, stderr, exit_code], separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8", "surrogatepass")
    return LocalCall(
        tool=tool,
        bytes_in=_size(inp) + (0 if stdin is None else _size(stdin)),
        bytes_out=_size(stdout) + _size(stderr),
        digest=hashlib.sha256(body).hexdigest(),
        outcome="cancelled" if exit_code is None else f"exit {exit_code}",
    )


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
