#!/usr/bin/env python3
"""Benchmark the supervisor against the targets of the issues, with ratios measured in one
run (the machines are noisy, so the baseline is measured right next to what it judges,
in interleaved rounds; the figures are medians over the rounds).

    .venv/bin/python scripts/bench_supervisor.py [--quick] [--profile] [--only round-trip,...]

The baselines: a raw-pipe JSON-line echo. For one call at a time, a blocking loop writing
a line to one Python echo process and reading its answer; for throughput and host CPU,
the same load as sandvisor's (16 callers, two Python echo processes with one call in
flight each, on trio like the supervisor: each caller takes a free echo process, writes
its line with ``os.write``, waits for the answer with the loop's ``wait_readable``, reads
it and gives the process back).

1. warm ``invoke`` round trip of a trivial adapter, p50 (target: at most 2x the echo's);
2. throughput with ``pool_size=2``, ``max_in_flight=1``, 16 callers (target: at least
   0.5x the echo's calls/s), and host CPU per call, the host process's CPU time over the
   run divided by the calls (target: at most 4x the echo host's); the same with more
   calls in flight per worker, for information;
3. kill latency after a missed deadline, deadline to reaped, for an adapter that ignores
   its cancel (target: p99 at most 50 ms; the ratio is against a plain SIGKILL and reap
   of an unsandboxed Python process);
4. cooperative cancel to ``acknowledged`` for an adapter that checks its token (target:
   p50 at most 2 ms; the ratio is against the echo round trip: a cancel is one);
5. host memory per idle pooled session (target: at most 1 MiB);
6. pool acquire of a warm worker (target: at most 1 ms; the ratio is against acquiring
   and releasing a ``trio.Semaphore``).

``--profile`` runs cProfile over the throughput load (and over the echo's) and prints the
Python function calls per call: the host's work per call in the interpreter's own unit.

For information, the worker's own cost per call: the CPU time and the voluntary context
switches of all the threads of one sandbox's processes over calls that one session serves
(16 callers, ``pool_size=1``), against one echo process's under the same load. They
count work, not waiting: on a loaded machine the switches hold still and the CPU moves
less than the wall-time ratios do.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor import Supervisor

ADAPTERS = ["worker_runtime.examples:registry"]
ECHO_CHILD = r"""
import json, sys
r, w = sys.stdin.buffer, sys.stdout.buffer
for line in r:
    w.write(json.dumps(json.loads(line)).encode() + b"\n")
    w.flush()
"""
#: The throughput load: callers, and sessions (echo processes) with one call each.
CALLERS = 16
POOL = 2
RESULTS: list[tuple[str, str, bool]] = []


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def report(name: str, text: str, ok: bool) -> None:
    RESULTS.append((name, text, ok))
    print(f"{'PASS' if ok else 'MISS'}  {name}: {text}", flush=True)


class EchoProcess:
    """One Python echo process over raw pipes, driven from trio without a framework."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ECHO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.write_fd, self.read_fd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self.write_fd, False)
        os.set_blocking(self.read_fd, False)
        self.buffered = b""

    async def call(self, message: object) -> object:
        os.write(self.write_fd, json.dumps(message).encode() + b"\n")
        while (end := self.buffered.find(b"\n")) < 0:
            await trio.lowlevel.wait_readable(self.read_fd)
            self.buffered += os.read(self.read_fd, 65536)
        line, self.buffered = self.buffered[:end], self.buffered[end + 1 :]
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


class EchoPool:
    """The throughput baseline: ``size`` echo processes, one call in flight each, handed
    to callers in arrival order (a trio memory channel)."""

    def __init__(self, size: int = POOL) -> None:
        self.processes = [EchoProcess() for _ in range(size)]
        self._free, self._take = trio.open_memory_channel[EchoProcess](size)
        for process in self.processes:
            self._free.send_nowait(process)

    async def invoke(self, tool: str, value: str) -> object:
        process = await self._take.receive()
        try:
            return await process.call({"tool": tool, "value": value})
        finally:
            self._free.send_nowait(process)

    def close(self) -> None:
        for process in self.processes:
            process.close()


Invoke = Callable[[str, str], Awaitable[object]]


async def run_load(invoke: Invoke, seconds: float, callers: int) -> tuple[float, float, int]:
    """``callers`` tasks calling ``invoke`` for ``seconds``: (calls/s, host CPU seconds
    per call, calls)."""
    for _ in range(50):
        await invoke("text.upper", "hi")
    done = 0
    end = trio.current_time() + seconds

    async def caller() -> None:
        nonlocal done
        while trio.current_time() < end:
            await invoke("text.upper", "hi")
            done += 1

    cpu, start = time.process_time(), trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(callers):
            nursery.start_soon(caller)
    wall, cpu = trio.current_time() - start, time.process_time() - cpu
    return done / wall, cpu / done, done


async def spread_calls(invoke: Invoke, calls: int) -> None:
    """Exactly ``calls`` calls of ``invoke``, taken by `CALLERS` tasks as each is free."""
    left = calls

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await invoke("text.upper", "hi")

    async with trio.open_nursery() as nursery:
        for _ in range(CALLERS):
            nursery.start_soon(caller)


def supervisor_invoke(sup: Supervisor) -> Invoke:
    async def invoke(tool: str, value: str) -> object:
        out = await sup.invoke(tool, value)
        assert out.status == "completed", out
        return out.value

    return invoke


def on_cpu(pids: list[int]) -> float:
    """Seconds on a CPU so far of every thread of ``pids``: the scheduler's own count
    (``schedstat``, to the nanosecond; ``cpu_times`` counts in 10 ms ticks)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
    return total / 1e9


class RoundTrips:
    """One round of round trips: the samples, and over them the host's CPU (the thread
    or process that drove them) and the other side's (None: its process changed)."""

    def __init__(self, samples: list[float], host_cpu: float, peer_cpu: float | None) -> None:
        self.samples = samples
        self.host_cpu = host_cpu / len(samples)
        self.peer_cpu = None if peer_cpu is None else peer_cpu / len(samples)
        self.mean = sum(samples) / len(samples)


def echo_baseline(n: int) -> RoundTrips:
    """Round trips of one JSON line through a second Python process over raw pipes."""
    child = subprocess.Popen(
        [sys.executable, "-c", ECHO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    line = json.dumps({"tool": "text.upper", "value": "hi"}).encode() + b"\n"
    samples = []
    for i in range(n + 200):
        if i == 200:
            host, peer = time.thread_time(), on_cpu([child.pid])
        start = time.perf_counter()
        child.stdin.write(line)
        child.stdin.flush()
        json.loads(child.stdout.readline())
        if i >= 200:
            samples.append(time.perf_counter() - start)
    host, peer = time.thread_time() - host, on_cpu([child.pid]) - peer
    child.stdin.close()
    child.wait()
    return RoundTrips(samples, host, peer)


def sandbox_pids(sup: Supervisor) -> list[int]:
    """Every process of the supervisor's (one) session's sandbox."""
    (session,) = sup.pool.sessions
    assert session.pid is not None
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(session.pid)
        return [root.pid, *(child.pid for child in root.children(recursive=True))]
    return []


async def round_trips(sup: Supervisor, n: int) -> RoundTrips:
    for _ in range(100):
        await sup.invoke("text.upper", "hi")
    samples = []
    pids = sandbox_pids(sup)
    host, peer = time.process_time(), on_cpu(pids)
    for _ in range(n):
        start = time.perf_counter()
        out = await sup.invoke("text.upper", "hi")
        samples.append(time.perf_counter() - start)
        assert out.status == "completed"
    host, peer = time.process_time() - host, on_cpu(pids) - peer
    return RoundTrips(samples, host, peer if sandbox_pids(sup) == pids else None)


async def bench_round_trip(n: int, rounds: int) -> None:
    """Interleave the baseline and ours, several rounds; compare medians of the rounds.
    For information, where the time of a round trip goes (means per call, medians of
    the rounds): each side's CPU, and the rest (waiting for a CPU, waking up)."""
    base_rounds, ours_rounds = [], []
    async with Supervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as sup:
        for _ in range(rounds):
            base_rounds.append(await trio.to_thread.run_sync(echo_baseline, n))
            ours_rounds.append(await round_trips(sup, n))
    med = statistics.median
    base_us = med(pct(r.samples, 0.5) for r in base_rounds) * 1e6
    ours_us = med(pct(r.samples, 0.5) for r in ours_rounds) * 1e6
    ratio = ours_us / base_us
    report(
        "warm invoke round trip",
        f"p50 {ours_us:.0f} us, p99 {med(pct(r.samples, 0.99) for r in ours_rounds) * 1e6:.0f} "
        f"us; raw-pipe echo p50 {base_us:.0f} us; ratio {ratio:.1f}x (target <= 2x)",
        ratio <= 2,
    )

    def where(rounds: list[RoundTrips]) -> str:
        host = med(r.host_cpu for r in rounds) * 1e6
        peers = [r.peer_cpu for r in rounds if r.peer_cpu is not None]
        if not peers:
            return f"host CPU {host:.0f} us (the worker was replaced in every round)"
        peer = med(peers) * 1e6
        rest = med(r.mean for r in rounds) * 1e6 - host - peer
        return f"host CPU {host:.0f} us, other side {peer:.0f} us, the rest {rest:.0f} us"

    print(
        f"      a round trip's mean per call: sandvisor {where(ours_rounds)}; the echo "
        f"{where(base_rounds)}",
        flush=True,
    )


async def bench_throughput(seconds: float, rounds: int) -> None:
    """Interleaved rounds of the echo pool and the supervisor under the same load; the
    ratios of each round, then their medians."""
    echo = EchoPool()
    rate_ratio, cpu_ratio, ours_rate, ours_cpu, base_rate, base_cpu = ([] for _ in range(6))
    try:
        async with Supervisor(
            adapters=ADAPTERS, pool_size=POOL, max_in_flight=1, ping_interval=None
        ) as sup:
            for _ in range(rounds):
                b_rate, b_cpu, _ = await run_load(echo.invoke, seconds, CALLERS)
                o_rate, o_cpu, _ = await run_load(supervisor_invoke(sup), seconds, CALLERS)
                rate_ratio.append(o_rate / b_rate)
                cpu_ratio.append(o_cpu / b_cpu)
                ours_rate.append(o_rate)
                ours_cpu.append(o_cpu)
                base_rate.append(b_rate)
                base_cpu.append(b_cpu)
    finally:
        echo.close()
    med = statistics.median
    rate, cpu = med(rate_ratio), med(cpu_ratio)
    report(
        f"throughput, pool_size={POOL}, max_in_flight=1, {CALLERS} callers",
        f"{med(ours_rate):,.0f} calls/s; raw-pipe echo ({POOL} processes) "
        f"{med(base_rate):,.0f} calls/s; ratio {rate:.2f}x (target >= 0.5x)",
        rate >= 0.5,
    )
    report(
        "host CPU per call",
        f"{med(ours_cpu) * 1e6:.0f} us; raw-pipe echo host {med(base_cpu) * 1e6:.0f} us; "
        f"ratio {cpu:.1f}x (target <= 4x)",
        cpu <= 4,
    )


async def bench_throughput_in_flight(seconds: float, max_in_flight: int, callers: int) -> None:
    """More calls in flight per worker (information: no target), against the echo."""
    echo = EchoPool()
    try:
        base, _, _ = await run_load(echo.invoke, seconds, callers)
        async with Supervisor(
            adapters=ADAPTERS, pool_size=POOL, max_in_flight=max_in_flight, ping_interval=None
        ) as sup:
            rate, cpu, _ = await run_load(supervisor_invoke(sup), seconds, callers)
    finally:
        echo.close()
    print(
        f"      throughput pool_size={POOL} max_in_flight={max_in_flight}, {callers} callers: "
        f"{rate:,.0f} calls/s ({rate / base:.2f}x the echo's {base:,.0f}), "
        f"{cpu * 1e6:.0f} us host CPU per call",
        flush=True,
    )


async def profile_calls(calls: int) -> None:
    """cProfile over ``calls`` calls of the throughput load, sandvisor's and the echo's:
    Python function calls per call (cProfile slows both down; the counts are exact)."""

    async def count(invoke: Invoke) -> tuple[int, int]:
        for _ in range(200):
            await invoke("text.upper", "hi")
        profiler = cProfile.Profile()
        profiler.enable()
        await spread_calls(invoke, calls)
        profiler.disable()
        stats = pstats.Stats(profiler)
        return stats.total_calls, calls  # type: ignore[attr-defined]

    echo = EchoPool()
    try:
        base_calls, n = await count(echo.invoke)
    finally:
        echo.close()
    async with Supervisor(
        adapters=ADAPTERS, pool_size=POOL, max_in_flight=1, ping_interval=None
    ) as sup:
        ours_calls, n = await count(supervisor_invoke(sup))
    print(
        f"      profile over {n:,} calls ({CALLERS} callers, pool {POOL}): "
        f"{ours_calls / n:.0f} Python calls per sandvisor call, "
        f"{base_calls / n:.0f} per raw-pipe echo call ({ours_calls / base_calls:.1f}x)",
        flush=True,
    )


def process_cost(pids: list[int]) -> tuple[float, int]:
    """CPU seconds and voluntary context switches so far of every thread of ``pids``."""
    cpu, switches = 0.0, 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            cpu += times.user + times.system
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/status") as status:
                    for line in status:
                        if line.startswith("voluntary_ctxt_switches"):
                            switches += int(line.split()[1])
    return cpu, switches


async def bench_worker_cost(calls: int) -> None:
    """The worker's CPU and voluntary switches per call (information), one session's
    calls under 16 callers, against one echo process's under the same load."""

    async def measure(invoke: Invoke, pids: list[int]) -> tuple[float, float]:
        for _ in range(50):
            await invoke("text.upper", "hi")
        cpu, switches = process_cost(pids)
        await spread_calls(invoke, calls)
        cpu_after, switches_after = process_cost(pids)
        return (cpu_after - cpu) / calls, (switches_after - switches) / calls

    echo = EchoPool(1)  # one process, as one session
    try:
        base_cpu, base_switches = await measure(echo.invoke, [echo.processes[0].proc.pid])
    finally:
        echo.close()
    async with Supervisor(
        adapters=ADAPTERS, pool_size=1, max_in_flight=1, ping_interval=None
    ) as sup:
        (session,) = sup.pool.sessions
        assert session.pid is not None
        root = psutil.Process(session.pid)
        pids = [root.pid, *(child.pid for child in root.children(recursive=True))]
        started = session.calls_started
        cpu, switches = await measure(supervisor_invoke(sup), pids)
        served = session.calls_started - started
    assert served == calls + 50, f"the session served {served} calls: it was replaced"
    print(
        f"      worker per call (pool_size=1, {CALLERS} callers, {calls:,} calls of one "
        f"session): {cpu * 1e6:.0f} us CPU, {switches:.2f} voluntary switches; one echo "
        f"process {base_cpu * 1e6:.0f} us, {base_switches:.2f} ({cpu / base_cpu:.1f}x CPU)",
        flush=True,
    )


def plain_kill_baseline(samples: int) -> list[float]:
    """SIGKILL to reaped of an unsandboxed Python process (the floor of any kill)."""
    latencies = []
    for _ in range(samples):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(0.05)
        start = time.perf_counter()
        child.send_signal(signal.SIGKILL)
        child.wait()
        latencies.append(time.perf_counter() - start)
    return latencies


async def bench_kill_latency(samples: int) -> None:
    """Deadline to reaped: the outcome returns only once the sandbox is reaped."""
    base = await trio.to_thread.run_sync(plain_kill_baseline, min(samples, 20))
    latencies = []
    async with Supervisor(adapters=ADAPTERS, pool_size=4, ping_interval=None) as sup:
        grace = sup.pool.sessions[0].config.cancel_grace
        for _ in range(samples):
            with trio.fail_after(30):
                while sup.pool.alive < 4:
                    await trio.sleep(0.01)
            start = trio.current_time()
            out = await sup.invoke("stubborn.sleep", "60", deadline=0.05)
            reaped = trio.current_time()
            assert out.status == "indeterminate", out
            latencies.append(reaped - (start + 0.05))
    p99 = pct(latencies, 0.99)
    report(
        "kill latency after a missed deadline",
        f"p50 {pct(latencies, 0.5) * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms over {samples} kills "
        f"(grace {grace * 1e3:.0f} ms included; target p99 <= 50 ms); a plain SIGKILL and "
        f"reap p50 {pct(base, 0.5) * 1e3:.2f} ms (p50 ratio "
        f"{pct(latencies, 0.5) / pct(base, 0.5):.0f}x)",
        p99 <= 0.050,
    )


async def bench_cancel_ack(samples: int) -> None:
    base = pct((await trio.to_thread.run_sync(echo_baseline, 1000)).samples, 0.5)
    latencies = []
    async with Supervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as sup:
        for _ in range(samples):
            handle = await sup.start("sleep", "60")
            await trio.sleep(0.02)
            start = trio.current_time()
            out = await handle.cancel()
            latencies.append(trio.current_time() - start)
            assert out.status == "cancelled", out
    p50 = pct(latencies, 0.5)
    report(
        "cancel to acknowledged",
        f"p50 {p50 * 1e3:.2f} ms, p99 {pct(latencies, 0.99) * 1e3:.2f} ms (target p50 <= 2 ms); "
        f"{p50 / base:.1f}x the echo round trip ({base * 1e6:.0f} us)",
        p50 <= 0.002,
    )


async def bench_idle_memory(sessions: int) -> None:
    """RSS and Python allocations of ``sessions`` more idle pooled sessions."""

    async def measure(pool: int) -> tuple[int, int]:
        async with Supervisor(adapters=ADAPTERS, pool_size=pool, ping_interval=None) as sup:
            await sup.invoke("text.upper", "warm")
            await trio.sleep(0.2)
            gc.collect()
            rss = psutil.Process().memory_info().rss
            traced = tracemalloc.get_traced_memory()[0]
            assert sup.pool.alive == pool
            return rss, traced

    tracemalloc.start()
    small = await measure(1)
    big = await measure(1 + sessions)
    tracemalloc.stop()
    rss_per = (big[0] - small[0]) / sessions
    py_per = (big[1] - small[1]) / sessions
    per = max(rss_per, py_per)
    report(
        "host memory per idle session",
        f"RSS {rss_per / 1024:.0f} KiB, Python heap {py_per / 1024:.0f} KiB per session "
        f"(over {sessions} sessions; target <= 1024 KiB)",
        per <= 1024 * 1024,
    )


async def bench_acquire(n: int) -> None:
    semaphore = trio.Semaphore(2)
    base = []
    for _ in range(n):
        start = time.perf_counter()
        await semaphore.acquire()
        base.append(time.perf_counter() - start)
        semaphore.release()
    async with Supervisor(adapters=ADAPTERS, pool_size=2, ping_interval=None) as sup:
        pool = sup.pool
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            session = await pool.acquire()
            samples.append(time.perf_counter() - start)
            pool.release(session)
    p50 = pct(samples, 0.5)
    report(
        "pool acquire of a warm worker",
        f"p50 {p50 * 1e6:.1f} us, p99 {pct(samples, 0.99) * 1e6:.1f} us (target <= 1 ms); "
        f"{p50 / pct(base, 0.5):.1f}x a trio.Semaphore's ({pct(base, 0.5) * 1e6:.1f} us)",
        pct(samples, 0.99) <= 0.001,
    )


#: The measures ``--only`` can pick, in the order they run.
MEASURES = (
    *("round-trip", "throughput", "in-flight", "worker"),
    *("kill", "cancel", "memory", "acquire"),
)


async def main(quick: bool, profile: bool, only: frozenset[str]) -> int:
    print(f"host: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}", flush=True)
    if profile:
        await profile_calls(2000 if quick else 6000)
    if "round-trip" in only:
        await bench_round_trip(n=500 if quick else 2000, rounds=3 if quick else 5)
    if "throughput" in only:
        await bench_throughput(1.0 if quick else 2.0, rounds=3 if quick else 7)
    if "in-flight" in only:
        for in_flight, callers in ((4, 16), (8, 32)):
            await bench_throughput_in_flight(1.0 if quick else 2.0, in_flight, callers)
    if "worker" in only:
        await bench_worker_cost(1500)
    if "kill" in only:
        await bench_kill_latency(15 if quick else 50)
    if "cancel" in only:
        await bench_cancel_ack(50 if quick else 200)
    if "memory" in only:
        await bench_idle_memory(8 if quick else 16)
    if "acquire" in only:
        await bench_acquire(1000 if quick else 10000)
    missed = [name for name, _, ok in RESULTS if not ok]
    print(f"\n{len(RESULTS) - len(missed)} of {len(RESULTS)} targets met"
          + (f"; missed: {', '.join(missed)}" if missed else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument(
        "--profile", action="store_true", help="also count Python calls per call (cProfile)"
    )
    parser.add_argument(
        "--only",
        type=lambda text: text.split(","),
        default=list(MEASURES),
        help=f"run only these measures, comma-separated, of: {','.join(MEASURES)}",
    )
    args = parser.parse_args()
    if unknown := set(args.only) - set(MEASURES):
        parser.error(f"--only: unknown measure(s) {sorted(unknown)}; pick of {','.join(MEASURES)}")
    sys.exit(trio.run(main, args.quick, args.profile, frozenset(args.only)))
