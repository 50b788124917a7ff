#!/usr/bin/env python3
"""The scripted half's speed against an older checkout of itself, measured in one run:
issue 19's promise that the fuel and the memory budget do not cost the ordinary path
(``bench_scripted.py``'s figures within 1.1x of the code before the hostile work).

Rounds alternate between the two checkouts (A then B, then B then A, ...), each side a
fresh process that runs every workload ``--reps`` times and reports the CPU time of each
run (``time.process_time``: what this process spent, less sensitive than wall time to the
other processes of a shared machine). Per workload: the minimum and the median over all
runs of each side and their ratios (B/A), and the median of the per-round ratios with
their range. Give the load (printed) with the figures.

Make the older checkout with ``git worktree add --detach /tmp/base COMMIT`` (the commit
before the hostile work: the parent of 872bd72); run it with this checkout's venv:

``.venv/bin/python scripts/bench_scripted_ab.py /tmp/base [--rounds N] [--reps N]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent.parent)

#: bench_scripted.py's rows (the pipeline with its 5,000 lines) and the one-line script
WORKLOADS = {
    "grep|sed|awk|tr": (
        "seq 5000 | grep 7 | sed 's/7/seven/' | awk '{n++} END {print n}' | tr 0-9 a-j"
    ),
    "c-style for, 10k": "s=0; for ((i=0;i<10000;i++)); do s=$((s+i)); done; echo $s",
    "while [ ], 10k": (
        "s=0; i=0; while [ $i -lt 10000 ]; do s=$((s+i)); i=$((i+1)); done; echo $s"
    ),
    "1000 tool calls": "for ((i = 1; i <= 1000; i++)); do get_user --id $i; done",
}

#: what one side runs: imports the checkout given first, prints {workload: [ms, ...]}
SIDE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import trio
from supervisor.scripted import ScriptedTool
from supervisor.scripted.contract import ScriptRequest
from supervisor.scripted.shell.execution import run_script
from supervisor.scripted.text_tools import TEXT_COMMANDS
reps, workloads = int(sys.argv[2]), json.loads(sys.argv[3])
st = ScriptedTool("b", max_commands=10**6, max_loop_iterations=10**6)
st.add_tool("get_user", "u", lambda p, s: "ok\n",
            schema={"type": "object", "properties": {"id": {"type": "integer"}}})
out = {}
for name, script in workloads.items():
    st.execute_sync(script)
    runs = []
    for _ in range(reps):
        start = time.process_time()
        st.execute_sync(script)
        runs.append((time.process_time() - start) * 1000)
    out[name] = runs
async def one_line():
    runs = []
    for i in range(reps * 100):
        script = f'x={i}; echo "item $x" | tr a-z A-Z'
        start = time.process_time()
        await run_script(ScriptRequest(script, commands=TEXT_COMMANDS))
        runs.append((time.process_time() - start) * 1000)
    return runs
out["one-line parse+run"] = trio.run(one_line)[reps * 10:]
print(json.dumps(out))
"""


def side(checkout: str, reps: int) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", SIDE, checkout, str(reps), json.dumps(WORKLOADS)],
        capture_output=True,
        text=True,
        check=True,
        cwd="/",
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    result: dict[str, list[float]] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the older checkout (A)")
    parser.add_argument("--new", default=HERE, help="the checkout measured (B): this one")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    sides = {"A": args.base, "B": args.new}
    runs: dict[str, dict[str, list[list[float]]]] = {"A": {}, "B": {}}
    print(f"A = {args.base}\nB = {args.new}")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in range(args.rounds):
        for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
            for workload, samples in side(sides[name], args.reps).items():
                runs[name].setdefault(workload, []).append(samples)
    print(f"load after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"\n{'CPU ms':<20} {'A min':>8} {'B min':>8} {'B/A':>6}   {'A med':>8} {'B med':>8}"
        f" {'B/A':>6}   per-round B/A of medians: median [range]"
    )
    for workload in runs["A"]:
        a_rounds, b_rounds = runs["A"][workload], runs["B"][workload]
        a_all = [x for r in a_rounds for x in r]
        b_all = [x for r in b_rounds for x in r]
        a_min, b_min = min(a_all), min(b_all)
        a_med, b_med = statistics.median(a_all), statistics.median(b_all)
        paired = [
            statistics.median(b) / statistics.median(a)
            for a, b in zip(a_rounds, b_rounds, strict=True)
        ]
        print(
            f"{workload:<20} {a_min:8.3f} {b_min:8.3f} {b_min / a_min:6.3f}   {a_med:8.3f}"
            f" {b_med:8.3f} {b_med / a_med:6.3f}   {statistics.median(paired):.3f}"
            f" [{min(paired):.2f}-{max(paired):.2f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
