"""Classifying how a sandbox ended, from bwrap's status, the counters and the caller."""

from __future__ import annotations

import signal

from sandbox.cgroups import CgroupCounters
from sandbox.termination import BwrapStatus, classify

NONE = CgroupCounters()


def status(*lines: bytes) -> BwrapStatus:
    s = BwrapStatus()
    for line in lines:
        s.feed(line)
    return s


STARTED = b'{ "child-pid": 42, "pid-namespace": 1 }\n'


def test_status_lines_are_parsed_across_reads() -> None:
    s = BwrapStatus()
    s.feed(b'{ "child-pid": 4')
    before = s.child_pid
    s.feed(b'2 }\n{ "exit-code"')
    s.feed(b": 3 }\n")
    assert before is None and (s.child_pid, s.exit_code) == (42, 3)


def test_status_names_the_pid_namespace_with_the_child() -> None:
    assert status(STARTED).pid_namespace == 1
    assert status(b'{ "child-pid": 42 }\n').pid_namespace is None
    assert status(b'{ "child-pid": 42, "pid-namespace": "x" }\n').pid_namespace is None


def test_status_ignores_garbage_and_bounds_partial_lines() -> None:
    s = status(b"not json\n", b"[1,2]\n", b"x" * 70000)
    assert s.child_pid is None and s._partial == b""


def test_exited_and_signal() -> None:
    t = classify(status=status(STARTED, b'{"exit-code": 3}\n'), returncode=3, counters=NONE)
    assert (t.reason, t.exit_code, t.signal, t.exit_status) == ("exited", 3, None, 3)
    t = classify(status=status(STARTED, b'{"exit-code": 139}\n'), returncode=139, counters=NONE)
    assert (t.reason, t.signal, t.exit_status) == ("signal", signal.SIGSEGV, 139)


def test_setup_failures() -> None:
    t = classify(status=status(STARTED), returncode=1, counters=NONE)
    assert t.reason == "setup" and t.exit_status == 125
    err = status(b'{"sandvisor-setup-error": "OSError: boom"}\n')
    t = classify(status=err, returncode=1, counters=NONE)
    assert t.reason == "setup" and "boom" in t.detail


def test_timeout_wins_and_exits_124() -> None:
    t = classify(
        status=status(STARTED), returncode=-9, counters=NONE, timed_out=True, kill_reason="timeout"
    )
    assert (t.reason, t.signal, t.exit_status) == ("timeout", 9, 124)


def test_memory_from_the_oom_counter() -> None:
    t = classify(
        status=status(STARTED, b'{"exit-code": 137}\n'),
        returncode=137,
        counters=CgroupCounters(oom_kills=1, peak_memory_bytes=99),
        memory_limit=100,
    )
    assert t.reason == "memory" and "memory" in t.limits_hit and t.peak_memory_bytes == 99
    assert t.exit_status == 137


def test_cpu_from_sigxcpu_or_time_used() -> None:
    t = classify(
        status=status(STARTED, b'{"exit-code": 152}\n'), returncode=152, counters=NONE, cpu_limit=1
    )
    assert t.reason == "cpu" and t.signal == signal.SIGXCPU
    t = classify(
        status=status(STARTED, b'{"exit-code": 137}\n'),
        returncode=137,
        counters=NONE,
        cpu_limit=1,
        cpu_seconds_used=2.0,
    )
    assert t.reason == "cpu"


def test_pids_only_when_the_program_failed() -> None:
    hit = CgroupCounters(pids_limit_hits=5)
    t = classify(status=status(STARTED, b'{"exit-code": 1}\n'), returncode=1, counters=hit)
    assert t.reason == "pids" and t.limits_hit == {"pids"}
    t = classify(status=status(STARTED, b'{"exit-code": 0}\n'), returncode=0, counters=hit)
    assert t.reason == "exited" and t.limits_hit == {"pids"}  # coped with it


def test_killed_before_bwrap_reported_a_status() -> None:
    t = classify(status=status(STARTED), returncode=137, counters=NONE, kill_reason="cancelled")
    assert t.reason == "killed" and t.signal == signal.SIGKILL and t.exit_status == 137


def test_host_kill_with_a_reason() -> None:
    t = classify(status=status(STARTED), returncode=-9, counters=NONE, kill_reason="cancelled")
    assert t.reason == "killed" and "cancelled" in t.detail and t.exit_status == 137


def test_to_json_round_trips_the_fields() -> None:
    t = classify(status=status(STARTED, b'{"exit-code": 0}\n'), returncode=0, counters=NONE)
    assert t.to_json()["reason"] == "exited" and t.to_json()["limits_hit"] == []
