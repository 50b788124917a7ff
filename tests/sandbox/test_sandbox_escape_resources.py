"""Escape suite, resources: A9 signals to the host, A13 fork bomb, A14 memory bomb, A15
spinners, sleepers and stopped processes, A16 output floods, A17 stalled pipes.

The bombs run beside a sibling sandbox and host processes that must not notice them.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
import time

import psutil
import pytest
from sandbox_helpers import py_policy, read_line, run_json, run_py, start_py

from sandbox.handle import Sandbox
from sandbox.policy import MiB
from sandbox.runner import run

pytestmark = [pytest.mark.bwrap, pytest.mark.cgroup]

SIBLING = """
import time
print("ready", flush=True)
total = 0
for i in range(100):
    total += sum(range(1000))
    time.sleep(0.01)
print("done", total, flush=True)
"""


def sibling_finishes(sandbox: Sandbox) -> None:
    assert read_line(sandbox, timeout=30).startswith("done")
    assert sandbox.wait(10) == 0


def test_a9_signals_cannot_reach_the_host_or_a_sibling() -> None:
    host_sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with start_py(SIBLING) as sibling:
            assert read_line(sibling) == "ready"
            code = f"""
def err(r):
    return errno.errorcode.get(r, r)
res = {{"kill_all": sc("kill", -1, 9), "host_pid": err(sc("kill", {host_sleeper.pid}, 9)),
       "host_group": err(sc("kill", -{os.getpgid(0)}, 9)), "init": sc("kill", 1, 9)}}
out(res)
"""
            res = run_json(code)
            assert res["host_pid"] == "ESRCH" and res["host_group"] == "ESRCH"
            sibling_finishes(sibling)
        assert host_sleeper.poll() is None
    finally:
        host_sleeper.kill()
        host_sleeper.wait()


FORK_BOMB = """
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_a13_fork_bomb_is_contained() -> None:
    with start_py(SIBLING) as sibling:
        assert read_line(sibling) == "ready"
        started = time.monotonic()
        result = run_py(FORK_BOMB, policy=py_policy(pids=32), timeout=3)
        # the host can still start processes while the bomb runs its course
        assert subprocess.run(["true"]).returncode == 0
        sibling_finishes(sibling)
    assert result.reason == "timeout" and "pids" in result.termination.limits_hit
    assert time.monotonic() - started < 15


def test_a13_fork_failure_is_reported_as_the_pids_limit() -> None:
    code = "pids = [os.fork() for _ in range(64)]\n"
    result = run_py(code, policy=py_policy(pids=16), timeout=20)
    assert result.reason == "pids" and result.termination.limits_hit == {"pids"}
    assert b"BlockingIOError" in result.stderr or b"Resource temporarily" in result.stderr


def test_a14_memory_bomb_is_killed_and_classified() -> None:
    with start_py(SIBLING) as sibling:
        assert read_line(sibling) == "ready"
        result = run_py(
            "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n",
            policy=py_policy(memory_bytes=64 * MiB),
            timeout=20,
        )
        sibling_finishes(sibling)
    assert result.reason == "memory" and result.exit_status == 137
    peak = result.termination.peak_memory_bytes
    assert peak is not None and 48 * MiB < peak <= 64 * MiB


def test_a14_tmpfs_and_shm_fill_up_at_their_size() -> None:
    code = """
res = {}
for path in ("/tmp/fill", "/dev/shm/fill"):
    written = 0
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"x" * (1 << 20)); f.flush(); written += 1
    except OSError as e:
        res[path] = [errno.errorcode[e.errno], written]
    os.unlink(path)
out(res)
"""
    res = run_json(code, policy=py_policy(tmpfs_bytes=8 * MiB, memory_bytes=128 * MiB))
    for path in ("/tmp/fill", "/dev/shm/fill"):
        err, written = res[path]
        assert err == "ENOSPC" and written <= 8


def test_a14_address_space_and_file_size_limits() -> None:
    code = """
res = {}
try:
    b = bytearray(512 << 20); res["alloc"] = "ok"
except MemoryError:
    res["alloc"] = "MemoryError"
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"x" * (3 << 20))
    res["fsize"] = "ok"
except OSError as e:
    res["fsize"] = errno.errorcode[e.errno]
out(res)
"""
    policy = py_policy(address_space_bytes=256 * MiB, file_size_bytes=2 * MiB)
    assert run_json(code, policy=policy) == {"alloc": "MemoryError", "fsize": "EFBIG"}


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass\n",
        "import time\ntime.sleep(1e6)\n",
        "import time\nos.fork(); os.fork()\nos.kill(os.getpid(), signal.SIGSTOP)\n"
        "time.sleep(1e6)\n",
        "signal.pthread_sigmask(signal.SIG_BLOCK, range(1, 65))\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass\n",
    ],
    ids=["spinner", "sleeper", "stopped-tree", "blocks-signals"],
)
def test_a15_wall_deadline_kills_spinners_sleepers_and_stopped_trees(code: str) -> None:
    started = time.monotonic()
    result = run_py(code, timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.reason == "timeout" and result.exit_status == 124
    assert elapsed < 5, elapsed


def test_a15_cpu_limit_ends_a_spinner_as_cpu() -> None:
    result = run_py("while True:\n    pass\n", policy=py_policy(cpu_seconds=1), timeout=30)
    assert result.reason == "cpu" and result.termination.signal == signal.SIGXCPU
    assert "cpu" in result.termination.limits_hit


def test_a16_floods_are_capped_and_the_host_stays_flat() -> None:
    rss_before = psutil.Process().memory_info().rss
    result = run_py(
        "while True:\n    sys.stdout.buffer.write(b'x' * 65536)\n", timeout=1.5, stdout_cap=MiB
    )
    assert result.reason == "timeout"
    assert len(result.stdout) == MiB and result.stdout_truncated and result.stdout_dropped > 0
    grown = psutil.Process().memory_info().rss - rss_before
    assert grown < 32 * MiB, grown


def test_a16_bytes_pass_untouched_and_both_streams_are_capped() -> None:
    payload = b"\x00\xff\xfe bad utf-8 \xed\xa0\x80 lone surrogate \x00"
    code = f"""
sys.stdout.buffer.write({payload!r}); sys.stdout.flush()
sys.stderr.buffer.write(b"e" * (5 << 20)); sys.stderr.flush()
sys.stdout.buffer.write(b"y" * (5 << 20))
"""
    result = run_py(code, stdout_cap=MiB, stderr_cap=4096, timeout=30)
    assert result.reason == "exited"
    assert result.stdout.startswith(payload) and len(result.stdout) == MiB
    assert result.stderr == b"e" * 4096 and result.stderr_dropped == (5 << 20) - 4096


def test_a17_a_program_that_never_reads_stdin_does_not_block_the_host() -> None:
    started = time.monotonic()
    result = run_py("import time\ntime.sleep(0.2)\nprint('bye')\n", input=b"z" * (16 << 20))
    assert result.reason == "exited" and result.stdout == b"bye\n"
    assert time.monotonic() - started < 10


def test_a17_a_stalled_half_line_is_ended_by_the_deadline() -> None:
    code = "sys.stdout.write('half a fra'); sys.stdout.flush()\nimport time\ntime.sleep(1e6)\n"
    result = run_py(code, timeout=0.5)
    assert result.reason == "timeout" and result.stdout == b"half a fra"


def test_a17_input_is_delivered_in_full() -> None:
    data = os.urandom(3 << 20)
    code = "import hashlib\nprint(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n"
    result = run_py(code, input=data)
    assert result.stdout.decode().strip() == hashlib.sha256(data).hexdigest()


def test_the_host_process_limits_are_untouched() -> None:
    before = {r: resource.getrlimit(r) for r in (resource.RLIMIT_NOFILE, resource.RLIMIT_CORE)}
    run(py_policy(open_files=32), ["true"], timeout=10)
    after = {r: resource.getrlimit(r) for r in before}
    assert before == after
    assert sys.getrecursionlimit() > 0
