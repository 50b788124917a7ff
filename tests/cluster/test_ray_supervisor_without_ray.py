"""Without Ray installed, `supervisor.cluster` still imports, and a `RaySupervisor` says in
one line what is missing and how to install it (a child interpreter where ``import ray``
fails, as on a machine without the extra)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from cluster_helpers import ROOT

from supervisor.cluster.niceness import advice

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


NICE_PROGRAM = """
from supervisor.cluster import NodeUnfit
from supervisor.cluster.niceness import set_niceness
try:
    set_niceness(0, "n1 (10.0.0.1, Ray node 5f2c0a1b9d3e)")
except NodeUnfit as exc:
    print(exc)
"""


def test_a_node_may_not_raise_its_priority_without_the_privilege_and_is_named() -> None:
    """An actor at nice 5 (as Ray starts it, at 15) asked for nice 0 on a node where it
    lacks CAP_SYS_NICE: the node is refused in one line with the fix."""
    drop: list[str] = []
    if os.geteuid() == 0:  # root may: take the capability away
        if shutil.which("setpriv") is None:
            pytest.skip("needs setpriv (util-linux) to drop CAP_SYS_NICE as root")
        drop = ["setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice", "--"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        ["nice", "-n", "5", *drop, sys.executable, "-c", NICE_PROGRAM],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    nice_now = os.getpriority(os.PRIO_PROCESS, 0)
    assert proc.stdout.strip() == (
        f"node n1 (10.0.0.1, Ray node 5f2c0a1b9d3e) cannot run its actor at nice 0 (Ray "
        f"started it at nice {min(nice_now + 5, 19)}): Permission denied; set "
        "RAY_worker_niceness=0 in the environment of `ray start` on every node instead, "
        "or give niceness=None"
    )


def test_a_node_below_the_normal_priority_is_advised_in_one_line() -> None:
    assert advice("n1", 0) is None and advice("n1", -5) is None
    assert advice("n1", 15) == (
        "node n1: its actor and every sandbox run at nice 15 (Ray's RAY_worker_niceness, "
        "15 unless set) and get little CPU on a busy node; set RAY_worker_niceness=0 for "
        "`ray start` on every node, or give RaySupervisor(niceness=0)"
    )
