"""Exit statuses of spec section 9, with a real worker: 0 after close, 2 within one second
after a fatal violation (even while adapters ignore their token), 3 on a bad bootstrap."""

from __future__ import annotations

import time
from typing import Any

import psutil
import pytest
from worker_harness import EXAMPLES, HOSTILE, WorkerProcess, survivors

from worker_runtime.protocol.framing import Sealer
from worker_runtime.protocol.keys import derive_keys
from worker_runtime.protocol.limits import MAX_LINE_BYTES
from worker_runtime.protocol.messages import (
    Cancel,
    Close,
    Invoke,
    Open,
    Ping,
    Ready,
    Result,
    TextPayload,
    grant,
)

GRANTS = [
    grant("stubborn.sleep", max_calls=3),
    grant("stubborn.spin"),
    grant("text.upper", max_calls=1),
]


def _raw_session(w: WorkerProcess, grants: list[Any] = GRANTS, max_in_flight: int = 2) -> None:
    w.bootstrap()
    w.send_raw(Open, grants=grants, max_in_flight=max_in_flight)
    assert isinstance(w.read_raw(), Ready)


def _invoke_frame(w: WorkerProcess, rid: str, tool: str, value: str, key: str = "k") -> bytes:
    """An invoke sealed by hand: HostConnection would refuse the hostile ones."""
    return w.raw.seal(
        Invoke,
        rid=rid,
        tool=tool,
        payload=TextPayload(value),
        attempt=1,
        idempotency_key=key,
        deadline_ms=None,
    )


def _invoke(w: WorkerProcess, rid: str, tool: str, value: str, key: str = "k") -> None:
    w.send(_invoke_frame(w, rid, tool, value, key))


def _exits_2_promptly_and_silently(w: WorkerProcess, sent_at: float) -> None:
    w.proc.wait(timeout=5)
    elapsed = time.monotonic() - sent_at
    status = w.wait()  # and the diagnostics are all read
    assert status == 2, w.stderr_text()
    assert elapsed < 1.0, f"exit 2 took {elapsed:.2f}s"
    assert w.read_eof() == []  # nothing more was written after the violation


@pytest.mark.parametrize("stubborn", ["stubborn.sleep", "stubborn.spin"])
def test_violation_exits_2_within_one_second_despite_a_stubborn_adapter(stubborn: str) -> None:
    with WorkerProcess(adapters=(EXAMPLES, HOSTILE)) as w:
        _raw_session(w)
        _invoke(w, "r1", stubborn, "30")
        time.sleep(0.1)  # the adapter is running and ignores every token
        line = w.raw.seal(Ping, nonce="n")
        sent_at = time.monotonic()
        w.send(line.replace(b'"nonce":"n"', b'"nonce":"m"'))  # tampered: the tag fails
        _exits_2_promptly_and_silently(w, sent_at)
        assert "tag_mismatch" in w.stderr_text()


def test_eof_without_close_exits_2_despite_a_stubborn_adapter() -> None:
    with WorkerProcess(adapters=(EXAMPLES, HOSTILE)) as w:
        _raw_session(w)
        _invoke(w, "r1", "stubborn.sleep", "30")
        time.sleep(0.1)
        sent_at = time.monotonic()
        w.close_input()
        _exits_2_promptly_and_silently(w, sent_at)
        assert "unexpected_eof" in w.stderr_text()


def test_close_with_nothing_in_flight_exits_0() -> None:
    with WorkerProcess(adapters=(EXAMPLES, HOSTILE)) as w:
        _raw_session(w)
        w.send_raw(Close)
        assert w.read_eof() == []
        assert w.wait() == 0


def test_open_granting_a_tool_it_does_not_serve_exits_2_without_ready() -> None:
    with WorkerProcess() as w:
        w.bootstrap()
        # the worker's start-up is not its exit: the second from the open on counts once
        # it reads frames (a thread of the session's), not while it still imports
        worker = psutil.Process(w.proc.pid)
        end = time.monotonic() + 30
        while worker.num_threads() < 2 and time.monotonic() < end:
            time.sleep(0.005)
        sent_at = time.monotonic()
        w.send_raw(Open, grants=[grant("text.upper"), grant("not.served")], max_in_flight=1)
        _exits_2_promptly_and_silently(w, sent_at)
        assert "tool_not_served" in w.stderr_text()


def _replay(w: WorkerProcess) -> bytes:
    line = w.raw.seal(Ping, nonce="n")
    w.send(line)
    assert w.read_raw() is not None  # the pong
    return line


def _wrong_key(w: WorkerProcess) -> bytes:
    other = derive_keys(bytes(range(3, 35)))
    return Sealer(other.host, w.session_id).seal(Ping, nonce="n")


def _invoke_line(rid: str, tool: str, value: str = "x", key: str = "k") -> Any:
    return lambda w: _invoke_frame(w, rid, tool, value, key)


def _after_one_call(w: WorkerProcess) -> None:
    _invoke(w, "r1", "text.upper", "a")
    assert isinstance(w.read_raw(), Result)


def _invoke_two(w: WorkerProcess) -> None:
    _invoke(w, "r1", "stubborn.sleep", "30")
    _invoke(w, "r2", "stubborn.sleep", "30", "k2")


VIOLATIONS: dict[str, tuple[Any, Any, str]] = {
    # name: (setup, the offending line, the code logged on stderr)
    "replayed_frame": (None, _replay, "bad_sequence"),
    "wrong_key": (None, _wrong_key, "tag_mismatch"),
    "garbage": (None, lambda w: b"hello world\n", "bad_tag"),
    "line_too_long": (None, lambda w: b"x" * (MAX_LINE_BYTES + 1), "line_too_long"),
    "second_open": (None, lambda w: w.raw.seal(Open, grants=GRANTS, max_in_flight=1), "unexpected"),
    "unknown_tool": (None, _invoke_line("r1", "nope"), "unknown_tool"),
    "input_too_large": (None, _invoke_line("r1", "text.upper", "x" * 20_000), "input_too_large"),
    "over_max_calls": (_after_one_call, _invoke_line("r2", "text.upper", key="k2"), "call_budget"),
    "duplicate_rid": (_after_one_call, _invoke_line("r1", "stubborn.sleep"), "duplicate_id"),
    "cancel_unknown_rid": (
        None,
        lambda w: w.raw.seal(Cancel, cid="c1", rid="r9", tool="t"),
        "unknown",
    ),
    "cancel_wrong_tool": (
        lambda w: _invoke(w, "r1", "stubborn.sleep", "30"),
        lambda w: w.raw.seal(Cancel, cid="c2", rid="r1", tool="text.upper"),
        "cancel_mismatch",
    ),
    "close_while_in_flight": (
        lambda w: _invoke(w, "r1", "stubborn.sleep", "30"),
        lambda w: w.raw.seal(Close),
        "close_while_in_flight",
    ),
    "beyond_max_in_flight": (
        lambda w: _invoke_two(w),
        _invoke_line("r3", "stubborn.spin", "30", "k3"),
        "too_many_in_flight",
    ),
}


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_each_violation_exits_2(name: str) -> None:
    setup, offend, code = VIOLATIONS[name]
    with WorkerProcess(adapters=(EXAMPLES, HOSTILE)) as w:
        _raw_session(w)
        if setup is not None:
            setup(w)
            time.sleep(0.05)
        line = offend(w)
        sent_at = time.monotonic()
        w.send(line)
        _exits_2_promptly_and_silently(w, sent_at)
        assert code in w.stderr_text()


def _boot(sid: bytes = b"s1", length: int | None = None, key: bytes = bytes(range(1, 33))) -> bytes:
    return b"SVBOOT01" + bytes([len(sid) if length is None else length]) + sid + key


@pytest.mark.parametrize(
    "preamble",
    [
        pytest.param(b"SVBOOT02" + _boot()[8:], id="bad_magic"),
        pytest.param(_boot(sid=b"", length=0), id="length_0"),
        pytest.param(_boot(sid=b"a" * 129, length=129), id="length_129"),
        pytest.param(_boot(sid=b"Upper"), id="bad_id"),
        pytest.param(_boot(sid=b"\xff"), id="non_ascii_id"),
        pytest.param(_boot(key=bytes(32)), id="weak_key"),
        pytest.param(_boot()[:20], id="truncated"),
        pytest.param(b"", id="empty"),
    ],
)
def test_bad_bootstrap_exits_3_without_writing_a_frame(preamble: bytes) -> None:
    with WorkerProcess() as w:
        w.send(preamble)
        w.close_input()
        assert w.wait() == 3
        assert w.read_eof() == []
        assert "bad bootstrap" in w.stderr_text()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--adapters"],
        ["--adapters", "worker_runtime.examples"],
        ["--adapters", "no_such_module_x:registry"],
        ["--adapters", "worker_runtime.examples:upper"],
        ["--adapters", EXAMPLES, "--adapters", EXAMPLES],
        ["--adapters", EXAMPLES, "--fd-in", "1"],
        ["--adapters", EXAMPLES, "--fd-out", "x"],
        ["--adapters", EXAMPLES, "--fd-in", "5", "--fd-out", "5"],
        ["--adapters", EXAMPLES, "--verbose"],
    ],
)
def test_bad_arguments_exit_3_without_writing_a_frame(args: list[str]) -> None:
    with WorkerProcess(args=args) as w:
        assert w.wait() == 3
        assert w.read_eof() == []
        assert "worker_runtime:" in w.stderr_text()


def test_fd_options_move_the_protocol() -> None:
    args = ["--adapters", EXAMPLES, "--fd-in=7", "--fd-out", "9"]
    with WorkerProcess(args=args, fds=(7, 9)) as w:
        _raw_session(w, grants=[grant("text.upper")])
        w.send_raw(Close)
        assert w.wait() == 0


@pytest.mark.parametrize("tool", ["command.group", "command.slow_start"])
def test_a_fatal_exit_kills_the_process_groups_of_running_commands(tool: str) -> None:
    """``command.slow_start``'s spawn returns only once the worker dies, after the program
    started its group: the call's abort hook, there before the spawn, kills it all the same."""
    with WorkerProcess(adapters=(HOSTILE,)) as w:
        _raw_session(w, grants=[grant(tool)], max_in_flight=1)
        _invoke(w, "r1", tool, "")
        procs = w.descendants(at_least=3)
        assert len(procs) >= 3, procs
        sent_at = time.monotonic()
        w.send(b"garbage\n")
        _exits_2_promptly_and_silently(w, sent_at)
        _none_left(procs)


def _none_left(procs: list[Any]) -> None:
    """Asserts that none of ``procs`` runs on (and kills those that do)."""
    left = survivors(procs)
    for proc in left:
        proc.kill()
    assert left == []
