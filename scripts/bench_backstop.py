#!/usr/bin/env python3
"""What the services' backstop costs per execution: the same scripts through one
``ScriptedTool`` in this process and through a ``ScriptPool`` of child processes
(``supervisor.scripted.isolation``), measured in one run (only the differences and
ratios mean something on a noisy machine).

Workloads: an empty-ish script (``echo hi``: the round trip to the child and back), ten
tool calls (each called back over the pipe), and a text pipeline (the text tools run in
the child). A cold start (a child that must start first) is measured apart.

Run: ``.venv/bin/python scripts/bench_backstop.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from supervisor.scripted import ScriptedTool
from supervisor.scripted.isolation import ScriptPool

WORKLOADS = {
    "echo hi": "echo hi",
    "10 tool calls": "for i in 1 2 3 4 5 6 7 8 9 10; do get_user --id $i; done | wc -l",
    "seq|grep|sed|awk": "seq 2000 | grep 7 | sed 's/7/seven/' | awk '{n++} END {print n}'",
}
SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}


def get_user(params: dict[str, Any], stdin: str | None) -> str:
    return f'{{"id": {params.get("id", 0)}}}\n'


def tool(pool: ScriptPool | None) -> ScriptedTool:
    st = ScriptedTool("bench", isolation=pool)
    st.add_tool("get_user", "Fetch a user", get_user, schema=SCHEMA)
    return st


async def median(st: ScriptedTool, script: str, rounds: int) -> float:
    first = await st.execute(script)
    if first.exit_code != 0:
        raise RuntimeError(f"{script!r}: {first.stderr or first.error}")
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await st.execute(script)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def main(rounds: int) -> None:
    pool = ScriptPool(size=1)
    try:
        start = time.perf_counter()
        await pool.warm()
        cold = await tool(pool).execute("echo cold")
        assert cold.stdout == "cold\n"
        cold_ms = (time.perf_counter() - start) * 1000
        inline, isolated = tool(None), tool(pool)
        head = f"{'workload (ms, median)':<22} {'in-process':>10} {'child':>9}"
        print(f"{head} {'+ms':>8} {'ratio':>6}")
        for name, script in WORKLOADS.items():
            a = await median(inline, script, rounds)
            b = await median(isolated, script, rounds)
            print(f"{name:<22} {a * 1000:10.3f} {b * 1000:9.3f} {(b - a) * 1000:8.3f} {b / a:6.2f}")
        print(f"cold start of a child (spawn, imports, first script): {cold_ms:.0f} ms")
    finally:
        pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    anyio.run(main, args.rounds, backend="trio")
