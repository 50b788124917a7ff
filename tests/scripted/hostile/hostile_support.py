"""The adversarial suite's harness: hostile scripts by class, each run in a child process
(``hostile_child.py``) that measures its time and its RSS growth with psutil.

A case says what the clean result is (an exit status and a piece of text that must be in
stdout or stderr), and every case is checked for the three promises of issue 19: the
result is clean (no exception escaped, no "internal error"), the script stopped within
its timeout plus ``TIME_SLACK``, and the host's RSS grew by at most ``MEMORY_BOUND``.

``TIME_SLACK`` is what these assertions allow on a loaded 2-core machine; the slack
itself (aim: 100 ms) is measured by ``scripts/bench_hostile.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
TIME_SLACK = 1.0
MEMORY_BOUND = 256 << 20
DEFAULT_TIMEOUT = 2.0


@dataclass
class Case:
    name: str
    script: str
    #: text the clean result must contain (in stdout, stderr or error); alternatives
    #: where which limit comes first depends on the machine's speed
    expect: str | tuple[str, ...] = ""
    exit_code: int | tuple[int, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    limits: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int | None = None

    def payload(self) -> dict[str, Any]:
        limits = {"timeout_seconds": self.timeout, **self.limits}
        return {"script": self.script, "limits": limits, "timeout_ms": self.timeout_ms}


def run_cases(cases: list[Case]) -> dict[str, dict[str, Any]]:
    """Every case's outcome (see ``hostile_child``), by name."""
    budget = sum(c.timeout + TIME_SLACK + 2 for c in cases) + 30
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(HERE / "hostile_child.py")],
        input=json.dumps([c.payload() for c in cases]),
        capture_output=True,
        text=True,
        timeout=budget,
        env=env,
        cwd=ROOT,
    )
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == len(cases), proc.stderr[-3000:]
    return {c.name: json.loads(line) for c, line in zip(cases, lines, strict=True)}


def check(case: Case, got: dict[str, Any]) -> None:
    """The three promises, then the case's own expectation."""
    assert "raised" not in got, got["raised"]
    text = f"{got['stdout']}\n{got['stderr']}\n{got['error'] or ''}"
    shown = text if len(text) < 600 else text[:300] + "..." + text[-300:]
    assert "internal error" not in text, shown
    assert "command failed" not in got["stderr"], shown  # a Python exception in a tool
    assert got["elapsed"] <= case.timeout + TIME_SLACK, (got["elapsed"], shown)
    assert got["rss_growth"] <= MEMORY_BOUND, (got["rss_growth"] >> 20, "MiB")
    if case.exit_code is not None:
        codes = case.exit_code if isinstance(case.exit_code, tuple) else (case.exit_code,)
        assert got["exit_code"] in codes, (got["exit_code"], shown)
    expected = case.expect if isinstance(case.expect, tuple) else (case.expect,)
    assert any(e in text for e in expected), shown


def ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]
