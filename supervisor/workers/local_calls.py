"""A supervisor's ledger as the audit of scripts' local tool calls (issue 18 item 3).

``ScriptedTool(audit=sup.local_audit())``: each local call of a script takes one slot of
the ledger's pending bound (``max_pending``, shared with every operation) while it runs,
and ends as one ``local_call`` event in the ledger's hash chain. The ledger belongs to the
supervisor's event loop; from another thread or loop (``execute_sync``, asyncio) each step
runs there through the loop's token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.from_thread
import anyio.lowlevel

from supervisor.ledger import Ledger, LedgerError, PendingLimitReached
from supervisor.tools.local_audit import LocalCall, LocalCallRefused
from supervisor.workers.tool_callbacks import in_run

T = TypeVar("T")


class LedgerLocalAudit:
    """`supervisor.tools.local_audit.LocalAudit` over a supervisor's ledger."""

    def __init__(self, ledger: Ledger, token: anyio.lowlevel.EventLoopToken) -> None:
        self._ledger = ledger
        self._token = token

    def begin(self, tool: str) -> None:
        try:
            self._there(self._ledger.begin_local)
        except PendingLimitReached as exc:
            raise LocalCallRefused(f"refused, the pending bound is reached ({exc})") from None
        except (LedgerError, RuntimeError) as exc:  # closed, or its loop is gone
            raise LocalCallRefused(f"refused, the audit is unavailable ({exc})") from None

    def end(self, call: LocalCall) -> None:
        ledger = self._ledger
        self._there(
            lambda: ledger.end_local(
                call.tool,
                bytes_in=call.bytes_in,
                bytes_out=call.bytes_out,
                digest=call.digest,
                outcome=call.outcome,
            )
        )

    def _there(self, step: Callable[[], T]) -> T:
        if in_run(self._token):
            return step()
        return anyio.from_thread.run_sync(step, token=self._token)
