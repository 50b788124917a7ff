#!/usr/bin/env python3
"""The workloads of reference-bashkit.md section 7 through sandvisor, bashkit 0.20.1 and
/bin/bash, measured in one run (the machines are noisy: only ratios mean something).

Each number is the median of several rounds. sandvisor runs through its public entry
points (``ScriptedTool.execute_sync``, or ``run_script`` inside one event loop for the
one-line parse-and-run); bashkit through ``Bash.execute_sync`` / its ``ScriptedTool``;
bash as ``/bin/bash -c`` with the GNU tools and the jq binary (process start included,
as in the reference). The targets of the issue are checked at the end:

* the two 10,000-iteration arithmetic loops: at most 3x bashkit's time;
* one tool call from a loop: at most 3x bashkit's per-call overhead (the loop of tool
  calls minus the same loop running ``:``);
* 100 ``jq`` calls in a loop: at least 10x faster than /bin/bash with the jq binary;
* parse and run of a one-line script: under 0.5 ms.

Run: ``.venv/bin/python scripts/bench_scripted.py [--rounds N] [--quick]``. Against an
older checkout of sandvisor itself (issue 19: the fuel and the memory budget within 1.1x
of the code before them), ``scripts/bench_scripted_ab.py``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BIG_COMMANDS = BIG_LOOPS = 1_000_000
JSON_LINE = '{"id": 7, "name": "widget", "tags": ["a", "b"], "price": 9.5}'
SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}}
CALLS = 1000

WORKLOADS: dict[str, str] = {
    "c-style for, 10k": "s=0; for ((i=0;i<10000;i++)); do s=$((s+i)); done; echo $s",
    "while [ ], 10k": (
        "s=0; i=0; while [ $i -lt 10000 ]; do s=$((s+i)); i=$((i+1)); done; echo $s"
    ),
    "one jq select": f"echo '{JSON_LINE}' | jq -r 'select(.price > 5) | .name'",
    "seq 1000 | jq -s add": "seq 1 1000 | jq -s add",
    "100x echo | jq": (
        'for i in $(seq 1 100); do echo "{\\"id\\": $i}" | jq -r .id; done | tail -1'
    ),
    "grep|sed|awk|tr": (
        "seq 5000 | grep 7 | sed 's/7/seven/' | awk '{n++} END {print n}' | tr 0-9 a-j"
    ),
}
TOOL_LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do get_user --id $i; done"
EMPTY_LOOP = f"for ((i = 1; i <= {CALLS}; i++)); do :; done"
TOOL_JQ = "for i in $(seq 1 100); do get_user --id $i | jq -r .id; done | tail -1"
BASH_TOOL_FN = "get_user() { echo ok; }; "
BASH_TOOL_JQ_FN = 'get_user() { echo "{\\"id\\": $2}"; }; '


def median(run: Callable[[], object], rounds: int) -> float:
    run()  # warm-up: parsed scripts, compiled programs
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def user_callback(params: dict[str, Any], stdin: str | None) -> str:
    return "ok\n"


def json_callback(params: dict[str, Any], stdin: str | None) -> str:
    return f'{{"id": {params.get("id", 0)}}}\n'


# ----------------------------------------------------------------------------- runners


def ours(script: str, rounds: int, tool: Callable[..., str] | None = None) -> float | None:
    """None (reported) when the script cannot run yet, e.g. a text tool is missing."""
    from supervisor.scripted import ScriptedTool

    st = ScriptedTool("bench", max_commands=BIG_COMMANDS, max_loop_iterations=BIG_LOOPS)
    if tool is not None:
        st.add_tool("get_user", "Fetch user", tool, schema=SCHEMA)
    check = st.execute_sync(script)
    if check.exit_code != 0 or check.stderr:
        print(f"  (sandvisor cannot run {script[:40]!r}: {(check.stderr or check.error)!r})")
        return None
    expected = subprocess.run(
        ["/bin/bash", "-c", (BASH_TOOL_JQ_FN if tool else "") + script],
        capture_output=True,
        text=True,
    ).stdout
    if tool is None and check.stdout != expected:
        print(f"  (sandvisor output differs from bash for {script[:40]!r})")
        return None
    return median(lambda: st.execute_sync(script), rounds)


def theirs(script: str, rounds: int, tool: Callable[..., str] | None = None) -> float:
    if tool is None:
        from bashkit import Bash

        def run() -> object:
            return Bash(max_commands=BIG_COMMANDS, max_loop_iterations=BIG_LOOPS).execute_sync(
                script
            )

        return median(run, rounds)
    from bashkit.scripted import ScriptedTool

    st = ScriptedTool("bench", max_commands=BIG_COMMANDS, max_loop_iterations=BIG_LOOPS)
    st.add_tool("get_user", "Fetch user", tool, schema=SCHEMA)
    return median(lambda: st.execute_sync(script), rounds)


def bash(script: str, rounds: int) -> float:
    def run() -> None:
        subprocess.run(["/bin/bash", "-c", script], check=True, capture_output=True)

    return median(run, rounds)


def one_line_parse_and_run(rounds: int) -> float | None:
    """Distinct one-line scripts (no parse cache hit) through ``run_script``."""
    import trio

    from supervisor.scripted.contract import ScriptRequest
    from supervisor.scripted.shell.execution import run_script
    from supervisor.scripted.text_tools import TEXT_COMMANDS

    if "tr" not in TEXT_COMMANDS:
        return None

    async def main() -> float:
        samples = []
        for i in range(max(rounds, 1) * 200):
            script = f'x={i}; echo "item $x" | tr a-z A-Z'
            start = time.perf_counter()
            result = await run_script(ScriptRequest(script, commands=TEXT_COMMANDS))
            samples.append(time.perf_counter() - start)
            if result.exit_code != 0:
                raise RuntimeError(result.stderr)
        return statistics.median(samples)

    return trio.run(main)


# ------------------------------------------------------------------------------- report


def row(name: str, a: float | None, b: float | None, c: float | None) -> None:
    def ms(x: float | None) -> str:
        return f"{'n/a':>9}" if x is None else f"{x * 1000:9.2f}"

    ra = f"{a / b:6.2f}" if a and b else "   n/a"
    rc = f"{a / c:6.3f}" if a and c else "   n/a"
    print(f"{name:<26} {ms(a)} {ms(b)} {ms(c)}   {ra}   {rc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 rounds, skip slow bash runs")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    print(
        f"{'workload (ms, median)':<26} {'sandvisor':>9} {'bashkit':>9} {'bash':>9}"
        f"   {'/bashkit':>6}   {'/bash':>6}"
    )
    results: dict[str, tuple[float | None, float | None, float | None]] = {}
    for name, script in WORKLOADS.items():
        a = ours(script, rounds)
        b = theirs(script, rounds)
        c = None if args.quick and "100x" in name else bash(script, rounds)
        results[name] = (a, b, c)
        row(name, a, b, c)

    tool_ours = ours(TOOL_LOOP, rounds, user_callback)
    tool_theirs = theirs(TOOL_LOOP, rounds, user_callback)
    empty_ours = ours(EMPTY_LOOP, rounds)
    empty_theirs = theirs(EMPTY_LOOP, rounds, user_callback)
    tool_bash = bash(BASH_TOOL_FN + TOOL_LOOP, rounds)
    row(f"{CALLS} tool calls (loop)", tool_ours, tool_theirs, tool_bash)
    ratio: float | None = None
    if tool_ours is not None and empty_ours is not None:
        per_ours = max(tool_ours - empty_ours, 0.0) / CALLS
        per_theirs = max(tool_theirs - empty_theirs, 1e-9) / CALLS
        ratio = per_ours / per_theirs
        print(
            f"{'  per call (minus loop)':<26} {per_ours * 1e6:8.2f}us"
            f" {per_theirs * 1e6:7.2f}us   ratio {ratio:5.2f}"
        )
    jq_ours = ours(TOOL_JQ, rounds, json_callback)
    jq_theirs = theirs(TOOL_JQ, rounds, json_callback)
    jq_bash = None if args.quick else bash(BASH_TOOL_JQ_FN + TOOL_JQ, rounds)
    row("100 tool calls | jq", jq_ours, jq_theirs, jq_bash)
    start_ours = ours("true", rounds * 20) or 0.0
    start_theirs = theirs("true", rounds * 20, user_callback)
    start_bash = bash("true", rounds)
    row("startup: true", start_ours, start_theirs, start_bash)
    one_line = one_line_parse_and_run(rounds)
    if one_line is not None:
        print(f"{'one-line parse+run':<26} {one_line * 1000:9.3f} ms (run_script, no cache hit)")

    print("\ntargets:")
    checks: list[tuple[str, float | None, bool]] = []
    for name in ("c-style for, 10k", "while [ ], 10k"):
        ours_s, theirs_s, _ = results[name]
        value = ours_s / theirs_s if ours_s and theirs_s else None
        checks.append((f"{name}: at most 3x bashkit", value, value is not None and value <= 3))
    checks.append(
        ("tool call from a loop: at most 3x bashkit", ratio, ratio is not None and ratio <= 3)
    )
    a, _, c = results["100x echo | jq"]
    speedup = c / a if a and c else None
    checks.append(
        (
            "100 jq calls: at least 10x faster than bash",
            speedup,
            speedup is not None and speedup >= 10,
        )
    )
    checks.append(
        (
            "one-line parse+run under 0.5 ms",
            one_line * 1000 if one_line else None,
            one_line is not None and one_line < 0.0005,
        )
    )
    failed = 0
    for label, value, ok in checks:
        failed += not ok
        shown = "not measured" if value is None else f"{value:.2f}"
        print(f"  {'PASS' if ok else 'FAIL'}  {label}  ({shown})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
