"""Scripts in a pool of child processes: the hard backstop of ``serve`` and ``mcp``.

In-process, a script's limits hold because every loop spends fuel against its deadline;
a bug nobody found yet (a loop without fuel, a C call that never returns) would still
hold the host's event loop and memory. `ScriptPool.execute` runs the script in a child
(``child.py``) under rlimits instead: the host's loop only moves frames, so ``ping`` and
``cancel`` are answered at once; the tools' callbacks (and ``help``/``discover``) still
run in the host, called back over the pipe. A child that overstays its deadline (the
execution timeout plus its grace plus ``slack``, or the request's ``timeout_ms`` plus
``slack``) is SIGKILLed, reaped by a thread, and replaced; the result is the timeout the
script would have had. A cancelled execution kills its child the same way.

Children start on the host's spawner thread (``PR_SET_PDEATHSIG``: they die with the host),
are reused while they answer cleanly, and keep ``size`` of them warm. A pool given a
``confine`` puts each child in a cgroup of its own as it starts and removes it with the
child (the services' comes from the sandbox's cgroup code, which this package may not
import: ``supervisor.commands.script_cgroup``).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import anyio

from ..contract import CommandResult, ExecResult, ScriptRequest, execution_deadline
from ..errors import LimitExceeded
from ..piped_child import Started, shut, start
from ..text_tools.jq_tool.spawner import host_spawner
from .wire import (
    MAX_FRAME,
    ChildFrame,
    ChildReady,
    Done,
    FrameBuffer,
    Run,
    ToolCall,
    ToolReply,
    WireError,
    decode_child,
    frame,
    from_wire,
    to_wire,
)

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from supervisor.scripted.isolation.child import main; main(sys.argv[2:])"
)
#: A child's address space: the interpreter, its libraries and a script's work. The
#: script's own budget (``max_memory_bytes``) ends it long before.
DEFAULT_MEMORY = 2 << 30
#: How long past its deadline (and grace) a child may take before the host kills it:
#: its own clock checks stop it within about a tenth of a second.
DEFAULT_SLACK = 0.5
#: How long a child may take to start (imports, on a loaded machine)
START_TIMEOUT = 20.0
#: How long an execution waits between looks for a free child (all are busy).
_SLOT_POLL = 0.002
#: The first and the longest look at a child being started (it takes some milliseconds).
_SPAWN_POLL = 0.001
_SPAWN_POLL_MAX = 0.01
_DIAGNOSTICS = 1 << 16


#: Puts a just-started child (its pid) in a cgroup of its own and returns what removes
#: that cgroup once the child is reaped (killing whatever is left in it: the child's own
#: jq engines). The services pass one made from the sandbox's cgroup code
#: (``supervisor.commands.script_cgroup``); None: the children have their rlimits only.
Confine = Callable[[int], Callable[[], None]]


class ChildGone(Exception):
    """The child died or broke the protocol; ``message`` says how."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _start(memory_bytes: int, confine: Confine | None) -> tuple[Started, Callable[[], None]]:
    """Fork the child (on the spawner thread) and confine it before it has read a script;
    a child that cannot be confined is shut (fail closed)."""
    started = start(BOOTSTRAP, memory_bytes)
    if confine is None:
        return started, _nothing
    try:
        return started, confine(started[0].pid)
    except BaseException:
        proc, *fds = started
        shut(proc, tuple(fds))
        raise


def _nothing() -> None:
    pass


def _end(proc: subprocess.Popen[bytes], fds: tuple[int, ...], release: Callable[[], None]) -> None:
    """SIGKILL, reap, close our ends, then remove the child's cgroup (the finaliser's
    function: once)."""
    shut(proc, fds)
    release()


async def start_child(memory_bytes: int, confine: Confine | None = None) -> ScriptChild:
    """A new child, forked on the host's spawner thread.

    The wait for the spawner is a poll on a timer, not a wake-up from its thread: a
    wake-up through the event loop's self-pipe was once lost in CI and left an execution
    waiting forever. A cancelled wait leaves nothing behind: the child, once started, is
    killed and reaped. A start that takes longer than ``START_TIMEOUT`` or fails (no fds,
    no processes left) is a `ChildGone`, which the execution answers as an error."""
    future = host_spawner().submit(lambda: _start(memory_bytes, confine))
    delay = _SPAWN_POLL
    try:
        with anyio.move_on_after(START_TIMEOUT):
            while not future.done():
                await anyio.sleep(delay)
                delay = min(delay * 2, _SPAWN_POLL_MAX)
        if not future.done():
            raise ChildGone(f"the script's process did not start within {START_TIMEOUT:g} s")
    except BaseException:
        future.add_done_callback(_end_started)
        raise
    try:
        return ScriptChild(*future.result())
    except Exception as exc:  # no fds, no processes, no cgroup: the execution's error
        raise ChildGone(f"the script's process could not start ({exc})") from None


def _end_started(future: concurrent.futures.Future[tuple[Started, Callable[[], None]]]) -> None:
    """A start nobody waits for any more: end its child once it is there."""
    if not future.cancelled() and future.exception() is None:
        (proc, *fds), release = future.result()
        _end(proc, tuple(fds), release)


class ScriptChild:
    """One child process and the host's non-blocking ends of its pipes."""

    def __init__(self, started: Started, release: Callable[[], None] = _nothing) -> None:
        proc, self.req_w, self.rep_r, self._diag_r = started
        self.proc = proc
        self.pid = proc.pid
        self.ready = False
        self._buffer = FrameBuffer(MAX_FRAME)
        fds = (self.req_w, self.rep_r, self._diag_r)
        self._shut = weakref.finalize(self, _end, proc, fds, release)

    def alive(self) -> bool:
        return self._shut.alive and self.proc.poll() is None

    def stop(self) -> None:
        """SIGKILL now; ``kill`` reaps."""
        if self._shut.alive and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)

    def kill(self) -> None:
        self._shut()

    def diagnostics(self) -> str:
        if not self._shut.alive:  # closed: the fd number may be another file's by now
            return ""
        with contextlib.suppress(OSError):
            return os.read(self._diag_r, _DIAGNOSTICS).decode("utf-8", "replace").strip()
        return ""

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.req_w, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.req_w)
            except BrokenPipeError:
                raise self._gone() from None

    async def receive(self) -> ChildFrame:
        buffer = self._buffer
        while True:
            try:
                body = buffer.next_frame()
                if body is not None:
                    return decode_child(body)
            except WireError as exc:
                raise ChildGone(f"the script's process broke the protocol ({exc})") from None
            try:
                data = os.read(self.rep_r, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self.rep_r)
                continue
            if not data:
                raise self._gone()
            buffer.feed(data)

    def _gone(self) -> ChildGone:
        status = self.proc.wait()
        how = f"signal {-status}" if status < 0 else f"status {status}"
        said = self.diagnostics()
        return ChildGone(f"the script's process died ({how}){': ' + said if said else ''}")


class ScriptPool:
    """Child processes that run scripts (see the module docstring)."""

    def __init__(
        self,
        *,
        size: int = 2,
        max_children: int = 16,
        memory_bytes: int = DEFAULT_MEMORY,
        slack: float = DEFAULT_SLACK,
        confine: Confine | None = None,
    ) -> None:
        if size < 0 or max_children < max(size, 1):
            raise ValueError("a script pool needs 0 <= size <= max_children, max_children >= 1")
        self.size = size
        self.max_children = max_children
        self.memory_bytes = memory_bytes
        self.slack = slack
        self.confine = confine
        self._lock = threading.Lock()
        self._idle: list[ScriptChild] = []
        self._busy: set[ScriptChild] = set()
        self._reapers: set[threading.Thread] = set()
        self._closed = False
        _import_host_side()

    # ------------------------------------------------------------------ children

    def children(self) -> list[int]:
        """The pids of the children not yet reaped."""
        with self._lock:
            return [c.pid for c in (*self._idle, *self._busy) if c.proc.poll() is None]

    async def warm(self) -> None:
        """Start children until ``size`` are idle (a service calls it at start)."""
        while True:
            with self._lock:
                if self._closed or len(self._idle) + len(self._busy) >= self.size:
                    return
            child = await start_child(self.memory_bytes, self.confine)
            with self._lock:
                self._idle.append(child)

    async def _take(self) -> ScriptChild:
        while True:
            with self._lock:
                if self._closed:
                    raise ChildGone("the script pool is closed")
                while self._idle:
                    child = self._idle.pop()
                    if child.alive():
                        self._busy.add(child)
                        return child
                    self._reap_later(child)
                room = len(self._busy) + len(self._reapers) < self.max_children
            if room:
                child = await start_child(self.memory_bytes, self.confine)
                with self._lock:
                    self._busy.add(child)
                return child
            await anyio.sleep(_SLOT_POLL)

    def _give_back(self, child: ScriptChild) -> None:
        with self._lock:
            self._busy.discard(child)
            if not self._closed:
                self._idle.append(child)
                return
        child.kill()

    def _discard(self, child: ScriptChild) -> None:
        """Kill now; a thread of the pool reaps it (a large child takes a while to go)."""
        child.stop()
        with self._lock:
            self._busy.discard(child)
            self._reap_later(child)

    def _reap_later(self, child: ScriptChild) -> None:
        reaper = threading.Thread(target=self._reap, args=(child,), name="script-reap")
        reaper.daemon = True
        self._reapers.add(reaper)
        reaper.start()

    def _reap(self, child: ScriptChild) -> None:
        try:
            child.kill()
        finally:
            with self._lock:
                self._reapers.discard(threading.current_thread())

    def close(self) -> None:
        """Kill the idle children now, the busy ones when their execution ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()
        with self._lock:
            reapers = list(self._reapers)
        for reaper in reapers:
            reaper.join()

    # ------------------------------------------------------------------ executions

    async def execute(self, request: ScriptRequest) -> ExecResult:
        """``run_script(request)`` in a child; the commands in ``request.overrides``
        (the tools, ``help``, ``discover``) are called back here, the rest of the table
        must be the text tools, which the child has itself."""
        from ..shell.exec_context import duration_debug
        from ..shell.execution import abort_result, grace, timeout_result

        start = time.monotonic()
        limits = request.limits
        request_deadline = (
            None
            if request.request_timeout_seconds is None
            else start + request.request_timeout_seconds
        )
        try:
            child = await self._take()
        except ChildGone as exc:
            return abort_result(f"execution error: {exc.message}")
        clean = False
        try:
            if not child.ready:
                await _wait_ready(child)
            sent = time.monotonic()
            stop = sent + limits.timeout_seconds + grace(limits.timeout_seconds) + self.slack
            if request_deadline is not None:
                stop = min(stop, request_deadline + self.slack)
            token = execution_deadline.set(sent + limits.timeout_seconds)
            try:
                with anyio.move_on_after(max(0.0, stop - time.monotonic())):
                    done = await self._converse(child, request, request_deadline)
                    clean = True
                    return done
            finally:
                execution_deadline.reset(token)
            if request_deadline is not None and time.monotonic() >= request_deadline:
                return timeout_result(request.request_timeout_seconds or 0.0)
            timeout = duration_debug(limits.timeout_seconds)
            return abort_result(LimitExceeded(f"execution timeout ({timeout})").message)
        except ChildGone as exc:
            return abort_result(f"execution error: {exc.message}")
        finally:
            if clean:
                self._give_back(child)
            else:
                self._discard(child)

    async def _converse(
        self, child: ScriptChild, request: ScriptRequest, request_deadline: float | None
    ) -> ExecResult:
        timeout = None if request_deadline is None else max(request_deadline - time.monotonic(), 0)
        limits = {
            f.name: getattr(request.limits, f.name) for f in dataclasses.fields(request.limits)
        }
        await child.send(
            frame(
                Run(
                    to_wire(request.script),
                    {k: to_wire(v) for k, v in request.env.items()},
                    limits,
                    timeout,
                    sorted(request.overrides),
                )
            )
        )
        try:
            async with anyio.create_task_group() as calls:
                while True:
                    message = await child.receive()
                    if isinstance(message, Done):
                        calls.cancel_scope.cancel()
                        return ExecResult(
                            stdout=from_wire(message.stdout),
                            stderr=from_wire(message.stderr),
                            exit_code=message.exit_code,
                            error=message.error,
                            stdout_truncated=message.stdout_truncated,
                            stderr_truncated=message.stderr_truncated,
                        )
                    if isinstance(message, ToolCall):
                        calls.start_soon(self._answer, child, request, message)
                    else:
                        raise ChildGone("the script's process broke the protocol (ready twice)")
        except BaseExceptionGroup as group:
            gone, rest = group.split(ChildGone)
            if gone is None or rest is not None:
                raise
            raise _leaf(gone) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer(self, child: ScriptChild, request: ScriptRequest, call: ToolCall) -> None:
        result = await _call_command(request, call)
        reply = ToolReply(
            call.call, to_wire(result.stdout), to_wire(result.stderr), result.exit_code
        )
        await child.send(frame(reply))


async def _call_command(request: ScriptRequest, call: ToolCall) -> CommandResult:
    """One command of the host's table, as the interpreter would call it."""
    import inspect

    command = request.commands.get(call.name) if call.name in request.overrides else None
    if command is None:
        return CommandResult("", f"bash: {call.name}: command not found\n", 127)
    args = [from_wire(a) for a in call.args]
    stdin = None if call.stdin is None else from_wire(call.stdin)
    try:
        result: Any = command(args, stdin)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # a command must not take the host down
        return CommandResult("", f"{call.name}: {type(exc).__name__}: command failed\n", 1)
    if not isinstance(result, CommandResult):
        return CommandResult("", f"{call.name}: command returned no result\n", 1)
    return result


def _leaf(group: BaseExceptionGroup[ChildGone]) -> ChildGone:
    first = group.exceptions[0]
    return first if isinstance(first, ChildGone) else _leaf(first)


async def _wait_ready(child: ScriptChild) -> None:
    with anyio.move_on_after(START_TIMEOUT):
        if not isinstance(await child.receive(), ChildReady):
            raise ChildGone("the script's process broke the protocol (no ready frame)")
        child.ready = True
        return
    raise ChildGone(f"the script's process did not start within {START_TIMEOUT:g} s")


def _import_host_side() -> None:
    """Import now what the host's side of an execution imports on first use (the
    interpreter's result helpers, the text tools' table of ``ScriptedTool``): a second
    of imports on a loaded machine, which a service's first script would otherwise spend
    on its event loop, unanswered pings included."""
    from .. import tool_commands  # noqa: F401
    from ..shell import execution  # noqa: F401
    from ..text_tools import TEXT_COMMANDS  # noqa: F401


_default: ScriptPool | None = None
_default_lock = threading.Lock()


def default_script_pool(confine: Confine | None = None) -> ScriptPool:
    """This process's pool (closed at exit: its children are killed and reaped); the
    call that makes it gives its ``confine``."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ScriptPool(confine=confine)
            atexit.register(_default.close)
        return _default
