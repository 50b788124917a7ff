#!/usr/bin/env python3
"""Sandbox benchmarks, against baselines measured in the same run (the machines are noisy).

1. Start-up: `sandbox.run(SandboxPolicy(), ["/bin/true"])` (what `sandvisor exec` does, in
   the default policy) against a bare ``bwrap --ro-bind / / --unshare-all /bin/true``
   started from the same process, runs interleaved, median of N each. Target: at most
   3 ms above the bare bwrap. Printed in wall time and in CPU time (host plus children:
   steadier than wall time when the machine is shared), with the phases of ours.
2. The `sandvisor exec` command end to end, against ``python -c pass`` (information).
3. Teardown: a sandbox with 50 processes; from `kill()` until bwrap is reaped and its
   cgroups are empty. Target: within 100 ms.

Usage: ``.venv/bin/python scripts/bench_sandbox.py [--runs N]`` (as root, like CI).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandbox.launch import Command, prepare_launch
from sandbox.policy import SandboxPolicy
from sandbox.runner import run
from sandbox.spawn import spawn

BARE = ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "/bin/true"]


def cpu_ms() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime) * 1000


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call."""
    c0, t0 = cpu_ms(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000, cpu_ms() - c0


def interleaved(
    fns: dict[str, Callable[[], object]], runs: int
) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            out[name].append(timed(fn))
    return out


def med(samples: list[tuple[float, float]], index: int) -> float:
    return statistics.median(s[index] for s in samples)


def bare() -> None:
    subprocess.run(BARE, check=True)


def ours() -> None:
    result = run(SandboxPolicy(), ["/bin/true"], timeout=30)
    assert result.exit_status == 0, result.termination


def phases(runs: int) -> dict[str, float]:
    """Median ms of each step of ours (information: where the time goes)."""
    steps: dict[str, list[float]] = {"prepare": [], "spawn": [], "run": [], "cleanup": []}
    for _ in range(runs):
        t0 = time.perf_counter()
        plan = prepare_launch(SandboxPolicy(), Command(("/bin/true",)))
        t1 = time.perf_counter()
        sandbox = spawn(plan)
        t2 = time.perf_counter()
        sandbox.wait()
        t3 = time.perf_counter()
        sandbox.termination()
        sandbox.cleanup()
        t4 = time.perf_counter()
        for name, a, b in (
            ("prepare", t0, t1),
            ("spawn", t1, t2),
            ("run", t2, t3),
            ("cleanup", t3, t4),
        ):
            steps[name].append((b - a) * 1000)
    return {name: statistics.median(values) for name, values in steps.items()}


FIFTY = (
    "/bin/sh",
    "-c",
    "i=0; while [ $i -lt 48 ]; do sleep 1000 & i=$((i+1)); done; echo ready; wait",
)


def teardown_once() -> float:
    """ms from kill() until bwrap is reaped and nothing is left in the cgroups."""
    plan = prepare_launch(SandboxPolicy(), Command(FIFTY))
    sandbox = spawn(plan, stdout=subprocess.PIPE)
    try:
        assert sandbox.popen.stdout is not None and plan.cgroup is not None
        assert sandbox.popen.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        while len(plan.cgroup.pids()) < 50 and time.monotonic() < deadline:
            time.sleep(0.001)  # bwrap, its init, sh and 48 sleepers (51 with init)
        assert len(plan.cgroup.pids()) >= 50, len(plan.cgroup.pids())
        t0 = time.perf_counter()
        sandbox.kill("teardown")
        sandbox.wait()
        while plan.cgroup.pids():
            time.sleep(0.0002)
        elapsed = (time.perf_counter() - t0) * 1000
        assert not sandbox.survivors()
        return elapsed
    finally:
        sandbox.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    runs = args.runs
    ours()
    bare()  # warm caches
    print(f"sandbox start-up, /bin/true, median of {runs} interleaved runs each")
    samples = interleaved({"bare bwrap": bare, "sandvisor run": ours}, runs)
    b_wall, o_wall = med(samples["bare bwrap"], 0), med(samples["sandvisor run"], 0)
    b_cpu, o_cpu = med(samples["bare bwrap"], 1), med(samples["sandvisor run"], 1)
    print(
        f"  wall: bare {b_wall:7.2f} ms   ours {o_wall:7.2f} ms   "
        f"+{o_wall - b_wall:6.2f} ms   ratio {o_wall / b_wall:5.2f}   (target: +3 ms)"
    )
    print(
        f"  cpu:  bare {b_cpu:7.2f} ms   ours {o_cpu:7.2f} ms   "
        f"+{o_cpu - b_cpu:6.2f} ms   ratio {o_cpu / b_cpu:5.2f}"
    )
    steps = phases(max(10, runs // 2))
    print("  ours by phase (median ms): " + ", ".join(f"{k} {v:.2f}" for k, v in steps.items()))

    cli = [sys.executable, "-m", "supervisor", "exec", "--", "/bin/true"]
    startup = interleaved(
        {
            "python -c pass": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
            "sandvisor exec": lambda: subprocess.run(cli, check=True),
        },
        max(5, runs // 3),
    )
    py, ex = med(startup["python -c pass"], 0), med(startup["sandvisor exec"], 0)
    print(
        f"  `sandvisor exec -- /bin/true` end to end: {ex:.1f} ms "
        f"(python -c pass {py:.1f} ms, ratio {ex / py:.2f})"
    )

    n = max(5, runs // 2)
    print(f"teardown of a 50-process sandbox, median of {n}")
    times = [teardown_once() for _ in range(n)]
    worst = max(times)
    print(
        f"  kill -> all reaped: median {statistics.median(times):.1f} ms, max {worst:.1f} ms, "
        f"ratio to the 100 ms target {statistics.median(times) / 100:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
