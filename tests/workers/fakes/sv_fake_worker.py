"""A protocol worker that misbehaves on purpose: ``python sv_fake_worker.py MODE``.

It is a separate program reached through ``worker_argv`` (the any-language path). It
answers the bootstrap and ``open`` correctly (using the reference codec), serves the tool
``fake`` (text), then, on the first ``invoke``, does what MODE says:

- ``ok``: answers every call with its input reversed (a well-behaved peer).
- ``garbage``: a line that is not a frame.
- ``forged``: a result sealed with a key it made up (the MAC fails).
- ``replay``: its ``ready`` frame again (a replayed, out-of-sequence frame).
- ``unknown_rid``: an authentic result for a request id that was never sent.
- ``chunk_after_result``: an authentic result, then a chunk for the same request.
- ``half_frame``: half of an authentic result line, then silence.
- ``endless``: bytes without a line feed, past the 1 MiB frame limit.
- ``no_read``: stops reading its input pipe right after ``ready``.
- ``exit``: exits with status 7 in the middle of the call.
- ``durable``: answers calls; its ``reconcile`` answers ``succeeded`` for any key, as a
  worker with durable memory would; the call whose input is ``die`` makes it exit.
"""

from __future__ import annotations

import os
import sys
import time

from worker_runtime.protocol.bootstrap import read_bootstrap
from worker_runtime.protocol.framing import LineReader, Sealer
from worker_runtime.protocol.keys import derive_keys
from worker_runtime.protocol.messages import Chunk, Reconciled, Result, Succeeded, TextPayload
from worker_runtime.protocol.worker import (
    CancelReceived,
    CloseReceived,
    InvokeReceived,
    Opened,
    PingReceived,
    ReconcileReceived,
    WorkerConnection,
)

FD_IN, FD_OUT = 3, 4


def write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(FD_OUT, view) :]


def read_exact(n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(FD_IN, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def stall() -> None:
    while True:
        time.sleep(1)


def main(mode: str) -> int:
    boot = read_bootstrap(read_exact)
    conn = WorkerConnection(boot.session_id, derive_keys(boot.session_key), {"fake": "text"})
    sealer: Sealer = conn._sealer  # the same counter, for frames the codec would refuse
    reader = LineReader()
    ready_line = b""
    while True:
        line = reader.next_line()
        if line is None:
            data = os.read(FD_IN, 65536)
            if not data:
                return 0
            reader.feed(data)
            continue
        event = conn.receive(line)
        if isinstance(event, Opened):
            ready_line = conn.ready("sv-fake", "1")
            write(ready_line)
            if mode == "no_read":
                stall()
        elif isinstance(event, PingReceived):
            write(conn.pong(event.nonce))
        elif isinstance(event, CloseReceived):
            return 0
        elif isinstance(event, CancelReceived):
            pass  # never acknowledges
        elif isinstance(event, ReconcileReceived):
            if mode == "durable":
                write(
                    sealer.seal(
                        Reconciled,
                        rid=event.rid,
                        tool=event.tool,
                        operation_key=event.operation_key,
                        status=Succeeded(payload=TextPayload(value="recovered")),
                    )
                )
            else:
                write(conn.reconciled(event.rid))
        elif isinstance(event, InvokeReceived):
            misbehave(mode, conn, sealer, event, ready_line)


def misbehave(
    mode: str, conn: WorkerConnection, sealer: Sealer, event: InvokeReceived, ready_line: bytes
) -> None:
    rid = event.rid
    if mode == "ok" or (mode == "durable" and event.value != "die"):
        write(conn.result(rid, str(event.value)[::-1]))
    elif mode == "durable" or mode == "exit":
        os._exit(7)
    elif mode == "garbage":
        write(b"this is not a frame at all\n")
    elif mode == "forged":
        write(Sealer(os.urandom(32), conn.session_id).seal(
            Result, rid=rid, payload=TextPayload(value="forged")))  # fmt: skip
    elif mode == "replay":
        write(ready_line)
    elif mode == "unknown_rid":
        write(sealer.seal(Result, rid="r999", payload=TextPayload(value="who?")))
    elif mode == "chunk_after_result":
        write(conn.result(rid, "done"))
        write(sealer.seal(Chunk, rid=rid, index=1, text="late"))
    elif mode == "half_frame":
        line = conn.result(rid, "half")
        write(line[: len(line) // 2])
    elif mode == "endless":
        block = b"z" * 65536
        for _ in range(40):
            write(block)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if mode in ("half_frame", "endless"):
        stall()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
