"""`SyncSupervisor` from plain threads: a thread pool of callers, handles shared between
threads, Ctrl-C in a waiting thread, `ScriptedTool.execute_sync` with sandboxed tools,
and a clean end at interpreter exit (the end on close: `test_sync_host_close`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hosting_helpers import (
    EXAMPLES,
    child_env,
    host_threads,
    read_audit,
    still_running,
    survivors,
)

from supervisor import Supervisor
from supervisor.hosting import SyncSupervisor
from supervisor.ledger import UnknownTool
from supervisor.scripted import ScriptedTool


@pytest.fixture(scope="module")
def sup() -> Any:
    # a grace of 1 s for the cooperative cancels and deadline to be acknowledged in (0.2 s
    # was missed at load in the Ray tests' like supervisor; the stubborn one is killed)
    with SyncSupervisor(adapters=[EXAMPLES], pool_size=2, max_in_flight=2,
                        ping_interval=None, cancel_grace=1.0) as sup:  # fmt: skip
        yield sup
    assert not survivors(sup.supervisor)
    assert not host_threads()


def test_a_thread_pool_of_synchronous_callers(sup: SyncSupervisor) -> None:
    def call(i: int) -> tuple[Any, ...]:
        me = threading.get_ident()
        if i % 3 == 0:
            out = sup.invoke("text.upper", f"call {i}")
            return (out.status, out.value)
        if i % 3 == 1:
            out = sup.invoke("json.echo", {"i": i}, deadline=10)
            return (out.status, out.value)
        seen: list[tuple[str, int]] = []
        out = sup.invoke("progress.count", "4", on_chunk=lambda t: seen.append((t, me)))
        # chunks run in the calling thread, in order, before invoke returns
        assert seen == [(str(n), me) for n in range(1, 5)]
        return (out.status, out.value)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, range(48)))
    for i, result in enumerate(results):
        expected = [("completed", f"CALL {i}"), ("completed", {"i": i}),
                    ("completed", "counted 4, streamed 4")][i % 3]  # fmt: skip
        assert result == expected


def test_handles_are_shared_between_threads(sup: SyncSupervisor) -> None:
    chunks: list[str] = []
    handle = sup.start("progress.count", "1000/0.02", on_chunk=chunks.append)
    assert handle.op_id is not None and not handle.done
    with pytest.raises(TimeoutError):
        handle.outcome(timeout=0.2)  # the call goes on
    outcomes: list[Any] = []
    waiter = threading.Thread(target=lambda: outcomes.append(handle.outcome()))
    waiter.start()
    canceller = threading.Thread(target=lambda: outcomes.append(handle.cancel()))
    canceller.start()
    waiter.join(10)
    canceller.join(10)
    assert [o.status for o in outcomes] == ["cancelled", "cancelled"]
    assert outcomes[0] is outcomes[1] and handle.done and chunks
    assert sup.invoke("text.upper", "after").status == "completed"


def test_refusals_raise_and_call_in_host_reads_the_ledger(sup: SyncSupervisor) -> None:
    with pytest.raises(UnknownTool):
        sup.invoke("nope", "x")
    with pytest.raises(UnknownTool):
        sup.start("nope", "x")
    out = sup.invoke("stubborn.sleep", "30", deadline=0.2)
    assert (out.status, out.kill_reason) == ("indeterminate", "deadline")

    async def kinds(s: Supervisor) -> list[str]:
        return [e.kind for e in s.ledger.audit() if e.op_id == out.op_id]

    # its account in the ledger: indeterminate, then timed out once its deadline is a
    # second past (EXPIRY_SLACK), which the kill after the grace may already have reached
    assert "indeterminate" in sup.call_in_host(kinds)


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="needs the main thread"
)
def test_ctrl_c_in_the_waiting_thread_cancels_the_call(sup: SyncSupervisor) -> None:
    events = sup.audit_events()
    main = threading.main_thread().ident
    assert main is not None
    started: list[str] = []

    def interrupt_after_first_chunk(text: str) -> None:
        if not started:
            started.append(text)
            threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()

    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sup.invoke("progress.count", "1000/0.02", on_chunk=interrupt_after_first_chunk)
    assert time.monotonic() - began < 5
    event = events.get(timeout=10)
    assert (event.tool, event.status) == ("progress.count", "cancelled")
    events.close()
    assert list(events) == []


def test_execute_sync_with_sandboxed_tools_from_a_thread_pool(sup: SyncSupervisor) -> None:
    shop = ScriptedTool("shop")
    shop.add_tool("upper", "upper-case stdin", sup.tool_callback("text.upper"))
    shop.add_tool("echo_json", "echo JSON flags", sup.tool_callback("json.echo"),
                  schema={"type": "object", "properties": {"n": {"type": "integer"}}})  # fmt: skip
    shop.add_tool("nap", "sleep", sup.tool_callback("sleep", deadline=0.2))

    def script(i: int) -> tuple[str, int]:
        result = shop.execute_sync(
            f"echo item{i} | upper; echo_json --n {i} | jq .n",
            backend="trio" if i % 2 else "asyncio",
        )
        return result.stdout, result.exit_code

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(script, range(12)))
    assert results == [(f"ITEM{i}\n{i}\n", 0) for i in range(12)]
    # a deadline is an exit status the script can branch on
    result = shop.execute_sync('echo 30 | nap || echo "status $?"')
    assert result.stdout == "status 124\n" and "timed out (deadline 0.2 s)" in result.stderr


def test_a_durable_ledger_is_compacted_in_the_host_thread(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.sqlite3"

    async def compact(s: Supervisor) -> Any:
        return s.ledger.compact(vacuum=True)

    with SyncSupervisor(adapters=[EXAMPLES], ledger_path=journal, ping_interval=None) as sup:
        for i in range(5):
            assert sup.invoke("text.upper", f"v{i}").status == "completed"
        report = sup.call_in_host(compact)
        assert (report.events_removed, report.operations_removed) == (15, 5)
        assert sup.invoke("text.upper", "after").status == "completed"
    with SyncSupervisor(adapters=[EXAMPLES], ledger_path=journal, ping_interval=None) as sup:

        async def head(s: Supervisor) -> Any:
            return s.ledger.audit_head(), s.ledger.verify_audit_chain(anchor=report.checkpoint)

        (seq, _), checked = sup.call_in_host(head)
        assert (seq, checked) == (report.checkpoint[0] + 3, 3)  # the call after it


CHILD = textwrap.dedent(
    """
    import json, sys, time
    import psutil
    from supervisor.hosting import SyncSupervisor

    sup = SyncSupervisor(adapters=["worker_runtime.examples:registry"], pool_size=2,
                         audit_log=sys.argv[1], ping_interval=None).open()
    handle = sup.start("sleep", "60")

    async def pids(s):
        return [p for session in s.pool.sessions for p in session.survivors()]

    print(json.dumps(sup.call_in_host(pids)), flush=True)
    # every process of ours: fork server, lifeline, bwrap and what runs under it
    tree = [(p.pid, p.create_time()) for p in psutil.Process().children(recursive=True)]
    print(json.dumps(tree), flush=True)
    time.sleep(0.3)
    # no close(): the interpreter's exit must cancel the call and close every worker
    """
)


def test_a_forgotten_supervisor_is_closed_at_interpreter_exit(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    began = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(audit)],
        capture_output=True, text=True, timeout=60, env=child_env(),
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert time.monotonic() - began < 20
    pids = json.loads(child.stdout.splitlines()[0])
    assert len(pids) >= 2
    tree = [tuple(p) for p in json.loads(child.stdout.splitlines()[1])]
    assert set(pids) <= {pid for pid, _ in tree}
    # each by its start time (pids wrap: at 32768 on our machine), none running code any more
    alive = still_running([(pid, created) for pid, created in tree if pid in pids])
    assert not alive, f"sandbox processes outlived the interpreter: {alive}"
    assert [(e["tool"], e["status"]) for e in read_audit(audit)] == [("sleep", "cancelled")]
    # The child's orphans go to init, never to us: look for each process it had, given the
    # lifeline its second or so to remove the cgroups after its host died.
    deadline = time.monotonic() + 10
    while (left := still_running(tree)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes of the child outlived it: {left}"
    assert os.path.exists(audit)
