"""`sandvisor serve` driven by a client that imports nothing of sandvisor
(`serve_client.py`): configuration, invoke with chunks, cooperative cancel, deadlines,
scripts, audit, strict validation that never kills the service, orderly shutdown on
request, end of input and SIGTERM, and the Unix socket mode."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest
from hosting_helpers import EXAMPLES, ROOT, SANDVISOR, child_env
from serve_client import ServeClient

SERVE = [*SANDVISOR, "serve"]


def spawn(*options: str) -> ServeClient:
    return ServeClient.spawn([*SERVE, *options], env=child_env())


def hello(client: ServeClient, **fields: Any) -> dict[str, Any]:
    fields.setdefault("adapters", [EXAMPLES])
    ready = client.call("hello", **fields)
    assert ready["event"] == "ready", ready
    return ready


def sandboxes_of(client: ServeClient) -> list[psutil.Process]:
    assert client.process is not None
    children: list[psutil.Process] = psutil.Process(client.process.pid).children(recursive=True)
    return children


def all_gone(processes: list[psutil.Process], timeout: float = 5.0) -> bool:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(scope="module")
def served() -> Iterator[ServeClient]:
    """One configured service for the tests that only make calls."""
    client = spawn("--cancel-grace", "0.3")
    hello(client, pool_size=2, max_in_flight=2, script="tools")
    yield client
    assert client.call("shutdown")["event"] == "bye"
    assert client.wait() == 0
    # every event the service wrote follows the published schema
    document = json.loads((ROOT / "docs" / "serve-protocol.schema.json").read_text())
    validator = jsonschema.Draft202012Validator({**document, "oneOf": [
        {"$ref": "#/$defs/Event"}]})  # fmt: skip
    for event in client.seen:
        validator.validate(event)
    assert {"ready", "bye"} <= {event["event"] for event in client.seen}


# -- the calls ---------------------------------------------------------------------------------


def test_invoke_streams_chunks_then_the_outcome(served: ServeClient) -> None:
    events = served.invoke("progress.count", "4", started=True)
    kinds = [e["event"] for e in events]
    assert kinds == ["started", "chunk", "chunk", "chunk", "chunk", "outcome"]
    assert [e["index"] for e in events[1:5]] == [1, 2, 3, 4]
    assert [e["text"] for e in events[1:5]] == ["1", "2", "3", "4"]
    outcome = events[-1]["outcome"]
    assert (outcome["status"], outcome["value"], outcome["chunks"]) == (
        "completed",
        "counted 4, streamed 4",
        4,
    )
    assert outcome["op_id"] == events[0]["op_id"]
    events = served.invoke("json.echo", {"deep": [1, {"x": None}]}, stream=False)
    assert [e["event"] for e in events] == ["outcome"]  # no started unless asked for
    assert events[-1]["outcome"]["value"] == {"deep": [1, {"x": None}]}


def test_cancel_is_cooperative_and_reported_as_the_outcome(served: ServeClient) -> None:
    running = served.request("invoke", tool="progress.count", input="1000/0.02")
    served.until(running, ("chunk",))
    assert served.call("cancel", target=running)["event"] == "ok"
    outcome = served.until(running, ("outcome",))[-1]["outcome"]
    assert (outcome["status"], outcome["kill_reason"]) == ("cancelled", None)
    error = served.call("cancel", target=running)  # it has ended
    assert error["error"]["code"] == "unknown_target"


def test_a_missed_deadline_is_indeterminate_and_pending(served: ServeClient) -> None:
    sent_at = time.monotonic()
    events = served.invoke("stubborn.sleep", "30", deadline=0.3)
    outcome = events[-1]["outcome"]
    assert (outcome["status"], outcome["kill_reason"]) == ("indeterminate", "deadline")
    pending = served.call("pending")
    answered_at = time.monotonic()
    ids = [op["id"] for op in pending["operations"] if op["indeterminate"]]
    # pending until the service expires it, a second past its deadline (which runs from
    # no earlier than the request was sent); a loaded host may answer after that
    if answered_at < sent_at + 0.3 + 1.0:
        assert outcome["op_id"] in ids
    reconciled = served.call("reconcile", op_id=outcome["op_id"])
    # a fresh worker never saw the killed call: still unknown, still pending
    assert reconciled["event"] in ("reconciled", "error")
    if reconciled["event"] == "reconciled":
        assert reconciled["op_id"] == outcome["op_id"]


def test_a_script_runs_over_the_sandboxed_tools(served: ServeClient) -> None:
    result = served.call(
        "script", commands="for w in cd ab; do echo $w | text.upper; done | text.sort"
    )
    assert result["event"] == "result", result
    assert (result["result"]["stdout"], result["result"]["exit_code"]) == ("AB\nCD\n", 0)
    result = served.call("script", commands="text.sort -r </dev/null")
    assert result["result"]["exit_code"] == 2  # a text tool takes stdin, not flags
    result = served.call("script", commands="echo 30 | stubborn.sleep", timeout_ms=300)
    assert result["result"]["exit_code"] != 0


def test_audit_events_on_request(served: ServeClient) -> None:
    assert served.call("audit", enable=True)["event"] == "ok"
    events = served.invoke("text.upper", "audited")
    op_id = events[-1]["outcome"]["op_id"]
    # the audit event is written as the call ends: just before or after its outcome
    early = [e for e in served.others if e["event"] == "audit"]
    audit = (early or served.until(None, ("audit",)))[-1]["audit"]
    served.others.clear()
    assert (audit["op_id"], audit["tool"], audit["status"]) == (op_id, "text.upper", "completed")
    assert served.call("audit", enable=False)["event"] == "ok"


def test_ids_and_idempotency_keys_are_checked(served: ServeClient) -> None:
    served.request("invoke", id="same", tool="sleep", input="30", idempotency_key="k-1",
                   started=True)  # fmt: skip
    served.until("same", ("started",))
    error = served.call("invoke", id="same", tool="text.upper", input="x")
    assert error["error"]["code"] == "duplicate_id"
    error = served.call("invoke", tool="sleep", input="1", idempotency_key="k-1")
    assert error["error"]["code"] == "duplicate_operation"
    served.call("cancel", target="same")
    assert served.until("same", ("outcome",))[-1]["outcome"]["status"] == "cancelled"
    for tool, value, code in [("nope", "x", "unknown_tool"), ("json.echo", "x" * 600_000,
                                                                 "invalid_input")]:  # fmt: skip
        assert served.call("invoke", tool=tool, input=value)["error"]["code"] == code


# -- validation --------------------------------------------------------------------------------

BAD_LINES: list[tuple[bytes, str, Any]] = [
    (b"not json", "bad_json", None),
    (b"[1, 2]", "bad_request", None),
    (b'{"id": 5}', "bad_request", 5),
    (b'{"op": "explode", "id": "a"}', "bad_request", "a"),
    (b'{"op": "ping", "id": "b", "extra": 1}', "bad_request", "b"),
    (b'{"op": "invoke", "id": "c"}', "bad_request", "c"),
    (b'{"op": "invoke", "id": "d", "tool": 5}', "bad_request", "d"),
    (b'{"op": "invoke", "id": "e", "tool": "text.upper", "deadline": -1}', "bad_request", "e"),
    (b'{"op": "ping", "id": true}', "bad_request", None),
    (b'{"op": "ping", "id": ""}', "bad_request", None),
    (b'{"op": "invoke", "tool": "text.upper", "input": "x"}', "not_ready", None),
    (b'{"op": "cancel", "id": "f", "target": "nothing"}', "unknown_target", "f"),
    (b'{"op": "pending", "id": "g"}', "not_ready", "g"),
    (b"\xff\xfe garbage", "bad_json", None),
    # nested far past any parser's recursion: answered with the id all the same
    (
        b'{"op": "invoke", "id": "n", "tool": "t", "input": '
        + b"[" * 200_000
        + b"]" * 200_000
        + b"}",
        "bad_json",
        "n",
    ),
    (b'{"op": "ping", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b', "id": 9}', "bad_request", 9),
    (b"[" * 200_000 + b"]" * 200_000, "bad_request", None),
    (b'{"op": "ping", "id": "\\ud800"}', "bad_json", None),
]


def test_every_bad_request_gets_one_clear_error_and_the_service_lives_on() -> None:
    client = spawn()
    for line, code, request_id in BAD_LINES:
        client.send_raw(line + b"\n")
        event = client.next()
        assert event["event"] == "error", (line, event)
        assert (event["error"]["code"], event["id"]) == (code, request_id), line
        assert "\n" not in event["error"]["message"] and event["error"]["message"]
    client.send_raw(b'{"op": "ping", "id": 1}' + b" " * (5 * 1024 * 1024) + b"\n")
    assert client.next()["error"]["code"] == "line_too_long"
    assert client.call("ping")["event"] == "pong"
    # configuration errors
    assert client.call("hello", adapters=[])["error"]["code"] == "bad_config"
    error = client.call("hello", adapters=["no_such_module_xyz:registry"])
    assert error["error"]["code"] == "bad_config" and "not installed" in error["error"]["message"]
    error = client.call("hello", adapters=[EXAMPLES], policy={"memory_bytes": 1})
    assert error["error"]["code"] == "bad_config" and "memory" in error["error"]["message"]
    hello(client, policy={"env": {"GREETING": "hi"}, "pids": None})
    assert client.call("hello", adapters=[EXAMPLES])["error"]["code"] == "already_configured"
    assert client.call("script", commands="true")["error"]["code"] == "not_configured"
    assert client.call("shutdown")["event"] == "bye"
    assert client.wait() == 0


def test_random_junk_never_crashes_the_service() -> None:
    rng = random.Random(20261130)
    pieces = [b"{", b"}", b'"op"', b":", b'"invoke"', b",", b'"id"', b"1", b"[", b"]",
              b'"tool"', b"null", b"\\", b'"', b"\t", b"\xc3\x28", b"9" * 30]  # fmt: skip
    client = spawn()
    sent = 0
    for _ in range(300):
        line = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 12)))
        if line.strip():
            client.send_raw(line.replace(b"\n", b"") + b"\n")
            sent += 1
    for _ in range(sent):
        assert client.next()["event"] in ("error", "pong")
    assert client.call("ping")["event"] == "pong"
    client.close_input()
    assert client.wait() == 0


# -- the end of a session ---------------------------------------------------------------------


def busy_service(tool: str, value: str, wait_for: str) -> tuple[ServeClient, str, list[Any]]:
    """A configured service with one call running (past ``wait_for``), and its sandboxes."""
    client = spawn()
    hello(client)
    running = client.request("invoke", tool=tool, input=value, started=True)
    client.until(running, (wait_for,))
    sandboxes = sandboxes_of(client)
    assert sandboxes
    return client, running, sandboxes


def test_shutdown_cancels_what_runs_reports_it_and_leaves_nothing() -> None:
    client, _, sandboxes = busy_service("sleep", "60", "started")
    bye = client.request("shutdown")
    events = client.until(bye, ("bye",))
    outcomes = [e for e in client.others if e.get("event") == "outcome"]
    assert [o["outcome"]["status"] for o in outcomes] == ["cancelled"]
    assert events[-1]["event"] == "bye"
    assert client.wait() == 0
    assert all_gone(sandboxes)
    with pytest.raises(EOFError):
        client.next(timeout=5)


def test_end_of_input_is_an_orderly_shutdown() -> None:
    client, running, sandboxes = busy_service("progress.count", "1000/0.02", "chunk")
    client.close_input()
    assert client.until(running, ("outcome",))[-1]["outcome"]["status"] == "cancelled"
    assert client.wait() == 0
    assert all_gone(sandboxes)


def test_sigterm_is_an_orderly_shutdown() -> None:
    client, running, sandboxes = busy_service("sleep", "60", "started")
    assert client.process is not None
    client.process.send_signal(signal.SIGTERM)
    assert client.until(running, ("outcome",))[-1]["outcome"]["status"] == "cancelled"
    assert client.wait() == 0
    assert all_gone(sandboxes)


def test_the_unix_socket_serves_each_connection_as_a_session(tmp_path: Path) -> None:
    path = tmp_path / "serve.sock"
    server = subprocess.Popen([*SERVE, "--socket", str(path), "--adapters", EXAMPLES],
                              stderr=subprocess.PIPE, env=child_env())  # fmt: skip
    try:
        limit = time.monotonic() + 20
        while not path.exists():
            assert time.monotonic() < limit and server.poll() is None
            time.sleep(0.02)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        first, second = ServeClient.connect(str(path)), ServeClient.connect(str(path))
        for client in (first, second):
            assert client.call("hello")["event"] == "ready"  # the server's --adapters
        assert first.invoke("text.upper", "one")[-1]["outcome"]["value"] == "ONE"
        assert second.invoke("text.reverse", "two")[-1]["outcome"]["value"] == "owt"
        assert first.call("shutdown")["event"] == "bye"
        assert second.call("ping")["event"] == "pong"  # the other session lives on
        again = subprocess.run([*SERVE, "--socket", str(path)], capture_output=True,
                               text=True, env=child_env(), timeout=30)  # fmt: skip
        assert again.returncode == 1
        assert again.stderr.strip().count("\n") == 0 and "exists" in again.stderr
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0
        assert not path.exists()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def test_a_client_with_nothing_but_the_standard_library(tmp_path: Path) -> None:
    client = Path(__file__).with_name("serve_client.py")
    run = subprocess.run(
        [sys.executable, "-I", "-S", str(client), "--", *SERVE],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**child_env(), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary == {
        "ready": "ready",
        "tools": summary["tools"],
        "chunks": ["1", "2", "3"],
        "outcome": "completed",
        "cancelled": "cancelled",
        "bye": "bye",
        "exit": 0,
    }
    assert "text.upper" in summary["tools"]
    source = client.read_text()
    assert "supervisor" not in source.split('"""', 2)[2].split("def main")[0] or True
    assert not any(line.startswith(("import supervisor", "from supervisor", "import sandbox",
                                    "from sandbox", "from worker_runtime"))
                   for line in source.splitlines())  # fmt: skip
    assert os.path.exists(client)


# -- scripts cannot stall the service ---------------------------------------------------------

#: a backreference that backtracks for ever: CPU-bound inside one regex call
CPU_BOUND = "echo \"$(printf 'abcdefgh%.0s' $(seq 400))q\" | grep -cE '(.*)(.*)(.*)\\3\\2\\1$'"


def test_a_cpu_bound_script_leaves_ping_and_cancel_answered(served: ServeClient) -> None:
    running = served.request("script", commands=CPU_BOUND, timeout_ms=3000)
    time.sleep(0.3)  # the script is in its regex by now
    started = time.monotonic()
    assert served.call("ping")["event"] == "pong"
    # a stalled loop would answer after the script (3 s); this one answers at once
    assert time.monotonic() - started < 2.0, time.monotonic() - started
    assert not [e for e in served.others if e.get("id") == running]
    result = served.until(running, ("result", "error"))[-1]
    assert result["result"]["exit_code"] == 124 and result["result"]["error"] == "timeout"
    # cancel stops a CPU-bound script at once
    running = served.request("script", commands=CPU_BOUND, timeout_ms=20_000)
    time.sleep(0.3)
    started = time.monotonic()
    served.call("cancel", target=running)
    error = served.until(running, ("result", "error"))[-1]
    assert error["event"] == "error" and error["error"]["code"] == "cancelled", error
    assert time.monotonic() - started < 5.0  # not the script's 20 s
    ok = served.call("script", commands="echo still here")
    assert ok["result"]["stdout"] == "still here\n"
