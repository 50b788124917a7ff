"""Shared helpers of the hosting tests (a module of its own name: test directories share
one import namespace)."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
from proc_helpers import dying

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = "worker_runtime.examples:registry"
DEMO = "worker_runtime.demo_adapters:registry"
SANDVISOR = [sys.executable, "-m", "supervisor"]


def host_threads() -> list[str]:
    """Threads of hosted supervisors still alive."""
    return [t.name for t in threading.enumerate() if t.name.startswith("sandvisor-host")]


def survivors(supervisor: Any) -> dict[str, list[int]]:
    """Live processes of every sandbox a (closed) supervisor ever started (its close
    returned once each sandbox's pid namespace ended: nothing is left exiting)."""
    pool = supervisor.pool
    sessions = list(pool.history) + list(pool.sessions)
    found = {s.id: s.survivors() for s in sessions}
    return {k: v for k, v in found.items() if v}


def descendants() -> list[psutil.Process]:
    """Live (non-zombie) descendants of this process."""
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.Error:
            continue
    return out


def still_running(processes: list[tuple[int, float]]) -> list[str]:
    """Which of these (pid, start time) processes still run code of their own, as "pid
    cmdline" (a pid taken again by a newer process does not count, nor one exiting)."""
    found = []
    for pid, created in processes:
        try:
            proc = psutil.Process(pid)
            if proc.create_time() == created and not dying(pid):
                found.append(f"{pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.Error:
            continue
    return found


def read_audit(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def child_env() -> dict[str, str]:
    """The environment for a `sandvisor` child: the checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env
