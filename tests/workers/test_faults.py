"""Every fault of the issue, injected with real workers and real signals.

After each: the call ended in exactly one outcome, the session that misbehaved is dead
and reaped with nothing of its sandbox alive (checked when the supervisor closes), and
the supervisor keeps serving from a fresh session.
"""

from __future__ import annotations

import json
import os
import signal

import pytest
import trio
from sv_support import (
    check_ledger,
    ended_session,
    fake_worker,
    rss,
    supervisor,
    worker_process,
)

KiB = 1024
MiB = 1024 * KiB


async def test_worker_sigkilled_mid_call() -> None:
    async with supervisor() as sup:
        handle = await sup.start("sleep", "30")
        await trio.sleep(0.3)
        session = sup.pool.sessions[0]
        worker_process(session.pid).send_signal(signal.SIGKILL)
        out = await handle.outcome()
        assert out.status == "indeterminate"
        assert out.kill_reason in ("crash:SIGKILL", "crash:exit:137", "eof")
        assert sup.ledger.status(out.op_id).indeterminate
        assert (await sup.invoke("echo", "again")).status == "completed"


async def test_worker_kills_itself_mid_call() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("suicide", "")
        assert out.status == "indeterminate" and out.kill_reason is not None
        assert out.kill_reason.startswith(("crash:", "eof"))
        check_ledger(sup)


async def test_worker_hangs() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("hang", "", deadline=0.3)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")


async def test_worker_ignores_cancel() -> None:
    async with supervisor() as sup:
        handle = await sup.start("stubborn", "30")
        await trio.sleep(0.2)
        out = await handle.cancel()
        assert (out.status, out.kill_reason) == ("indeterminate", "host_cancel")


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("garbage", "protocol:bad_tag"),
        ("forged", "protocol:tag_mismatch"),
        ("replay", "protocol:bad_sequence"),
        ("unknown_rid", "protocol:unknown_request"),
        ("endless", "protocol:line_too_long"),
        ("exit", "crash:exit:7"),
    ],
)
async def test_protocol_faults_poison_the_session(mode: str, reason: str) -> None:
    async with supervisor(**fake_worker(mode)) as sup:
        out = await sup.invoke("fake", "abc", deadline=10)
        assert (out.status, out.kill_reason) == ("indeterminate", reason)
        dead = await ended_session(sup, out.session_id)
        assert dead.end_reason == reason  # type: ignore[attr-defined]
        assert dead.returncode is not None  # type: ignore[attr-defined]
        # a fresh session (new id, new key) takes the next call; it misbehaves the same
        again = await sup.invoke("fake", "abc", deadline=10)
        assert again.session_id != out.session_id and again.status == "indeterminate"


async def test_a_chunk_after_the_result_poisons_but_the_result_stands() -> None:
    async with supervisor(**fake_worker("chunk_after_result")) as sup:
        out = await sup.invoke("fake", "abc")
        assert (out.status, out.value) == ("completed", "done")
        with trio.fail_after(5):
            while not sup.pool.history:
                await trio.sleep(0.01)
        assert sup.pool.history[0].end_reason == "protocol:unknown_request"


async def test_half_a_frame_then_silence() -> None:
    async with supervisor(**fake_worker("half_frame"), frame_timeout=0.3) as sup:
        started = trio.current_time()
        out = await sup.invoke("fake", "abc")  # no deadline: the frame timeout ends it
        assert (out.status, out.kill_reason) == ("indeterminate", "protocol:frame_timeout")
        assert trio.current_time() - started < 5


async def test_half_a_frame_within_a_deadline() -> None:
    async with supervisor(**fake_worker("half_frame")) as sup:
        out = await sup.invoke("fake", "abc", deadline=0.3)
        assert (out.status, out.kill_reason) == ("indeterminate", "deadline")


async def test_a_well_behaved_fake_is_served() -> None:
    async with supervisor(**fake_worker("ok")) as sup:
        out = await sup.invoke("fake", "abc")
        assert (out.status, out.value) == ("completed", "cba")


async def test_worker_never_reads_while_the_host_writes_a_large_input() -> None:
    async with supervisor(**fake_worker("no_read"), pool_size=2) as sup:
        big = "x" * (400 * KiB)  # far beyond the pipe's buffer
        handle = await sup.start("fake", big, deadline=0.5)
        # the host is not blocked: the other session answers meanwhile... and the same
        # worker kind never reads: so this one times out too, independently
        other = await sup.start("fake", "small", deadline=0.5)
        for h in (handle, other):
            out = await h.outcome()
            assert (out.status, out.kill_reason) == ("indeterminate", "deadline")


async def test_worker_floods_stdout_and_stderr() -> None:
    async with supervisor() as sup:
        await sup.invoke("echo", "warm")
        before = rss()
        out = await sup.invoke("flood", "16")  # 16 MiB on each stream
        assert (out.status, out.value) == ("completed", "flooded")
        session = sup.pool.sessions[0]
        assert session.stdout.total >= 16 * MiB and len(session.stdout.kept) == 64 * KiB
        assert session.stderr.dropped > 0
        assert rss() - before < 16 * MiB  # bounded: nothing like the 32 MiB written
        assert (await sup.invoke("echo", "fine")).status == "completed"


async def test_fork_bomb_is_contained_and_the_host_stays_responsive() -> None:
    async with supervisor(pool_size=2) as sup:
        bomb = await sup.start("forkbomb", "10", deadline=20)
        for _ in range(5):  # the other session answers while the bomb runs
            assert (await sup.invoke("echo", "alive")).status == "completed"
        out = await bomb.outcome()
        assert out.status == "completed"
        assert json.loads(out.value)["failed"] == 20  # the pids limit said no
    # supervisor() checked that nothing of either sandbox survives


async def test_memory_bomb_is_killed_as_memory() -> None:
    from sandbox.policy import SandboxPolicy

    async with supervisor(policy=SandboxPolicy(memory_bytes=96 * MiB)) as sup:
        out = await sup.invoke("memhog", "", deadline=20)
        assert out.status == "indeterminate"
        assert out.kill_reason == "memory" and out.termination == "memory"


async def test_host_sigkill_of_a_call_group_leaves_no_orphans() -> None:
    async with supervisor(pool_size=2, max_in_flight=2) as sup:
        handles = [await sup.start("hang", "") for _ in range(3)]
        await trio.sleep(0.3)
        pids = [s.pid for s in sup.pool.sessions if s.pid is not None]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)  # the bwrap process itself
        outs = [await h.outcome() for h in handles]
        assert {o.status for o in outs} == {"indeterminate"}
