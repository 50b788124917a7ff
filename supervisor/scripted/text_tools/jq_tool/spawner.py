"""The thread every jq engine child is forked from.

``PR_SET_PDEATHSIG`` fires when the parent *thread* exits, not the process: a child
forked from a caller's thread (``execute_sync``'s private thread, a thread pool worker)
would be killed when that thread ends. So children are forked from this one thread,
which lives as long as the host process (it is a daemon thread blocked on its queue,
stopped at exit after the children are gone). When the host dies, however it dies, the
thread goes with it and every child gets its SIGKILL.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[Callable[[], Any], "concurrent.futures.Future[Any]"]


class Spawner:
    """Runs callables (``subprocess.Popen``) on its own long-lived thread."""

    def __init__(self, name: str = "sandvisor-jq-spawner") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """``fn()`` queued for the spawner thread; the future of its result (wait for it
        with a timeout: ``piped_child.start_waiting``)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()
            self._jobs.put((fn, future))
        return future

    def stop(self) -> None:
        """End the thread (its children get SIGKILL: stop them first)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)


_spawner: Spawner | None = None
_spawner_lock = threading.Lock()


def host_spawner() -> Spawner:
    """This process's spawner."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = Spawner()
        return _spawner


def _after_fork_in_child() -> None:
    """Threads do not survive fork: a forked host starts its own spawner when needed."""
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
