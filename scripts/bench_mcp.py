#!/usr/bin/env python3
"""Benchmark a sandboxed MCP server against the same server run unsandboxed, with both
measured in one run, interleaved (the machines are noisy):

    .venv/bin/python scripts/bench_mcp.py [--quick]

1. a trivial call (server-everything's ``echo``): ``Supervisor.invoke`` through the
   bridge in the sandbox, p50, against the MCP SDK's own client calling the same server
   unsandboxed (target: at most 1.5x);
2. a cold start: a fresh sandbox, the bridge, the server, ``initialize`` and
   ``tools/list`` until the session is ready, median, against the SDK client starting the
   same server unsandboxed through ``initialize`` and ``tools/list`` (target: at most 1.3x).

The servers are the pinned test servers (``scripts/mcp-test-servers`` installs them).
"""

from __future__ import annotations

import argparse
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


async def sdk_start() -> float:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    start = time.perf_counter()
    with open("/dev/null", "w") as null:
        async with (
            stdio_client(params, errlog=null) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            took = time.perf_counter() - start
    return took


async def sandboxed_start(launcher: SandboxLauncher, config: SessionConfig) -> float:
    session = Session(launcher, config)
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(session.run)
        took = time.perf_counter() - start
        await session.close()
    return took


async def main(quick: bool) -> int:
    calls, starts = (200, 5) if quick else (1000, 15)
    if subprocess.run([str(ROOT / "scripts/mcp-test-servers")]).returncode != 0:
        return 1
    # 1. trivial calls, each side twice, interleaved
    base, boxed = [], []
    for _ in range(2):
        base += await sdk_calls(calls // 2)
        boxed += await sandboxed_calls(calls // 2)
    call_ratio = p50(boxed) / p50(base)
    print(f"echo call p50: sandboxed {p50(boxed) * 1e3:.3f} ms, unsandboxed SDK client "
          f"{p50(base) * 1e3:.3f} ms: {call_ratio:.2f}x (target <= 1.5x)")  # fmt: skip
    # 2. cold starts, interleaved
    policy = SandboxPolicy()
    with Spawner("bench-mcp") as spawner:
        launcher = SandboxLauncher(policy, bridge_command(SERVER, start_timeout=30), spawner)
        grants = (grant_for(default_policy("echo", "json"), 100),)
        config = SessionConfig(grants=grants, start_timeout=30, ping_interval=None)
        await sandboxed_start(launcher, config)  # warm the fork server and page cache
        await sdk_start()
        base_s, boxed_s = [], []
        for _ in range(starts):
            base_s.append(await sdk_start())
            boxed_s.append(await sandboxed_start(launcher, config))
    start_ratio = p50(boxed_s) / p50(base_s)
    print(f"cold start median: sandboxed {p50(boxed_s) * 1e3:.1f} ms, unsandboxed SDK client "
          f"{p50(base_s) * 1e3:.1f} ms: {start_ratio:.2f}x (target <= 1.3x)")  # fmt: skip
    return 0 if call_ratio <= 1.5 and start_ratio <= 1.3 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    sys.exit(trio.run(main, parser.parse_args().quick))
