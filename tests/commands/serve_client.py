"""A host for `sandvisor serve` written with the standard library only (subprocess, json,
socket, threading): proof that a program in any language can drive the service.

It imports nothing of sandvisor. Run as a script it plays one session and prints a JSON
summary::

    python -I -S serve_client.py -- sandvisor serve

(``-I -S``: no site-packages, no current directory, so an accidental import of sandvisor
would fail.) The tests also import `ServeClient` to drive scenarios step by step.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

DEFAULT_TIMEOUT = 20.0


class ServeClient:
    """One session: send requests, read events (each read has a timeout)."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._writer = writer
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, args=(reader,), daemon=True)
        self._reader.start()
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr: list[str] = []
        self.closed = False
        #: Every event read, in order (for checking them against the schema).
        self.seen: list[dict[str, Any]] = []

    @classmethod
    def spawn(cls, argv: list[str], env: dict[str, str] | None = None) -> ServeClient:
        """Start ``argv`` (a `sandvisor serve` command) and talk to it over its stdio."""
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        client = cls(process.stdout, process.stdin)  # type: ignore[arg-type]
        client.process = process
        threading.Thread(target=client._drain_stderr, daemon=True).start()
        return client

    @classmethod
    def connect(cls, path: str) -> ServeClient:
        """Connect to ``sandvisor serve --socket PATH``."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        client = cls(sock.makefile("rb"), sock.makefile("wb"))
        client._socket = sock  # type: ignore[attr-defined]
        return client

    def _read(self, reader: BinaryIO) -> None:
        for line in reader:
            self._events.put(json.loads(line))
        self._events.put(None)

    def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    # -- sending -------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self._writer.write(data)
        self._writer.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, op: str, **fields: Any) -> Any:
        """Send ``{"op": op, "id": <fresh>, **fields}``; returns the id."""
        self._next_id += 1
        request_id = fields.pop("id", f"r{self._next_id}")
        self.send({"op": op, "id": request_id, **fields})
        return request_id

    # -- reading -------------------------------------------------------------------------------

    def next(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no event within {timeout} s") from None
        if event is None:
            self.closed = True
            self._events.put(None)
            raise EOFError("the service closed its output")
        self.seen.append(event)
        return event

    def until(
        self, request_id: Any, kinds: tuple[str, ...], timeout: float = DEFAULT_TIMEOUT
    ) -> list[dict[str, Any]]:
        """Events for ``request_id`` up to and including one whose kind is in ``kinds``;
        events for other requests are set aside (`others`)."""
        limit = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            event = self.next(max(0.01, limit - time.monotonic()))
            if event.get("id") != request_id:
                self.others.append(event)
                continue
            seen.append(event)
            if event["event"] in kinds:
                return seen

    @property
    def others(self) -> list[dict[str, Any]]:
        if not hasattr(self, "_others"):
            self._others: list[dict[str, Any]] = []
        return self._others

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request and its one answer (any event for its id)."""
        request_id = self.request(op, **fields)
        return self.until(request_id, ("ready", "ok", "pong", "pending", "reconciled",
                                       "result", "error", "bye", "outcome"))[-1]  # fmt: skip

    def invoke(self, tool: str, value: Any, **fields: Any) -> list[dict[str, Any]]:
        """An invoke's events, through its outcome (or error)."""
        request_id = self.request("invoke", tool=tool, input=value, **fields)
        return self.until(request_id, ("outcome", "error"))

    # -- the end -------------------------------------------------------------------------------

    def close_input(self) -> None:
        self._writer.close()

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        assert self.process is not None
        return self.process.wait(timeout)


def main(argv: list[str]) -> int:
    """Play one session against ``argv`` and print what happened, as JSON."""
    client = ServeClient.spawn(argv)
    summary: dict[str, Any] = {}
    ready = client.call("hello", adapters=["worker_runtime.examples:registry"], pool_size=1)
    summary["ready"] = ready["event"]
    summary["tools"] = [t["name"] for t in ready.get("tools", [])]
    events = client.invoke("progress.count", "3")
    summary["chunks"] = [e["text"] for e in events if e["event"] == "chunk"]
    summary["outcome"] = events[-1]["outcome"]["status"]
    running = client.request("invoke", tool="sleep", input="30", started=True)
    client.until(running, ("started",))
    client.call("cancel", target=running)
    summary["cancelled"] = client.until(running, ("outcome",))[-1]["outcome"]["status"]
    summary["bye"] = client.call("shutdown")["event"]
    summary["exit"] = client.wait()
    print(json.dumps(summary))
    return 0 if summary["exit"] == 0 else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    raise SystemExit(main(args))
