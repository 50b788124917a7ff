#!/usr/bin/env python3
"""Benchmark a sandboxed MCP server against the same server run unsandboxed, with both
measured in one run, interleaved (the machines are noisy):

    .venv/bin/python scripts/bench_mcp.py [--quick] [--start] [--starts N] [--hops]

1. a trivial call (server-everything's ``echo``): ``Supervisor.invoke`` through the
   bridge in the sandbox, p50, against the MCP SDK's own client calling the same server
   unsandboxed (target: at most 1.5x);
2. a cold start: a fresh sandbox, the bridge, the server, ``initialize`` and
   ``tools/list`` until the session is ready, and on to the first ``echo`` result,
   against the SDK client starting the same server unsandboxed through ``initialize``,
   ``tools/list`` and the first ``echo`` (target: at most 1.3x). The two are measured in
   pairs, one right after the other, and the median of the pairs' ratios is reported with
   their range (the load of a shared machine drifts within seconds).

``--start``: only the cold starts; ``--supervisor``: also ``Supervisor(mcp_server=...)``
from nothing to its first result, in pairs with the SDK client (no target: one cold start
of the server, whose listing sandbox becomes the first session, and the supervisor's own
start: its spawner's fork server, its ledger);
``--hops``: where a sandboxed cold start's time goes,
each step the bridge reports (``SANDVISOR_MCP_HOPS=1`` in its environment: the
interpreter up, the server spawned, the bridge loaded, ``initialize`` answered, the tools
listed, the bootstrap read, ``ready`` sent) against the SDK client's steps.

The servers are the pinned test servers (``scripts/mcp-test-servers`` installs them).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox import SandboxPolicy, Spawner  # noqa: E402
from supervisor import Supervisor  # noqa: E402
from supervisor.workers.grants import default_policy, grant_for  # noqa: E402
from supervisor.workers.mcp_worker import bridge_command  # noqa: E402
from supervisor.workers.sandboxed import SandboxLauncher  # noqa: E402
from supervisor.workers.session import Session, SessionConfig  # noqa: E402

EVERYTHING = (
    ROOT / ".cache/mcp-servers/npm/node_modules/@modelcontextprotocol/server-everything/dist"
)
SERVER = ["node", str(EVERYTHING / "index.js")]


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def sdk_calls(n: int) -> list[float]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    samples = []
    with open("/dev/null", "w") as null:
        async with (
            stdio_client(params, errlog=null) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for _ in range(20):
                await session.call_tool("echo", {"message": "x"})
            for _ in range(n):
                start = time.perf_counter()
                await session.call_tool("echo", {"message": "x"})
                samples.append(time.perf_counter() - start)
    return samples


async def sandboxed_calls(n: int) -> list[float]:
    samples = []
    async with Supervisor(mcp_server=SERVER, ping_interval=None, start_timeout=30) as sup:
        for _ in range(20):
            await sup.invoke("echo", {"message": "x"})
        for _ in range(n):
            start = time.perf_counter()
            out = await sup.invoke("echo", {"message": "x"})
            samples.append(time.perf_counter() - start)
            assert out.status == "completed", out
    return samples


ECHO = {"message": "x"}


async def sdk_start() -> dict[str, float]:
    """The SDK client: spawn, ``initialize``, ``tools/list``, the first ``echo``: the time
    from nothing to each (seconds)."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    start = time.perf_counter()
    with open("/dev/null", "w") as null:
        async with (
            stdio_client(params, errlog=null) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            initialized = time.perf_counter()
            await session.list_tools()
            listed = time.perf_counter()
            await session.call_tool("echo", ECHO)
            called = time.perf_counter()
    return {"initialized": initialized - start, "ready": listed - start, "result": called - start}


class _Owner:
    """The bench's one call on a bare session: its end sets ``done``."""

    tool = "echo"

    def __init__(self) -> None:
        self.done = trio.Event()
        self.value: object = None

    def on_chunk(self, index: int, text: str) -> None:
        pass

    def on_result(self, value: object, size: int, now: float) -> None:
        self.value = value
        self.done.set()

    def on_error(self, code: str, message: str, retryable: bool, size: int, now: float) -> None:
        self.value = f"error {code}: {message}"
        self.done.set()

    def on_acknowledged(self, now: float) -> None:
        self.done.set()

    def on_killed(self, reason: str, now: float) -> None:
        self.value = f"killed: {reason}"
        self.done.set()


async def sandboxed_start(launcher: SandboxLauncher, config: SessionConfig) -> dict[str, float]:
    """A fresh sandbox, the bridge, the server, ``initialize``, ``tools/list``, the
    session ready, the first ``echo``: the time from nothing to ready and to the result,
    and (with ``SANDVISOR_MCP_HOPS`` in the command) to each step the bridge reports."""
    session = Session(launcher, config)
    wall, start = time.time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        ready = time.perf_counter()
        owner = _Owner()
        session.begin(owner, "echo", ECHO, "bench", 1, None)
        await owner.done.wait()
        called = time.perf_counter()
        assert owner.value == {"text": "Echo: x"}, owner.value
        await session.close()
    took = {"ready": ready - start, "result": called - start}
    for line in session.stderr.text().splitlines():
        if line.startswith("hop "):
            _, name, at = line.split()
            took.setdefault(name, float(at) - wall)
    return took


async def supervisor_start() -> dict[str, float]:
    """``Supervisor(mcp_server=...)`` from nothing to its first ``echo`` result: the
    server started once, its tools listed, then that sandbox the first session."""
    start = time.perf_counter()
    async with Supervisor(mcp_server=SERVER, ping_interval=None, start_timeout=30) as sup:
        entered = time.perf_counter()
        out = await sup.invoke("echo", ECHO)
        called = time.perf_counter()
        assert out.status == "completed", out
    return {"ready": entered - start, "result": called - start}


def ratios(boxed: list[float], base: list[float]) -> tuple[float, float, float]:
    """Median, lowest and highest of the ratios of neighbours in time (the load of a
    shared machine drifts within seconds: a pair is measured under one load)."""
    pairs = sorted(b / a for b, a in zip(boxed, base, strict=True))
    return statistics.median(pairs), pairs[0], pairs[-1]


def hops(boxed: list[dict[str, float]], base: list[dict[str, float]]) -> None:
    """Where a cold start's time goes, hop by hop (medians, ms)."""
    names = sorted(boxed[0], key=lambda k: boxed[0][k])
    print("sandboxed cold start, hop by hop (median ms from the host's start; each hop's own):")
    before = 0.0
    for name in names:
        at = statistics.median(b[name] for b in boxed)
        print(f"  {name:<14} {at * 1e3:7.1f}   +{(at - before) * 1e3:6.1f}")
        before = at
    print("unsandboxed SDK client (spawn to each):")
    before = 0.0
    for name in ("initialized", "ready", "result"):
        at = statistics.median(b[name] for b in base)
        print(f"  {name:<14} {at * 1e3:7.1f}   +{(at - before) * 1e3:6.1f}")
        before = at


async def main(
    quick: bool, only_start: bool, show_hops: bool, pairs: int | None, whole: bool
) -> int:
    calls, starts = (200, 5) if quick else (1000, 15)
    starts = pairs or starts
    if subprocess.run([str(ROOT / "scripts/mcp-test-servers")]).returncode != 0:
        return 1
    call_ratio = 0.0
    if not only_start:  # 1. trivial calls, each side twice, interleaved
        base, boxed = [], []
        for _ in range(2):
            base += await sdk_calls(calls // 2)
            boxed += await sandboxed_calls(calls // 2)
        call_ratio = p50(boxed) / p50(base)
        print(f"echo call p50: sandboxed {p50(boxed) * 1e3:.3f} ms, unsandboxed SDK client "
              f"{p50(base) * 1e3:.3f} ms: {call_ratio:.2f}x (target <= 1.5x)")  # fmt: skip
    # 2. cold starts, in pairs (the SDK's, then the sandbox's)
    command = bridge_command(SERVER, start_timeout=30)
    if show_hops:
        command = dataclasses.replace(command, env={**command.env, "SANDVISOR_MCP_HOPS": "1"})
    with Spawner("bench-mcp") as spawner:
        launcher = SandboxLauncher(SandboxPolicy(), command, spawner)
        grants = (grant_for(default_policy("echo", "json"), 100),)
        config = SessionConfig(grants=grants, start_timeout=30, ping_interval=None)
        await sandboxed_start(launcher, config)  # warm the fork server and page cache
        await sdk_start()
        base_s, boxed_s = [], []
        for _ in range(starts):
            base_s.append(await sdk_start())
            boxed_s.append(await sandboxed_start(launcher, config))
    if show_hops:
        hops(boxed_s, base_s)
    if whole:
        base_w, boxed_w = [], []
        for _ in range(starts):
            base_w.append((await sdk_start())["result"])
            boxed_w.append((await supervisor_start())["result"])
        mid, low, high = ratios(boxed_w, base_w)
        print(f"Supervisor(mcp_server=...) to the first result: {p50(boxed_w) * 1e3:.1f} ms, "
              f"unsandboxed SDK client {p50(base_w) * 1e3:.1f} ms (medians); paired ratio "
              f"{mid:.2f}x [{low:.2f}-{high:.2f}] over {starts} pairs (no target: one cold "
              f"start and the supervisor's own)")  # fmt: skip
    worst = 0.0
    targets = (("to ready (initialize, tools/list)", "ready"), ("to the first result", "result"))
    for what, key in targets:
        boxed = [b[key] for b in boxed_s]
        base = [b[key] for b in base_s]
        mid, low, high = ratios(boxed, base)
        worst = max(worst, mid)
        print(f"cold start {what}: sandboxed {p50(boxed) * 1e3:.1f} ms, unsandboxed SDK "
              f"client {p50(base) * 1e3:.1f} ms (medians); paired ratio {mid:.2f}x "
              f"[{low:.2f}-{high:.2f}] over {starts} pairs (target <= 1.3x)")  # fmt: skip
    print(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    return 0 if call_ratio <= 1.5 and worst <= 1.3 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--start", action="store_true", help="only the cold starts")
    parser.add_argument("--starts", type=int, help="pairs of cold starts (default 15; 5 --quick)")
    parser.add_argument("--hops", action="store_true", help="where a cold start's time goes")
    parser.add_argument(
        "--supervisor", action="store_true", help="also a whole Supervisor's start, in pairs"
    )
    args = parser.parse_args()
    sys.exit(trio.run(main, args.quick, args.start, args.hops, args.starts, args.supervisor))
