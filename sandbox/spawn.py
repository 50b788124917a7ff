"""Starting a `LaunchPlan`: from the calling thread, or from a `Spawner`'s own thread.

Which thread forks matters. ``PR_SET_PDEATHSIG`` (ours and bwrap's ``--die-with-parent``)
fires when the parent *thread* exits, not the process (bwrap #692). So:

- `spawn` forks from the calling thread: right for synchronous code that waits for the
  sandbox on the same thread (`run`, `sandvisor exec`). If that thread exits, the
  sandbox dies with it.
- `Spawner` owns one thread for as long as it is open and forks every sandbox from it.
  Async hosts must use it: ``trio.lowlevel.open_process`` forks from trio's thread cache,
  whose idle threads exit after 10 seconds and take the sandbox with them (measured here:
  a sandbox started that way was SIGKILLed 10.0 s later). Closing the spawner ends its
  thread, which kills whatever it started that is still running: a backstop, on top of
  the host's own teardown and of the host's death taking everything with it.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Callable
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar

from . import lifeline
from .errors import LaunchError
from .handle import Sandbox
from .launch import LaunchPlan
from .lifeline import track

if TYPE_CHECKING:
    import concurrent.futures

Stdio = int | IO[Any] | None
T = TypeVar("T")


def spawn(
    plan: LaunchPlan,
    *,
    stdin: Stdio = subprocess.DEVNULL,
    stdout: Stdio = None,
    stderr: Stdio = None,
) -> Sandbox:
    """Start the plan from the calling thread; the sandbox dies if this thread exits.

    ``stdin``/``stdout``/``stderr`` are as for `subprocess.Popen` (``PIPE`` gives file
    objects on ``sandbox.popen``). A failure of our own pre-exec set-up, or of bwrap's
    exec, raises `LaunchError` with the reason, after releasing everything the plan held.
    """
    kwargs = plan.popen_kwargs()
    try:
        popen = subprocess.Popen(plan.argv, stdin=stdin, stdout=stdout, stderr=stderr, **kwargs)
    except BaseException as exc:
        detail = plan.setup_error()
        plan.abort()
        if detail is not None:
            raise LaunchError(f"sandbox set-up failed in the child: {detail}") from None
        if isinstance(exc, (OSError, subprocess.SubprocessError)):
            raise LaunchError(f"cannot start bwrap: {exc}") from exc
        raise
    plan.started()
    sandbox = Sandbox(plan, popen)
    track(sandbox)
    return sandbox


class Spawner:
    """A thread that every sandbox is forked from, alive while the spawner is open.

    Use as a context manager (or `start`/`close`). `spawn` is safe from any thread;
    `spawn_async` awaits it from trio without blocking the event loop.
    """

    def __init__(self, name: str = "sandvisor-spawner") -> None:
        self._name = name
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
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

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
        """Start the plan from the spawner's thread (blocks the caller for the fork)."""
        return self._call(lambda: spawn(plan, stdin=stdin, stdout=stdout, stderr=stderr))

    async def spawn_async(
        self,
        plan: LaunchPlan,
        *,
        stdin: Stdio = subprocess.DEVNULL,
        stdout: Stdio = None,
        stderr: Stdio = None,
    ) -> Sandbox:
        """`spawn` from trio. Not abandoned on cancellation: the sandbox is always
        returned once started, so the caller can put it in its ``finally`` at once."""
        import trio

        return await trio.to_thread.run_sync(
            lambda: self.spawn(plan, stdin=stdin, stdout=stdout, stderr=stderr)
        )

    def close(self) -> None:
        """End the thread. Sandboxes it started that still run are SIGKILLed by it; with
        no sandbox left in the process, the lifeline is retired too (no fd stays open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        lifeline.retire()

    def __enter__(self) -> Spawner:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
