#!/usr/bin/env python3
"""Benchmark the hosts: a call from asyncio (and from threads) against the same call from
trio, and a `sandvisor serve` round trip against an in-process invoke.

Targets (issue "Hosting"): a call from asyncio through sandvisor at most 1.3x the same call
from trio; a `sandvisor serve` round trip at most 2x an in-process invoke. The machines
are noisy, so every figure is a ratio against a baseline measured in the same run, in
interleaved batches against the same workers:

- asyncio / trio: an `AsyncioSupervisor` on the benchmark's asyncio loop against a trio
  `Supervisor` with the same arguments in its own ``trio.run`` (a `SyncSupervisor`'s host
  thread, whose batches run there through ``call_in_host``), one worker each;
- sync / trio: the same with a `SyncSupervisor` (for information: no target);
- serve / in-process: a stdlib JSON-lines client against ``sandvisor serve`` (write the
  request, read its events through the outcome) against trio ``Supervisor.invoke`` in
  this process, each with one worker of the example adapters.

The call is ``text.upper`` on a short string: the smallest real round trip through a
sandboxed worker, so the ratio shows the host's own overhead at its largest (a last row
shows the same for a tool that works 2 ms: the overhead in proportion). Reported:
the ratio of the medians of all calls (the target's measure), and the ratio of the
first quartiles (what a quiet machine would see).

Usage: scripts/bench_hosting.py [--quick] [--check]
(``--check`` exits 1 when a target is missed.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from supervisor.hosting import AsyncioSupervisor, SyncSupervisor
from supervisor.workers.outcome import Outcome

ADAPTERS = ["worker_runtime.examples:registry"]
TOOL, VALUE = "text.upper", "hello"
ASYNCIO_TARGET = 1.3
SERVE_TARGET = 2.0


class Invoker(Protocol):
    """What a batch calls: a trio `Supervisor` or an `AsyncioSupervisor`."""

    async def invoke(self, tool: str, value: Any) -> Outcome: ...


def invoke_batch(
    count: int, tool: str = TOOL, value: str = VALUE
) -> Callable[[Invoker], Awaitable[list[float]]]:
    """A batch of timed invokes, run in the supervisor's own loop (trio or asyncio)."""

    async def batch(sup: Invoker) -> list[float]:
        times = []
        for _ in range(count):
            began = time.perf_counter()
            out = await sup.invoke(tool, value)
            times.append(time.perf_counter() - began)
            assert out.status == "completed"
        return times

    return batch


class Pairs:
    """Samples of a measure and its baseline, taken in small interleaved batches so that
    both see the same moments of a busy machine."""

    def __init__(self) -> None:
        self.measure: list[float] = []
        self.baseline: list[float] = []

    def add(self, measure: list[float], baseline: list[float]) -> None:
        self.measure += measure
        self.baseline += baseline

    def report(self, name: str, target: float | None) -> bool:
        median_m, median_b = statistics.median(self.measure), statistics.median(self.baseline)
        ratio = median_m / median_b
        quiet = _quartile(self.measure) / _quartile(self.baseline)
        ok = target is None or ratio <= target
        goal = "" if target is None else f"  target <= {target:.1f}x: {'ok' if ok else 'MISSED'}"
        print(
            f"{name:<20} {median_m * 1e3:6.3f} ms vs {median_b * 1e3:6.3f} ms: "
            f"{ratio:4.2f}x (first quartiles {quiet:4.2f}x){goal}"
        )
        return ok


def _quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4)[0]


def bench_asyncio(rounds: int, batch: int, tool: str = TOOL, value: str = VALUE) -> Pairs:
    """asyncio invokes (an `AsyncioSupervisor` on this loop) against trio ones (a trio
    `Supervisor` in its own ``trio.run``, in a `SyncSupervisor`'s thread), same config,
    one worker each, in interleaved batches: while one side runs, the other idles."""
    pairs = Pairs()

    async def main() -> None:
        with SyncSupervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as host:
            async with AsyncioSupervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as sup:
                for _ in range(50):
                    await sup.invoke(tool, value)
                await asyncio.to_thread(host.call_in_host, invoke_batch(50, tool, value))
                for _ in range(rounds):
                    times = await invoke_batch(batch, tool, value)(sup)
                    baseline = await asyncio.to_thread(
                        host.call_in_host, invoke_batch(batch, tool, value)
                    )
                    pairs.add(times, baseline)

    asyncio.run(main())
    return pairs


def bench_sync(rounds: int, batch: int) -> Pairs:
    pairs = Pairs()
    with SyncSupervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as sup:
        for _ in range(50):
            sup.invoke(TOOL, VALUE)
        for _ in range(rounds):
            times = []
            for _ in range(batch):
                began = time.perf_counter()
                sup.invoke(TOOL, VALUE)
                times.append(time.perf_counter() - began)
            pairs.add(times, sup.call_in_host(invoke_batch(batch)))
    return pairs


def bench_serve(rounds: int, batch: int) -> Pairs:
    pairs = Pairs()
    serve = subprocess.Popen(
        [sys.executable, "-m", "supervisor", "serve"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert serve.stdin is not None and serve.stdout is not None
    stdin, stdout = serve.stdin, serve.stdout

    def request(message: dict[str, object], until: str) -> dict[str, object]:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        while True:
            event = json.loads(stdout.readline())
            if event["event"] in (until, "error"):
                assert event["event"] == until, event
                return dict(event)

    request({"op": "hello", "id": 0, "adapters": ADAPTERS, "pool_size": 1}, "ready")
    invoke = {"op": "invoke", "id": 1, "tool": TOOL, "input": VALUE, "stream": False}
    try:
        with SyncSupervisor(adapters=ADAPTERS, pool_size=1, ping_interval=None) as sup:
            for _ in range(50):
                request(invoke, "outcome")
            sup.call_in_host(invoke_batch(50))
            for _ in range(rounds):
                times = []
                for _ in range(batch):
                    began = time.perf_counter()
                    request(invoke, "outcome")
                    times.append(time.perf_counter() - began)
                pairs.add(times, sup.call_in_host(invoke_batch(batch)))
        request({"op": "shutdown", "id": 2}, "bye")
    finally:
        stdin.close()
        serve.wait(30)
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    rounds, batch = (60, 5) if args.quick else (300, 5)
    print(f"bench_hosting: {TOOL!r} round trips, {rounds} interleaved rounds of {batch}")
    ok = bench_asyncio(rounds, batch).report("asyncio / trio", ASYNCIO_TARGET)
    bench_sync(rounds, batch).report("sync / trio", None)
    bench_asyncio(rounds // 3, batch, "sleep", "0.002").report("asyncio, 2 ms tool", None)
    ok &= bench_serve(rounds, batch).report("serve / in-process", SERVE_TARGET)
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
