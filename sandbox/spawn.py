"""Starting a `LaunchPlan`: for the calling thread, or for a `Spawner`'s own thread.

Which thread a sandbox belongs to matters. ``PR_SET_PDEATHSIG`` (ours and bwrap's
``--die-with-parent``) fires when the parent *thread* exits, not the process (bwrap
#692). Sandboxes are forked by a fork server (`sandbox.forkserver`) as children of the
thread that owns the server, exactly as if that thread had forked them itself. So:

- `spawn` uses the calling thread's own fork server: right for synchronous code that
  waits for the sandbox on the same thread (`run`, `sandvisor exec`). If that thread
  exits, the sandbox dies with it. The server starts with the thread's first sandbox
  (a fresh interpreter: ~20 ms, once) and stays for the next ones.
- `Spawner` owns one thread for as long as it is open, with its fork server, and every
  sandbox it starts belongs to that thread. Async hosts must use it:
  ``trio.lowlevel.open_process`` forks from trio's thread cache, whose idle threads exit
  after 10 seconds and take the sandbox with them (measured here: a sandbox started that
  way was SIGKILLed 10.0 s later). Closing the spawner ends its thread, which kills
  whatever it started that is still running: a backstop, on top of the host's own
  teardown and of the host's death taking everything with it.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from . import cgroup_pool, forkserver, lifeline
from .errors import LaunchError
from .forkserver import ForkServer, Stdio
from .handle import Sandbox
from .launch import LaunchPlan, warm_up
from .lifeline import track

if TYPE_CHECKING:
    import concurrent.futures

T = TypeVar("T")


def spawn(
    plan: LaunchPlan,
    *,
    stdin: Stdio = subprocess.DEVNULL,
    stdout: Stdio = None,
    stderr: Stdio = None,
) -> Sandbox:
    """Start the plan for the calling thread; the sandbox dies if this thread exits.

    ``stdin``/``stdout``/``stderr`` are as for `subprocess.Popen` (``PIPE`` gives file
    objects on ``sandbox.popen``). A failure of our own pre-exec set-up, or of bwrap's
    exec, raises `LaunchError` with the reason, after releasing everything the plan held.
    """
    return start(plan, forkserver.of_this_thread(), stdin=stdin, stdout=stdout, stderr=stderr)


def start(
    plan: LaunchPlan,
    server: ForkServer,
    *,
    stdin: Stdio = subprocess.DEVNULL,
    stdout: Stdio = None,
    stderr: Stdio = None,
) -> Sandbox:
    """Start the plan through ``server`` (from the thread that owns it)."""
    plan.claim()
    try:
        process = server.spawn(plan, stdin=stdin, stdout=stdout, stderr=stderr)
    except BaseException as exc:
        plan.abort()
        if isinstance(exc, OSError):
            raise LaunchError(f"cannot start the sandbox: {exc}") from exc
        raise
    plan.started()
    sandbox = Sandbox(plan, process)
    track(sandbox)
    return sandbox


def retire() -> bool:
    """With no sandbox left in this process: remove the warm cgroups, end the lifeline
    and stop the idle fork servers of every thread (each starts again with its thread's
    next sandbox), so nothing of sandvisor stays open. True if nothing was left running."""
    if lifeline.users() > cgroup_pool.ready():
        return False  # sandboxes remain (of another spawner or thread): keep everything
    cgroup_pool.drain()
    if not lifeline.retire():
        return False
    forkserver.stop_idle()
    return True


class Spawner:
    """A thread that every sandbox is forked from, alive while the spawner is open.

    Use as a context manager (or `start`/`close`). `spawn` is safe from any thread;
    `spawn_async` awaits it from trio without blocking the event loop.
    """

    def __init__(self, name: str = "sandvisor-spawner") -> None:
        self._name = name
        self._server: ForkServer | None = None  # created by, and owned by, the thread
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], concurrent.futures.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> Spawner:
        with self._lock:
            if self._closed:
                raise LaunchError("spawner is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
        return self

    def _serve(self) -> None:
        server = self._server = ForkServer()
        with contextlib.suppress(LaunchError, OSError):
            server.start()  # now, so the first sandbox need not wait (a failure recurs there)
        try:
            while (job := self._jobs.get()) is not None:
                fn, future = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn())
                except BaseException as exc:
                    future.set_exception(exc)
                if self._jobs.empty():
                    warm_up()  # the next sandbox's cgroups, while nothing else is asked
        finally:
            server.close()

    def _call(self, fn: Callable[[], T]) -> T:
        import concurrent.futures  # here: `sandvisor exec` never needs it

        if threading.current_thread() is self._thread:
            return fn()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed or self._thread is None:
                raise LaunchError("spawner is not running (use it as a context manager)")
            self._jobs.put((fn, future))
        return future.result()

    def spawn(
        self,
        plan: LaunchPlan,
        *,
        stdin: Stdio = subprocess.DEVNULL,
        stdout: Stdio = None,
        stderr: Stdio = None,
    ) -> Sandbox:
        """Start the plan for the spawner's thread (blocks the caller for the fork)."""
        return self._call(lambda: self._start(plan, stdin, stdout, stderr))

    def _start(self, plan: LaunchPlan, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Sandbox:
        assert self._server is not None  # set by the thread before it takes any job
        return start(plan, self._server, stdin=stdin, stdout=stdout, stderr=stderr)

    async def spawn_async(
        self,
        plan: LaunchPlan,
        *,
        stdin: Stdio = subprocess.DEVNULL,
        stdout: Stdio = None,
        stderr: Stdio = None,
    ) -> Sandbox:
        """`spawn` from trio or asyncio, in a worker thread. Never abandoned: the sandbox
        is returned once started, so the caller can put it in its ``finally``; if the
        caller is cancelled while the spawn runs (asyncio can cancel any await), the
        spawn is awaited to its end and the new sandbox killed and cleaned up before the
        cancellation goes on, so none is ever orphaned."""
        import sniffio

        def spawn() -> Sandbox:
            return self.spawn(plan, stdin=stdin, stdout=stdout, stderr=stderr)

        if sniffio.current_async_library() == "asyncio":
            return await _spawn_through_cancellation(spawn)
        import anyio.to_thread

        return await anyio.to_thread.run_sync(spawn)  # trio: not cancellable meanwhile

    def close(self) -> None:
        """End the thread and its fork server. Sandboxes it started that still run are
        SIGKILLed by it; with no sandbox left in the process, the lifeline and the idle
        fork servers are retired too (no fd stays open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        retire()

    def __enter__(self) -> Spawner:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def _spawn_through_cancellation(spawn: Callable[[], Sandbox]) -> Sandbox:
    """asyncio: ``spawn()`` in the loop's executor; a cancellation of the caller waits for
    the spawn, takes its sandbox down, then propagates."""
    import asyncio

    future = asyncio.get_running_loop().run_in_executor(None, spawn)
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as exc:
            cancelled = exc
        except BaseException:
            break  # the spawn failed: the future holds why
    if cancelled is None:
        return future.result()
    if not future.cancelled() and future.exception() is None:
        sandbox = future.result()  # started for a caller that is gone: take it down
        sandbox.kill("cancelled")
        sandbox.cleanup()
    raise cancelled
