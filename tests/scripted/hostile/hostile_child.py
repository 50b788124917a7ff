"""Runs hostile scripts for the adversarial suite, in a process of its own.

Reads a JSON list of cases on stdin, runs each through ``ScriptedTool`` (in process, as
the library runs them), and writes one JSON result per case: the ``ExecResult``, the
wall time, and the peak growth of this process's RSS during the case (psutil, sampled
every 2 ms by a thread; RE2 and most C work release or share the GIL). Each case's
baseline is the RSS after the previous case and a garbage collection.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from typing import Any

import psutil

from supervisor.scripted import ExecutionLimits, ScriptedTool


class Sampler:
    def __init__(self) -> None:
        self.process = psutil.Process()
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self.stop.wait(0.002)

    def __enter__(self) -> Sampler:
        self.peak = self.process.memory_info().rss
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.process.memory_info().rss)


def echo_tool(params: dict[str, Any], stdin: str | None) -> str:
    return json.dumps(params) + "\n"


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    limits = ExecutionLimits(**case.get("limits", {}))
    tool = ScriptedTool("hostile", limits=limits)
    tool.add_tool("echo_tool", "echoes its flags", echo_tool)
    gc.collect()
    base = psutil.Process().memory_info().rss
    with Sampler() as sampler:
        start = time.monotonic()
        try:
            if case.get("timeout_ms") is not None:
                request = {"commands": case["script"], "timeout_ms": case["timeout_ms"]}
                result = tool.execute_request_sync(request)
            else:
                result = tool.execute_sync(case["script"])
            outcome: dict[str, Any] = result.to_dict()
        except BaseException as exc:  # the suite asserts that this never happens
            outcome = {"raised": f"{type(exc).__name__}: {exc}"[:500]}
        elapsed = time.monotonic() - start
    del tool
    for key in ("stdout", "stderr", "error"):
        text = outcome.get(key) or ""
        outcome[key] = text if len(text) <= 100_000 else text[:50_000] + "..." + text[-50_000:]
    outcome["elapsed"] = elapsed
    outcome["rss_growth"] = sampler.peak - base
    return outcome


def main() -> None:
    cases = json.load(sys.stdin)
    ScriptedTool("warm").execute_sync("echo warm | grep w | sed s/w/x/ | awk '{print}'")
    for case in cases:
        print(json.dumps(run_case(case)), flush=True)


if __name__ == "__main__":
    main()
