#!/usr/bin/env python3
"""Tool-call cost: sandvisor's tool surface against bashkit 0.20.1, measured in one run.

Three numbers, each the best of several interleaved rounds of 1000 calls of a
one-integer tool (the machines are noisy: the best round is the least disturbed one, and
interleaving exposes both sides to the same load):

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
import time
from collections.abc import Callable
from typing import Any

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
CALLS = 1000
LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do get_user --id $i; done"
EMPTY_LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do :; done"


def callback(params: dict[str, Any], stdin: str | None) -> str:
    return "ok\n"


def best_seconds(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """The best time of each run over ``rounds`` interleaved rounds."""
    for run in runs.values():
        run()  # warm caches (parsed scripts, compiled validators)
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for key, run in runs.items():
            start = time.perf_counter()
            run()
            best[key] = min(best[key], time.perf_counter() - start)
    return best


def surface_run() -> Callable[[], object]:
    """Our per-call path alone: the tool command called directly, 1000 times."""
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

    return run


#: A 1000-call loop needs more than the default 10,000 commands on both sides.
MAX = 100_000


def bashkit_tool() -> Any:
    from bashkit.scripted import ScriptedTool

    tool = ScriptedTool("bench", max_commands=MAX, max_loop_iterations=MAX)
    tool.add_tool("get_user", "Fetch user", callback, schema=SCHEMA)
    return tool


def ours_tool() -> Any:
    """Our ScriptedTool, or None when the language core is not installed."""
    try:
        from supervisor.scripted.shell.execution import run_script  # noqa: F401
        from supervisor.scripted.text_tools import TEXT_COMMANDS  # noqa: F401
    except ImportError:
        return None
    from supervisor.scripted import ScriptedTool

    tool = ScriptedTool("bench", max_commands=MAX, max_loop_iterations=MAX)
    tool.add_tool("get_user", "Fetch user", callback, schema=SCHEMA)
    result = tool.execute_sync(LOOP)
    if result.exit_code != 0 or result.stdout != "ok\n" * CALLS:
        raise SystemExit(f"the loop did not run cleanly: {result.stderr or result.error}")
    return tool


def per_call_us(seconds: float) -> float:
    return seconds / CALLS * 1e6


def row(label: str, ours: float, theirs: float) -> str:
    return (
        f"{label:<16}{per_call_us(ours):>11.2f} us{per_call_us(theirs):>11.2f} us"
        f"{ours / theirs:>8.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds

    theirs = bashkit_tool()
    ours = ours_tool()
    runs: dict[str, Callable[[], object]] = {
        "surface": surface_run(),
        "bashkit": lambda: theirs.execute_sync(LOOP),
        "bashkit_empty": lambda: theirs.execute_sync(EMPTY_LOOP),
    }
    if ours is not None:
        runs["ours"] = lambda: ours.execute_sync(LOOP)
        runs["ours_empty"] = lambda: ours.execute_sync(EMPTY_LOOP)
    best = best_seconds(runs, rounds)
    bk_overhead = max(best["bashkit"] - best["bashkit_empty"], 1e-9)
    print(f"{'measure':<16}{'sandvisor':>14}{'bashkit':>14}{'ratio':>8}")
    print(row("surface", best["surface"], bk_overhead))
    if ours is None:
        print("loop overhead / loop total: skipped (the language core is not installed)")
        return
    overhead = max(best["ours"] - best["ours_empty"], 1e-9)
    print(row("loop overhead", overhead, bk_overhead))
    print(row("loop total", best["ours"], best["bashkit"]))


if __name__ == "__main__":
    main()
