"""jq runs in contained child processes: hostile filters stop at the deadline or the
memory limit while the host (and its event loop) carries on, children are reused,
replaced when killed, never orphaned, and nothing leaks. Real processes, real signals."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import psutil
import pytest
import trio

from supervisor.scripted import ScriptedTool
from supervisor.scripted.contract import (
    CommandResult,
    ExecResult,
    ExecutionLimits,
    ScriptRequest,
    execution_deadline,
)
from supervisor.scripted.shell.execution import run_script
from supervisor.scripted.text_tools import TEXT_COMMANDS
from supervisor.scripted.text_tools.jq_tool import JqEnginePool, JqLimits, default_pool
from supervisor.scripted.text_tools.jq_tool import engine as engine_module
from supervisor.scripted.text_tools.jq_tool.command import run_jq

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT = "jq: error: filter stopped at the execution deadline"
MEMORY = "jq: error: filter stopped: memory limit exceeded"

#: The filters of the issue: CPU for ever, memory without bound, or both.
HOSTILE = ["[range(1e10)]", "def f: f; f", '"x" * 1e9', "[limit(1e9; repeat(1))]"]


@contextlib.contextmanager
def deadline_in(seconds: float) -> Iterator[None]:
    token = execution_deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        execution_deadline.reset(token)


def call(pool: JqEnginePool, *args: str, stdin: str | None = "") -> CommandResult:
    result = pool.jq(list(args), stdin)
    assert isinstance(result, CommandResult)  # outside an event loop: always direct
    return result


async def acall(pool: JqEnginePool, *args: str, stdin: str | None = "") -> CommandResult:
    """As the interpreter calls it: the result, or an awaitable of it."""
    result = pool.jq(list(args), stdin)
    return result if isinstance(result, CommandResult) else await result


def gone(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def fd_table() -> dict[int, str]:
    table = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            table[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return table


def fds_opened(before: dict[int, str]) -> dict[int, str]:
    """Fds open now that were not before (others' fds closed meanwhile are fine)."""
    return {fd: t for fd, t in fd_table().items() if before.get(fd) != t}


def zombies() -> list[int]:
    return [p.pid for p in psutil.Process().children() if gone(p.pid)]


@pytest.fixture
def pool() -> Iterator[JqEnginePool]:
    """A private pool with a small memory cap (blow-ups hit it fast)."""
    own = JqEnginePool(JqLimits(memory_bytes=256 << 20, max_engines=4))
    yield own
    pids = own.engines()
    own.close()
    assert all(gone(pid) for pid in pids)


# ------------------------------------------------------------------ hostile filters


async def _run_with_ticker(script: str, timeout: float) -> tuple[ExecResult, float, int]:
    """Run ``script`` while another task of the same loop (trio or asyncio) counts
    10 ms sleeps; how long it took and how often the other task ran."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    many = 10**9
    limits = ExecutionLimits(
        timeout_seconds=timeout,
        max_commands=many,
        max_loop_iterations=many,
        max_total_loop_iterations=many,
    )
    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        start = time.monotonic()
        result = await run_script(ScriptRequest(script, commands=TEXT_COMMANDS, limits=limits))
        elapsed = time.monotonic() - start
        group.cancel_scope.cancel()
    return result, elapsed, ticks


@pytest.mark.parametrize("program", HOSTILE)
async def test_hostile_filters_stop_and_the_event_loop_keeps_ticking(program: str) -> None:
    result, elapsed, ticks = await _run_with_ticker(f"jq -n '{program}'; echo status=$?", 1.0)
    assert result.stdout == "status=5\n"
    assert result.stderr.startswith((TIMEOUT, MEMORY)), result.stderr
    assert elapsed < 5
    # A blocked loop ticks not at all; a free one about every 10 ms of the run.
    assert ticks >= 10, ticks  # a loop held by the filter ticks once at most


async def test_the_engine_reports_its_execution_timeout_after_a_stopped_filter() -> None:
    script = "jq -n 'def f: f; f'; while true; do :; done"
    result, _, _ = await _run_with_ticker(script, 0.5)
    assert result.error == "resource limit exceeded: execution timeout (500ms)"


def test_hostile_filter_on_asyncio_leaves_the_loop_free() -> None:
    script = "jq -n 'def f: f; f'"
    result, _, ticks = anyio.run(_run_with_ticker, script, 1.0, backend="asyncio")
    assert result.stderr.startswith(TIMEOUT)
    assert ticks >= 10, ticks  # a loop held by the filter ticks once at most


def test_a_request_timeout_cancels_the_call_and_kills_the_child() -> None:
    tool = ScriptedTool("t")
    assert tool.execute_sync("echo 1 | jq .").stdout == "1\n"
    before = set(default_pool().engines())
    result = tool.execute_request_sync({"commands": "jq -n 'def f: f; f'", "timeout_ms": 400})
    assert result.exit_code == 124 and result.error == "timeout"
    # the busy child went (killed at once, reaped by the pool's thread)
    assert wait_until(lambda: len(before - set(default_pool().engines())) == 1)
    assert all(gone(pid) for pid in before - set(default_pool().engines()))
    assert tool.execute_sync("echo 2 | jq .").stdout == "2\n"


async def test_cancelling_the_caller_kills_the_child(pool: JqEnginePool) -> None:
    assert await acall(pool, ".", stdin="1") == CommandResult("1\n", "", 0)
    (pid,) = pool.engines()
    with trio.move_on_after(0.3) as scope:
        pending = pool.jq(["-n", "def f: f; f"], None)
        assert not isinstance(pending, CommandResult)
        await pending
    assert scope.cancelled_caught
    # killed at once, reaped by a thread of the pool
    assert wait_until(lambda: gone(pid) and pool.engines() == [])
    assert (await acall(pool, ".", stdin="3")).stdout == "3\n"


async def test_an_awaitable_dropped_unawaited_frees_its_engine(pool: JqEnginePool) -> None:
    pending = pool.jq(["-n", "def f: f; f"], None)  # a starting child: the call waits
    assert not isinstance(pending, CommandResult)
    (pid,) = pool.engines()
    with pytest.warns(RuntimeWarning, match="never awaited"):
        del pending
        gc.collect()
    assert wait_until(lambda: gone(pid) and pool.engines() == [])
    assert (await acall(pool, ".", stdin="1")).stdout == "1\n"


async def test_a_dropped_awaitable_collected_under_the_pools_lock_does_not_deadlock(
    pool: JqEnginePool,
) -> None:
    """The finaliser may run in any section of this thread, one holding the pool's own
    (non-reentrant) lock included: it takes no lock; the engine is killed and reaped."""
    pending = pool.jq(["-n", "def f: f; f"], None)
    assert not isinstance(pending, CommandResult)
    (pid,) = pool.engines()
    finished = threading.Event()

    def collect_under_the_lock() -> None:
        nonlocal pending
        with pytest.warns(RuntimeWarning, match="never awaited"), pool._cond:
            del pending
            gc.collect()
        finished.set()

    worker = threading.Thread(target=collect_under_the_lock, daemon=True)
    worker.start()
    assert finished.wait(10), "the finaliser deadlocked on the pool's lock"
    assert wait_until(lambda: gone(pid) and pool.engines() == [])
    assert (await acall(pool, ".", stdin="1")).stdout == "1\n"


# ------------------------------------------------------------------ memory and crashes


def test_memory_blowup_is_stopped_by_the_child_limit(pool: JqEnginePool) -> None:
    host_rss = psutil.Process().memory_info().rss
    for program in ('reduce range(40) as $i ("x"; . + .)', '"x" * 1e9', "[range(1e9)]"):
        with deadline_in(20):
            result = call(pool, "-n", program)
        assert (result.stdout, result.exit_code) == ("", 5)
        assert result.stderr == f"{MEMORY} (256 MiB)\n", program
    assert psutil.Process().memory_info().rss < host_rss + (64 << 20)
    assert call(pool, "-c", ".", stdin="[1]").stdout == "[1]\n"


def test_a_crash_is_reported_and_the_next_call_gets_a_new_child(pool: JqEnginePool) -> None:
    call(pool, ".", stdin="1")
    (pid,) = pool.engines()
    threading.Timer(0.3, os.kill, (pid, signal.SIGSEGV)).start()
    with deadline_in(10):
        result = call(pool, "-n", "def f: f; f")
    assert result.stderr == "jq: error: filter stopped: the jq engine died (signal SIGSEGV)\n"
    assert result.exit_code == 5 and gone(pid)
    assert call(pool, ".", stdin="2").stdout == "2\n"


def test_an_idle_child_killed_from_outside_is_replaced_silently(pool: JqEnginePool) -> None:
    call(pool, ".", stdin="1")
    (pid,) = pool.engines()
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    assert call(pool, ".", stdin="2").stdout == "2\n"
    assert pool.engines() != [pid] and pid not in zombies()


def test_a_child_that_cannot_start_says_so(
    pool: JqEnginePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "BOOTSTRAP", "import sys; sys.exit('no libjq here')")
    result = call(pool, ".", stdin="1")
    assert result == CommandResult("", "jq: error: cannot start the jq engine: no libjq here\n", 5)
    assert pool.engines() == []


# ------------------------------------------------------------------ lifecycle and leaks


def test_the_child_is_reused_and_restarts_after_a_timeout(pool: JqEnginePool) -> None:
    for i in range(20):
        assert call(pool, "--arg", "i", str(i), "-r", "$i", stdin="null").stdout == f"{i}\n"
    (pid,) = pool.engines()  # one child answered them all (its compile cache is warm)
    with deadline_in(0.3):
        result = call(pool, "-n", "[range(1e10)]")
    assert (result.exit_code, result.stderr[: len(TIMEOUT)]) == (5, TIMEOUT)
    assert gone(pid) and pid not in zombies()
    assert call(pool, "-c", ".", stdin='{"a":1}').stdout == '{"a":1}\n'
    assert pool.engines() != [pid]


def test_no_fd_or_process_leaks_after_many_calls_and_timeouts(pool: JqEnginePool) -> None:
    call(pool, ".", stdin="0")
    before = fd_table()
    for i in range(300):
        assert call(pool, ".a", stdin=f'{{"a": {i}}}').stdout == f"{i}\n"
    for _ in range(3):
        with deadline_in(0.2):
            assert call(pool, "-n", "def f: f; f").exit_code == 5
        assert call(pool, ".", stdin="1").stdout == "1\n"
    assert len(pool.engines()) == 1
    # The live child's three pipe ends replaced the killed ones' (same count).
    opened = fds_opened(before)
    assert len(opened) <= 3 and all(t.startswith("pipe:") for t in opened.values()), opened
    assert len(fd_table()) <= len(before)
    assert zombies() == []
    pool.close()
    assert fds_opened(before) == {}


def test_the_child_is_contained(pool: JqEnginePool) -> None:
    call(pool, ".", stdin="1")
    (pid,) = pool.engines()
    child = psutil.Process(pid)
    assert child.environ() == {}
    assert child.cwd() == "/"
    assert child.cmdline()[1:4] == ["-I", "-B", "-c"]
    assert os.getsid(pid) == pid != os.getsid(0)
    fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    # requests, diagnostics (stdout and stderr), replies: nothing else
    assert len(fds) == 4 and all(t.startswith("pipe:") for t in fds.values()), fds
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert _limit(limits, "Max address space") == str(256 << 20)
    assert _limit(limits, "Max core file size") == "0"
    # PR_SET_PDEATHSIG does not show in /proc: test_no_child_survives_its_host checks it.
    assert call(pool, "-c", "[$ENV, env]", stdin="null").stdout == "[{},{}]\n"


def _limit(table: str, name: str) -> str:
    for line in table.splitlines():
        if line.startswith(name):
            return line[len(name) :].split()[0]
    raise AssertionError(name)


HOST = """
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from supervisor.scripted import ScriptedTool
from supervisor.scripted.text_tools.jq_tool import default_pool

first = []
worker = threading.Thread(
    target=lambda: first.append(ScriptedTool("t").execute_sync("echo 1 | jq .").stdout)
)
worker.start()
worker.join()  # the thread that first needed a child is gone; the child is not
pids = default_pool().engines()
again = ScriptedTool("t").execute_sync("echo 2 | jq .").stdout
print(json.dumps({"pids": pids, "after": default_pool().engines(), "out": first + [again]}))
sys.stdout.flush()
if sys.argv[2] == "wait":
    sys.stdin.read()
"""


def _host(mode: str) -> tuple[subprocess.Popen[str], dict[str, list[object]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, str(ROOT), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    report = json.loads(proc.stdout.readline())
    return proc, report


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_no_child_survives_its_host(ending: str) -> None:
    proc, report = _host("exit" if ending == "exit" else "wait")
    try:
        assert report["out"] == ["1\n", "2\n"]
        assert len(report["pids"]) == 1 and report["after"] == report["pids"]
        (pid,) = report["pids"]
        assert isinstance(pid, int)
        if ending == "sigkill":
            assert not gone(pid)
            proc.kill()  # no atexit, no finaliser: only PR_SET_PDEATHSIG is left
        proc.wait(timeout=20)
        assert wait_until(lambda: gone(pid)), f"jq engine {pid} survived its host"
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------ concurrency


def test_thread_pool_callers_share_the_engines_without_queueing() -> None:
    tool = ScriptedTool("t")
    loop = 'for i in $(seq 1 25); do echo "{\\"id\\": $i}" | jq -r .id; done | tail -1'
    finished: dict[str, float] = {}

    def fast(n: int) -> str:
        out = tool.execute_sync(loop).stdout
        finished[f"fast{n}"] = time.monotonic()
        return out

    def slow() -> str:
        out = tool.execute_request_sync({"commands": "jq -n 'def f: f; f'", "timeout_ms": 2500})
        finished["slow"] = time.monotonic()
        return out.stderr

    with ThreadPoolExecutor(6) as executor:
        hung = executor.submit(slow)
        results = list(executor.map(fast, range(10)))
        assert "timed out" in hung.result()
    assert results == ["25\n"] * 10
    # The filter that never ends held one child; the others kept answering meanwhile.
    assert max(finished[f"fast{n}"] for n in range(10)) < finished["slow"]
    assert len(default_pool().engines()) <= default_pool().limits.max_engines


def test_callers_wait_for_a_free_engine_when_all_are_busy() -> None:
    own = JqEnginePool(JqLimits(max_engines=1))
    try:
        call(own, ".", stdin="0")
        with ThreadPoolExecutor(4) as executor:
            outs = list(executor.map(lambda i: call(own, ".", stdin=str(i)).stdout, range(40)))
        assert outs == [f"{i}\n" for i in range(40)]
        assert len(own.engines()) == 1
        # A caller that cannot get an engine before its deadline fails like a timeout.
        engine = own.take()
        assert engine is not None
        with deadline_in(0.2):
            result = call(own, ".", stdin="1")
        assert result.stderr.startswith(TIMEOUT)
        own.give_back(engine)
    finally:
        own.close()


def test_results_match_the_in_process_implementation() -> None:
    cases = [
        (["-c", "."], '"\\u00e9\\ud83d\\ude00"'),
        (["-R", "-c", "."], "a\udcffb\n"),  # an undecodable byte, as the shell keeps it
        (["-r", ".[]"], '["x\\ny", "z"]'),
        ([".a"], "1 {"),
        (["--arg", "v", "w\udcfe", "-n", "$v | length"], None),
    ]
    for args, stdin in cases:
        got = TEXT_COMMANDS["jq"](list(args), stdin)
        assert got == run_jq(list(args), stdin), args
