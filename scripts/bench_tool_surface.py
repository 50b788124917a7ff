#!/usr/bin/env python3
"""Tool-call cost: sandvisor's tool surface against bashkit 0.20.1, measured in one run.

Three numbers, each the median of several rounds of 1000 calls of a one-integer tool:

* ``surface``: our per-call path alone (flag parse, schema check, callback, trace),
  calling the tool command directly, against bashkit's per-call overhead (a loop of tool
  calls minus the same loop running ``:``), i.e. what one tool call adds in bashkit;
* ``loop overhead``: the same difference through our whole interpreter (needs the
  language core), against bashkit's; the target is a ratio of at most 3;
* ``loop total``: both whole loops, for scale.

Ratios are sandvisor / bashkit: below 1 is faster. Run: ``.venv/bin/python
scripts/bench_tool_surface.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
CALLS = 1000
LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do get_user --id $i; done"
EMPTY_LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do :; done"


def callback(params: dict[str, Any], stdin: str | None) -> str:
    return "ok\n"


def median_seconds(run: Callable[[], object], rounds: int) -> float:
    run()  # warm caches (parsed scripts, compiled validators)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def ours_surface(rounds: int) -> float:
    from supervisor.scripted.tool_commands import command_table
    from supervisor.tools import RequestScope, ToolDef, ToolRegistry
    from supervisor.tools.context import current_request

    registry = ToolRegistry()
    registry.register(ToolDef("get_user", "Fetch user", SCHEMA), callback)
    command = command_table(registry)["get_user"]
    argvs = [["--id", str(i)] for i in range(1, CALLS + 1)]
    current_request.set(RequestScope(None, registry.trace()))

    def run() -> None:
        for argv in argvs:
            command(argv, None)

    return median_seconds(run, rounds)


def limits_kwargs() -> dict[str, int]:
    return {"max_commands": 100_000, "max_loop_iterations": 100_000}


def bashkit_loops(rounds: int) -> tuple[float, float]:
    from bashkit.scripted import ScriptedTool

    tool = ScriptedTool("bench", **limits_kwargs())
    tool.add_tool("get_user", "Fetch user", callback, schema=SCHEMA)
    total = median_seconds(lambda: tool.execute_sync(LOOP), rounds)
    empty = median_seconds(lambda: tool.execute_sync(EMPTY_LOOP), rounds)
    return total, empty


def ours_loops(rounds: int) -> tuple[float, float] | None:
    try:
        import supervisor.scripted.builtins
        import supervisor.scripted.engine  # noqa: F401
    except ImportError:
        return None
    from supervisor.scripted import ScriptedTool

    tool = ScriptedTool("bench", **limits_kwargs())
    tool.add_tool("get_user", "Fetch user", callback, schema=SCHEMA)
    result = tool.execute_sync(LOOP)
    if result.exit_code != 0 or result.stdout != "ok\n" * CALLS:
        raise SystemExit(f"the loop did not run cleanly: {result.stderr or result.error}")
    total = median_seconds(lambda: tool.execute_sync(LOOP), rounds)
    empty = median_seconds(lambda: tool.execute_sync(EMPTY_LOOP), rounds)
    return total, empty


def per_call_us(seconds: float) -> float:
    return seconds / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds

    surface = ours_surface(rounds)
    bk_total, bk_empty = bashkit_loops(rounds)
    bk_overhead = max(bk_total - bk_empty, 1e-9)
    print(f"{'measure':<16}{'sandvisor':>14}{'bashkit':>14}{'ratio':>8}")
    print(
        f"{'surface':<16}{per_call_us(surface):>11.2f} us{per_call_us(bk_overhead):>11.2f} us"
        f"{surface / bk_overhead:>8.2f}"
    )
    loops = ours_loops(rounds)
    if loops is None:
        print("loop overhead / loop total: skipped (the language core is not installed)")
        return
    total, empty = loops
    overhead = max(total - empty, 1e-9)
    print(
        f"{'loop overhead':<16}{per_call_us(overhead):>11.2f} us"
        f"{per_call_us(bk_overhead):>11.2f} us{overhead / bk_overhead:>8.2f}"
    )
    print(
        f"{'loop total':<16}{per_call_us(total):>11.2f} us"
        f"{per_call_us(bk_total):>11.2f} us{total / bk_total:>8.2f}"
    )


if __name__ == "__main__":
    main()
