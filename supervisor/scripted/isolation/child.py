"""A script child: runs one script at a time for the host, under rlimits.

Started by ``pool.py`` as ``python -I -B -c BOOTSTRAP ...`` with an empty environment,
``/`` as its directory, a session of its own, requests on fd 0, frames to the host on the
fd named in its arguments and fds 1 and 2 on a diagnostics pipe. It ties its life to the
host's (``PR_SET_PDEATHSIG``), takes its limits (``RLIMIT_AS``, no core dumps, few fds),
says `ChildReady`, then runs each `Run` with the text tools at home and every command the
host keeps (tools, ``help``, ``discover``) as a `ToolCall` answered by a `ToolReply`. It
holds nothing between runs and exits on end of input; the host kills it when a run
overstays its deadline, whatever it is doing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import sys
from collections.abc import Awaitable, Callable

import trio

from ..contract import CommandResult, ExecutionLimits, ScriptRequest
from ..text_tools.jq_tool.child import _die_with_host
from .wire import (
    MAX_FRAME,
    ChildReady,
    Done,
    FrameBuffer,
    Run,
    ToolCall,
    ToolReply,
    decode_host,
    frame,
    from_wire,
    to_wire,
)

#: descriptors a child may hold: its pipes and its jq engines' (three each)
MAX_FILES = 256


def limit(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (MAX_FILES, MAX_FILES))


class Child:
    """The child's side of the pipes: frames out (one writer at a time), replies in."""

    def __init__(self, requests: int, replies: int) -> None:
        self.inbox = trio.lowlevel.FdStream(requests)
        self.outbox = trio.lowlevel.FdStream(replies)
        self.send_lock = trio.Lock()
        self.waiting: dict[int, tuple[trio.Event, list[ToolReply]]] = {}
        self.ids = itertools.count(1)
        self.runs_send, self.runs = trio.open_memory_channel[Run](1)

    async def send(self, message: ChildReady | ToolCall | Done) -> None:
        data = frame(message)
        async with self.send_lock:
            await self.outbox.send_all(data)

    async def read(self) -> None:
        """Frames from the host until it closes the pipe: runs to the runner, replies to
        the calls waiting for them."""
        buffer = FrameBuffer(MAX_FRAME)
        async with self.runs_send:
            while True:
                data = await self.inbox.receive_some(1 << 16)
                if not data:
                    return
                buffer.feed(data)
                while (body := buffer.next_frame()) is not None:
                    message = decode_host(body)
                    if isinstance(message, Run):
                        await self.runs_send.send(message)
                    else:
                        event, slot = self.waiting.pop(message.call)
                        slot.append(message)
                        event.set()

    def remote(self, name: str) -> Callable[[list[str], str | None], Awaitable[CommandResult]]:
        async def call(args: list[str], stdin: str | None) -> CommandResult:
            number = next(self.ids)
            event = trio.Event()
            slot: list[ToolReply] = []
            self.waiting[number] = (event, slot)
            wire_stdin = None if stdin is None else to_wire(stdin)
            try:
                await self.send(ToolCall(number, name, [to_wire(a) for a in args], wire_stdin))
                await event.wait()
            finally:
                self.waiting.pop(number, None)
            reply = slot[0]
            return CommandResult(from_wire(reply.stdout), from_wire(reply.stderr), reply.status)

        return call

    async def run(self, message: Run) -> Done:
        from ..shell.execution import run_script
        from ..text_tools import TEXT_COMMANDS

        table: dict[str, object] = dict(TEXT_COMMANDS)
        for name in message.remote:
            table[name] = self.remote(name)
        request = ScriptRequest(
            script=from_wire(message.script),
            commands=table,  # type: ignore[arg-type]
            env={k: from_wire(v) for k, v in message.env.items()},
            limits=ExecutionLimits(**message.limits),  # type: ignore[arg-type]
            overrides=frozenset(message.remote),
            request_timeout_seconds=message.request_timeout,
        )
        result = await run_script(request)
        return Done(
            to_wire(result.stdout),
            to_wire(result.stderr),
            result.exit_code,
            result.error,
            result.stdout_truncated,
            result.stderr_truncated,
        )

    async def serve(self) -> None:
        await self.send(ChildReady(os.getpid()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.read)
            async with self.runs:
                async for message in self.runs:
                    await self.send(await self.run(message))
            nursery.cancel_scope.cancel()


def main(argv: list[str]) -> None:
    host, replies, memory_bytes = int(argv[0]), int(argv[1]), int(argv[2])
    _die_with_host(host)
    limit(memory_bytes)
    # warm the imports a first run would pay for
    from ..shell import execution  # noqa: F401
    from ..text_tools import TEXT_COMMANDS  # noqa: F401

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    with contextlib.suppress(BrokenPipeError, trio.BrokenResourceError, trio.ClosedResourceError):
        trio.run(Child(0, replies).serve)  # ends when the host closes the pipe (or dies)
    os._exit(0)
