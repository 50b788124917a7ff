"""Without Ray installed, `supervisor.cluster` still imports, and a `RaySupervisor` says in
one line what is missing and how to install it (a child interpreter where ``import ray``
fails, as on a machine without the extra)."""

from __future__ import annotations

import os
import subprocess
import sys

from cluster_helpers import ROOT

NEEDS_RAY = False
NEEDS_SANDBOX = False

PROGRAM = """
import asyncio, sys
sys.modules["ray"] = None  # import ray raises ImportError
from supervisor.cluster import ClusterError, RaySupervisor
sup = RaySupervisor(adapters=["worker_runtime.examples:registry"])
try:
    asyncio.run(sup.__aenter__())
except ClusterError as exc:
    print(exc)
"""


def test_without_ray_the_package_imports_and_entering_says_how_to_install_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "Ray is not installed: pip install 'sandvisor[ray]' (on every node)"
    )
