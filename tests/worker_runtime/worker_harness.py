"""A small synchronous test host: a real worker process on fds 3/4, driven by HostConnection.

Plain `subprocess` + `os.pipe`; the child sees the host->worker pipe as fd 3 and the
worker->host pipe as fd 4 (mapped in the child before exec). stdout and stderr are
drained concurrently into bounded buffers, as the real supervisor does.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from supervisor.workers.session_keys import derive_keys, new_session_id, new_session_key
from worker_runtime.protocol.bootstrap import encode_bootstrap
from worker_runtime.protocol.framing import LineReader, Opener, Sealer
from worker_runtime.protocol.host import HostConnection, HostEvent, WorkerReady
from worker_runtime.protocol.messages import Body, Grant, WorkerMessage

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXAMPLES = "worker_runtime.examples:registry"
HOSTILE = "hostile_adapters:registry"
KEEP_BYTES = 1 << 20


def _map_fds(read_end: int, write_end: int, fds: tuple[int, int] = (3, 4)) -> None:
    """In the child, before exec: host->worker becomes fd 3, worker->host fd 4."""
    a = fcntl.fcntl(read_end, fcntl.F_DUPFD_CLOEXEC, 20)
    b = fcntl.fcntl(write_end, fcntl.F_DUPFD_CLOEXEC, 20)
    os.dup2(a, fds[0])  # dup2 targets are inheritable; everything else is CLOEXEC
    os.dup2(b, fds[1])


class _Drain(threading.Thread):
    """Read a diagnostics pipe to EOF, keeping the first KEEP_BYTES and counting the rest."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.kept = bytearray()
        self.total = 0

    def run(self) -> None:
        while True:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.total += len(chunk)
            room = KEEP_BYTES - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
        os.close(self.fd)


def survivors(procs: Iterable[psutil.Process], grace: float = 2.0) -> list[psutil.Process]:
    """Those of ``procs`` still running (zombies count as gone), after up to ``grace`` s."""
    end = time.monotonic() + grace
    while True:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.02)


class WorkerProcess:
    """One worker subprocess and the host side of its session."""

    def __init__(
        self,
        grants: Iterable[Grant] = (),
        *,
        adapters: Sequence[str] = (EXAMPLES,),
        max_in_flight: int = 1,
        args: Sequence[str] | None = None,
        fds: tuple[int, int] = (3, 4),
        session_id: str | None = None,
        session_key: bytes | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.session_id = session_id or new_session_id()
        self.session_key = session_key or new_session_key()
        self.keys = derive_keys(self.session_key)
        self.conn = HostConnection(self.session_id, self.keys, grants, max_in_flight)
        self.reader = LineReader()
        if args is None:
            args = [a for spec in adapters for a in ("--adapters", spec)]
        child_in, self._to_worker = os.pipe()
        self._from_worker, child_out = os.pipe()
        env = {**os.environ, **(env or {})}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "worker_runtime", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=False,
            preexec_fn=lambda: _map_fds(child_in, child_out, fds),
            env=env,
        )
        os.close(child_in)
        os.close(child_out)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = _Drain(os.dup(self.proc.stdout.fileno()))
        self.stderr = _Drain(os.dup(self.proc.stderr.fileno()))
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.stdout.start()
        self.stderr.start()
        self._eof = False
        # raw mode, for what HostConnection refuses to send: use one mode per test
        self.raw = Sealer(self.keys.host, self.session_id)
        self.raw_opener: Opener[WorkerMessage] = Opener(
            self.keys.worker, self.session_id, WorkerMessage
        )

    # -- writing -------------------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        """Write bytes to the worker; False if it is gone (broken pipe)."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._to_worker, view) :]
        except BrokenPipeError:
            return False
        return True

    def bootstrap(self) -> None:
        self.send(encode_bootstrap(self.session_id, self.session_key))

    def handshake(self) -> WorkerReady:
        self.bootstrap()
        self.send(self.conn.open())
        event = self.next_event()
        assert isinstance(event, WorkerReady), event
        return event

    def invoke(self, tool: str, value: Any, **kw: Any) -> str:
        kw.setdefault("idempotency_key", f"key-{self.conn.ids_used + 1}")
        rid, line = self.conn.invoke(tool, value, **kw)
        self.send(line)
        return rid

    def cancel(self, rid: str) -> str:
        cid, line = self.conn.cancel(rid)
        self.send(line)
        return cid

    def close_input(self) -> None:
        """EOF on the worker's fd 3."""
        if self._to_worker >= 0:
            os.close(self._to_worker)
            self._to_worker = -1

    def send_raw(self, kind: type[Body], **fields: Any) -> bytes:
        """Seal a host frame by hand (raw mode), send it, and return it."""
        line = self.raw.seal(kind, **fields)
        self.send(line)
        return line

    def read_raw(self, timeout: float = 10.0) -> WorkerMessage | None:
        """The next worker frame opened without the host state machine (raw mode)."""
        line = self.read_line(timeout)
        return None if line is None else self.raw_opener.open(line)

    # -- reading -------------------------------------------------------------------------

    def read_line(self, timeout: float = 10.0) -> bytes | None:
        """The next raw line from fd 4, or None at EOF; raises TimeoutError."""
        end = time.monotonic() + timeout
        while True:
            line = self.reader.next_line()
            if line is not None:
                return line
            if self._eof:
                return None
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no frame from the worker; stderr: {self.stderr_text()}")
            ready, _, _ = select.select([self._from_worker], [], [], left)
            if ready:
                data = os.read(self._from_worker, 65536)
                if data:
                    self.reader.feed(data)
                else:
                    self.reader.feed_eof()
                    self._eof = True

    def wait_for_output(self, timeout: float = 10.0) -> None:
        """Block until the worker has written something on fd 4 (without reading it)."""
        ready, _, _ = select.select([self._from_worker], [], [], timeout)
        if not ready:
            raise TimeoutError("the worker wrote nothing")

    def next_event(self, timeout: float = 10.0) -> HostEvent | None:
        """Feed lines to the connection until one yields an event; None at EOF."""
        while True:
            line = self.read_line(timeout)
            if line is None:
                return None
            event = self.conn.receive(line)
            if event is not None:
                return event

    def events(self, count: int, timeout: float = 10.0) -> list[HostEvent]:
        out = []
        for _ in range(count):
            event = self.next_event(timeout)
            assert event is not None, f"EOF; stderr: {self.stderr_text()}"
            out.append(event)
        return out

    def read_eof(self, timeout: float = 10.0) -> list[bytes]:
        """Read until EOF on fd 4; the lines that came before it."""
        lines = []
        while (line := self.read_line(timeout)) is not None:
            lines.append(line)
        return lines

    def wait(self, timeout: float = 10.0) -> int:
        """The exit status; the diagnostics drains have then read everything."""
        status = self.proc.wait(timeout)
        self.stdout.join(5)
        self.stderr.join(5)
        return status

    def descendants(self, at_least: int, timeout: float = 10.0) -> list[psutil.Process]:
        """The worker's descendant processes, once there are ``at_least`` of them."""
        end = time.monotonic() + timeout
        while True:
            found: list[psutil.Process] = psutil.Process(self.proc.pid).children(recursive=True)
            if len(found) >= at_least or time.monotonic() > end:
                return found
            time.sleep(0.02)

    def stderr_text(self) -> str:
        return self.stderr.kept.decode(errors="replace")

    # -- teardown ------------------------------------------------------------------------

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close_input()
        if self._from_worker >= 0:
            os.close(self._from_worker)
            self._from_worker = -1
        self.stdout.join(5)
        self.stderr.join(5)

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()
