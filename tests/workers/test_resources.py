"""What the host keeps: no fd leaks, bounded memory, nothing of any sandbox left behind."""

from __future__ import annotations

import gc

import trio
from proc_helpers import alive, fd_table, fds_opened
from sv_support import fake_worker, rss, supervisor

MiB = 1024 * 1024


async def test_no_fd_leaks_across_normal_and_faulty_sessions() -> None:
    async with supervisor() as sup:  # warm-up: the sandbox's one-time fd plugs
        await sup.invoke("echo", "x")
    gc.collect()
    before = fd_table()
    async with supervisor(pool_size=2) as sup:
        await sup.invoke("echo", "x")
        await sup.invoke("hang", "", deadline=0.2)
        await sup.invoke("suicide", "")
        handle = await sup.start("stubborn", "9")
        await trio.sleep(0.1)
        await handle.cancel()
        assert fds_opened(before, fd_table())  # sessions hold pipes while they live
    async with supervisor(**fake_worker("garbage")) as sup:
        await sup.invoke("fake", "x")
    gc.collect()
    assert not fds_opened(before, fd_table())


async def test_host_memory_stays_bounded_over_many_sessions() -> None:
    async with supervisor(pool_size=2, max_calls_per_worker=5) as sup:
        for _ in range(20):
            await sup.invoke("echo", "warm")
        gc.collect()
        before = rss()
        for i in range(150):  # 30 sessions retired and replaced
            out = await sup.invoke("echo", str(i))
            assert out.status == "completed"
        gc.collect()
        assert rss() - before < 24 * MiB
        assert sup.pool.started_sessions >= 30


async def test_many_killed_sessions_leave_nothing_behind() -> None:
    async with supervisor(pool_size=2) as sup:
        for _ in range(3):  # two at a time, one per session
            with trio.fail_after(10):
                while sup.pool.alive < 2:
                    await trio.sleep(0.02)
            handles = [await sup.start("hang", "", deadline=0.3) for _ in range(2)]
            for handle in handles:
                assert (await handle.outcome()).status == "indeterminate"
        with trio.fail_after(10):
            while len(sup.pool.history) < 6:
                await trio.sleep(0.02)
        for session in sup.pool.history:
            assert alive(session.survivors()) == [] and session.returncode is not None
