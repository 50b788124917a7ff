"""External tools in scripts: a `Supervisor` call as a `ScriptedTool` callback.

``st.add_tool("upper", "...", sup.tool_callback("text.upper", deadline=2.0))`` makes a
sandboxed tool an ordinary command of a script. Its input is the command's stdin (text
tools) or its parameters as a JSON object (json tools, with piped stdin under ``"stdin"``);
its output is the result (json results as one compact line). Every other outcome becomes
a `ToolFailure`: a one-line message on stderr and a distinct exit status, so a script can
tell them apart (``|| case $? in 124) ...``):

===============  ====  ===================================================
outcome          exit  stderr
===============  ====  ===================================================
failed           1     ``<command>: <error>``
timed_out        124   ``<command>: timed out (deadline <d> s)``
indeterminate    125   ``<command>: outcome unknown (<kill reason>) ...``
cancelled        130   ``<command>: cancelled``
===============  ====  ===================================================

The callback works from the supervisor's own event loop, or from another thread or event
loop (``ScriptedTool.execute_sync``, a trio run beside an asyncio one): it then reaches
the supervisor through its loop's token, and a cancellation of the script becomes a
cooperative cancel of the call.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from supervisor.ledger import PendingLimitReached
from supervisor.tools.context import current_call
from supervisor.tools.definition import ToolFailure
from supervisor.tools.local_audit import LEDGER_AUDITED
from supervisor.workers.outcome import Outcome

if TYPE_CHECKING:
    from supervisor.workers.calls import CallHandle

EXIT_FAILED = 1
EXIT_TIMED_OUT = 124
EXIT_INDETERMINATE = 125
EXIT_CANCELLED = 130

Encoder = Callable[[dict[str, Any], "str | None"], Any]
Decoder = Callable[[Any], str]
ExternalCallback = Callable[[dict[str, Any], "str | None"], Awaitable[str]]


def default_encoder(fmt: str) -> Encoder:
    """stdin for a text tool; the parameters (plus ``stdin`` if piped) for a json tool."""

    def encode_text(params: dict[str, Any], stdin: str | None) -> Any:
        if params:
            raise ToolFailure(f"takes its input on stdin, not flags ({sorted(params)})\n", 2)
        return stdin or ""

    def encode_json(params: dict[str, Any], stdin: str | None) -> Any:
        value = dict(params)
        if stdin is not None:
            value.setdefault("stdin", stdin)
        return value

    return encode_json if fmt == "json" else encode_text


def default_decoder(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"


def failure_of(tool: str, outcome: Outcome, deadline: float | None) -> ToolFailure:
    """The `ToolFailure` (message and exit status) for an outcome other than completed."""
    status = outcome.status
    if status == "timed_out":
        limit = f" (deadline {deadline:g} s)" if deadline is not None else ""
        return ToolFailure(f"{tool}: timed out{limit}\n", EXIT_TIMED_OUT)
    if status == "cancelled":
        return ToolFailure(f"{tool}: cancelled\n", EXIT_CANCELLED)
    if status == "indeterminate":
        return ToolFailure(
            f"{tool}: outcome unknown ({outcome.kill_reason}); the effect may or may not "
            "have happened\n",
            EXIT_INDETERMINATE,
        )
    error = (outcome.error or outcome.error_code or "failed").splitlines()[0]
    return ToolFailure(f"{tool}: {error}\n", EXIT_FAILED)


Invoke = Callable[[str, Any, "float | None"], Awaitable[Outcome]]


def build_callback(
    tool: str,
    fmt: str,
    invoke: Invoke,
    *,
    deadline: float | None = None,
    encode: Encoder | None = None,
    decode: Decoder | None = None,
) -> ExternalCallback:
    """A ``(params, stdin) -> str`` callback around any ``invoke(tool, value, deadline)``
    that returns an `Outcome`: input encoding, output decoding and the exit-status table
    live here once, whatever loop or thread the invoke runs in."""
    encoder = encode or default_encoder(fmt)
    decoder = decode or default_decoder

    async def callback(params: dict[str, Any], stdin: str | None) -> str:
        name = _command_name(tool)
        try:
            value = encoder(params, stdin)
        except ToolFailure as failure:
            raise ToolFailure(f"{name}: {failure.message}", failure.exit_code) from None
        try:
            outcome = await invoke(tool, value, deadline)
        except PendingLimitReached as exc:  # the bound local calls share: say so
            why = f"refused, the pending bound is reached ({exc})"
            raise ToolFailure(f"{name}: {why}\n", EXIT_FAILED) from None
        if outcome.status != "completed":
            raise failure_of(name, outcome, deadline)
        return decoder(outcome.value)

    setattr(callback, LEDGER_AUDITED, True)  # each call is a ledger operation already
    return callback


Start = Callable[[str, Any, "float | None"], Coroutine[Any, Any, "CallHandle"]]


def from_any_loop(token: anyio.lowlevel.EventLoopToken, invoke: Invoke, start: Start) -> Invoke:
    """An invoke that works from any thread or event loop, for a supervisor whose own loop
    is ``token``'s: there, ``invoke``; elsewhere, ``start`` the call in that loop and wait
    for it from a worker thread (a cancelled waiter cancels the call there, cooperatively).
    The supervisor hands out its own ``invoke`` and ``start``: nothing here reaches into
    it."""

    async def run(tool: str, value: Any, deadline: float | None) -> Outcome:
        if in_run(token):
            return await invoke(tool, value, deadline)
        return await _invoke_from_elsewhere(start, token, tool, value, deadline)

    return run


def _command_name(tool: str) -> str:
    """The name the script called the tool by, if a tool registry is calling us."""
    try:
        return current_call().name
    except Exception:
        return tool


def in_run(token: anyio.lowlevel.EventLoopToken) -> bool:
    """Whether this thread runs ``token``'s event loop now."""
    try:
        return anyio.lowlevel.current_token() == token
    except Exception:  # no event loop in this thread, or one anyio does not know
        return False


async def _invoke_from_elsewhere(
    start: Start,
    token: anyio.lowlevel.EventLoopToken,
    tool: str,
    value: Any,
    deadline: float | None,
) -> Outcome:
    """From another thread or event loop: start in the supervisor's run, wait in a thread;
    if the waiting caller is cancelled, cancel the call and let it finish there."""
    handle = await anyio.to_thread.run_sync(
        lambda: anyio.from_thread.run(lambda: start(tool, value, deadline), token=token)
    )
    try:
        return await anyio.to_thread.run_sync(
            lambda: anyio.from_thread.run(handle.outcome, token=token),
            abandon_on_cancel=True,
        )
    except BaseException:
        if not handle.done:
            anyio.from_thread.run_sync(handle.request_cancel, token=token)
        raise
