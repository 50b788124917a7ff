"""`HostedSupervisor`, the base of `SyncSupervisor`: a `Supervisor` built in the caller's
thread (so bad arguments fail at once), the `HostThread` that runs it in a trio run of its
own, and the external-tool callbacks for a `ScriptedTool`, which work from any event loop.
(`AsyncioSupervisor` needs no thread: it runs the supervisor on the caller's loop.)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from supervisor.hosting.host_thread import Ended, HostThread, RemoteCall
from supervisor.hosting.mailbox import Mailbox, current_loop_mailbox
from supervisor.hosting.waiting import outcome_of, wait_async
from supervisor.ledger import ToolPolicy
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import Supervisor, SupervisorError
from supervisor.workers.tool_callbacks import Decoder, Encoder, ExternalCallback, build_callback

T = TypeVar("T")


class Result:
    """A job's value, posted to the caller's mailbox."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class HostedSupervisor:
    """Base of `SyncSupervisor` (same arguments as `Supervisor`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._supervisor = Supervisor(*args, **kwargs)
        self._host = HostThread(self._supervisor)
        # a forgotten supervisor is closed when collected, or at interpreter exit
        self._finalizer = weakref.finalize(self, self._host.close)

    @property
    def supervisor(self) -> Supervisor:
        """The trio `Supervisor` itself. It lives in the host thread: touch it only
        there (`call_in_host`), never from the caller's thread."""
        return self._supervisor

    @property
    def running(self) -> bool:
        return self._host.running

    @property
    def tools(self) -> dict[str, ToolPolicy]:
        """The tools the workers serve (fixed once started)."""
        self._check_running()
        return self._supervisor.tools

    @property
    def host_thread(self) -> threading.Thread | None:
        return self._host._thread

    def _check_running(self) -> None:
        if not self._host.running:
            raise SupervisorError(f"the hosted supervisor is {self._host.state}")

    def _check_caller(self) -> None:
        if threading.current_thread() is self._host._thread:
            raise SupervisorError(
                "called from the supervisor's own thread: use the trio Supervisor there"
            )

    def _remote(
        self,
        tool: str,
        value: Any,
        box: Mailbox,
        deadline: float | None,
        idempotency_key: str | None,
        *,
        stream: bool,
        handle: bool = False,
    ) -> RemoteCall:
        self._check_caller()
        call = RemoteCall(
            self._host,
            tool,
            value,
            box,
            deadline=deadline,
            idempotency_key=idempotency_key,
            stream=stream,
            handle=handle,
        )
        self._host.submit(call)
        return call

    def _job(self, fn: Callable[[Supervisor], Awaitable[Any]], box: Mailbox) -> None:
        async def job(sup: Supervisor) -> None:
            box.post(Result(await fn(sup)))

        self._check_caller()
        self._host.spawn(job, box)

    # -- scripts ------------------------------------------------------------------------------

    def tool_callback(
        self,
        tool: str,
        *,
        deadline: float | None = None,
        encode: Encoder | None = None,
        decode: Decoder | None = None,
    ) -> ExternalCallback:
        """An async ``(params, stdin) -> str`` callback for `ScriptedTool.add_tool` that
        runs ``tool`` in this supervisor, from whatever loop runs the script (asyncio,
        trio, or the private loop of ``execute_sync``). Outcomes map to exit statuses as
        in `supervisor.workers.tool_callbacks`; cancelling the script cancels the call
        cooperatively."""
        policy = self.tools.get(tool)
        if policy is None:
            raise ValueError(f"the supervisor has no tool {tool!r}")
        return build_callback(
            tool, policy.format, self._invoke_anywhere,
            deadline=deadline, encode=encode, decode=decode,
        )  # fmt: skip

    async def _invoke_anywhere(self, tool: str, value: Any, deadline: float | None) -> Outcome:
        if threading.current_thread() is self._host._thread:
            return await self._supervisor.invoke(tool, value, deadline=deadline)
        box = current_loop_mailbox()
        call = self._remote(tool, value, box, deadline, None, stream=False)
        end: Ended = await wait_async(box, call, None)
        return outcome_of(end)
