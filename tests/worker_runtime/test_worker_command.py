"""The command adapter: real programs, real process groups, real signals."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any

import psutil
import pytest
from worker_harness import HOSTILE, WorkerProcess, survivors

from worker_runtime import AdapterError, Cancelled, Context, DeadlineExceeded
from worker_runtime.bridges.command import CommandAdapter
from worker_runtime.protocol.host import CancelAcknowledged, ResultReceived
from worker_runtime.protocol.messages import grant


def _group_of(pid_file_text: str) -> list[psutil.Process]:
    """The processes whose pids were written down (those already gone are left out)."""
    procs = []
    for pid in pid_file_text.split():
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(int(pid)))
    return procs


def test_stdin_in_stdout_out() -> None:
    assert CommandAdapter(["sort"])("b\nc\na\n", Context()) == "a\nb\nc\n"


def test_large_input_and_output_do_not_deadlock() -> None:
    data = "x" * 3_000_000
    assert CommandAdapter(["cat"], max_output_bytes=4_000_000)(data, Context()) == data


def test_json_format_encodes_input_and_decodes_output() -> None:
    adapter = CommandAdapter(
        [sys.executable, "-c", "import sys; print(sys.stdin.read())"], format="json"
    )
    assert adapter({"a": [1, 2]}, Context()) == {"a": [1, 2]}


def test_a_program_that_ignores_its_stdin_is_fine() -> None:
    assert CommandAdapter(["echo", "hi"])("x" * 1_000_000, Context()) == "hi\n"


def test_nonzero_exit_is_an_adapter_error() -> None:
    with pytest.raises(AdapterError) as info:
        CommandAdapter(["sh", "-c", "exit 3"])("", Context())
    assert info.value.code == "command_failed" and "status 3" in info.value.message


def test_a_missing_program_is_unavailable() -> None:
    with pytest.raises(AdapterError) as info:
        CommandAdapter(["/nonexistent/program"])("", Context())
    assert info.value.code == "unavailable"


def test_output_beyond_the_bound_stops_the_program() -> None:
    adapter = CommandAdapter(["yes"], max_output_bytes=100_000)
    with pytest.raises(AdapterError) as info:
        adapter("", Context())
    assert info.value.code == "output_too_large"


def test_stderr_is_drained_and_bounded(capfd: pytest.CaptureFixture[str]) -> None:
    script = "head -c 3000000 /dev/zero | tr '\\0' e >&2; echo ok"
    adapter = CommandAdapter(["sh", "-c", script], max_stderr_bytes=1000)
    assert adapter("", Context()) == "ok\n"
    err = capfd.readouterr().err
    assert err.count("e") <= 1100 and "2999000 more stderr bytes dropped" in err


def test_its_own_timeout_stops_the_whole_group(tmp_path: Any) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $! $$ > {pids}; wait"
    adapter = CommandAdapter(["sh", "-c", script], timeout=0.5, grace=0.2)
    with pytest.raises(DeadlineExceeded):
        adapter("", Context())
    assert survivors(_group_of(pids.read_text())) == []


def test_the_calls_deadline_bounds_the_program() -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        CommandAdapter(["sleep", "60"], timeout=60)("", Context(deadline=time.monotonic() + 0.3))
    assert time.monotonic() - started < 30  # not the program's own minute


@pytest.mark.parametrize("trap", ["", "trap '' TERM; "])
def test_cancel_stops_the_whole_group_before_acknowledging(tmp_path: Any, trap: str) -> None:
    pids = tmp_path / "pids"
    script = f"{trap}sleep 60 & sleep 60 & echo $! $$ > {pids}; wait"
    adapter = CommandAdapter(["sh", "-c", script], grace=0.2)
    ctx = Context()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            adapter("", ctx)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    while not pids.exists() or not pids.read_text().strip():
        time.sleep(0.01)
    procs = _group_of(pids.read_text())
    pgid = procs[-1].pid
    ctx._cancel()
    thread.join(10)
    assert isinstance(outcome[0], Cancelled)
    # at the moment of the acknowledgement nothing of the group is left running
    group = [p for p in psutil.process_iter() if _pgid(p.pid) == pgid]
    assert survivors(group, grace=0) == [] and survivors(procs, grace=0) == []


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_children_do_not_inherit_the_protocol_fds() -> None:
    with WorkerProcess([grant("command.fds")], adapters=(HOSTILE,)) as w:
        w.handshake()
        w.invoke("command.fds", "")
        event = w.next_event()
        assert isinstance(event, ResultReceived) and event.payload.value == ""
        w.send(w.conn.close())
        assert w.wait() == 0


def test_cancel_through_a_real_worker_kills_the_group_then_acknowledges() -> None:
    with WorkerProcess([grant("command.deaf")], adapters=(HOSTILE,)) as w:
        w.handshake()
        rid = w.invoke("command.deaf", "")
        procs = w.descendants(at_least=3)
        assert len(procs) >= 3, procs
        cid = w.cancel(rid)
        assert w.next_event() == CancelAcknowledged(rid, cid)
        assert survivors(procs, grace=0) == []
        w.send(w.conn.close())
        assert w.wait() == 0


def test_the_example_command_adapter_through_a_real_worker() -> None:
    with WorkerProcess([grant("text.sort")]) as w:
        w.handshake()
        w.invoke("text.sort", "b\na\n")
        event = w.next_event()
        assert isinstance(event, ResultReceived) and event.payload.value == "a\nb\n"
        w.send(w.conn.close())
        assert w.wait() == 0
