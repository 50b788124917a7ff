"""`RaySupervisor` over two real Ray nodes (``ray.cluster_utils.Cluster``: two raylets on
this machine, a real multi-node Ray): an actor on each node, calls spread over both, and a
node removed mid-call ends that call ``indeterminate``/``node_lost`` while the other node
serves on; nothing of the removed node survives once its cgroups are swept. Each node
keeps its durable ledger in a file of its own (one directory for both, as two raylets on
one machine have: one file for both, the second node would find it locked), and a
restarted actor recovers its calls from its own file."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import (
    EXAMPLES,
    RAY_GROUP,
    alive,
    cgroups_of,
    children,
    descendants,
    host_prefix,
    none_left_since,
    wait_for,
)

from sandbox.cgroups import collect_orphans, detect_layout
from supervisor.cluster import NODE_LOST, Call, RaySupervisor

pytestmark = RAY_GROUP


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[Any, Any]]:
    """A head node and one more, one CPU each; yields the cluster and the added node."""
    import ray
    from ray.cluster_utils import Cluster

    before = children()
    env = {"RAY_USAGE_STATS_ENABLED": "0"}
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                              "env_vars": env},
    )  # fmt: skip
    try:
        added = cluster.add_node(num_cpus=1, env_vars=env)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster, added
    finally:
        ray.shutdown()
        cluster.shutdown()
        none_left_since(before)


def test_calls_spread_over_both_nodes_and_a_removed_node_is_node_lost(
    two_nodes: tuple[Any, Any], tmp_path: Path
) -> None:
    cluster, added = two_nodes

    async def main() -> None:
        async with RaySupervisor(
            adapters=[EXAMPLES], pool_size=2, ping_interval=None, ledger_dir=str(tmp_path),
            name="two",
        ) as sup:  # fmt: skip
            assert len({n.node_id for n in sup.nodes}) == 2
            assert len({n.pid for n in sup.nodes}) == 2  # an actor on each node
            # one directory, a ledger file per node (one shared file: the second is locked)
            paths = {n.ledger_path for n in sup.nodes}
            assert len(paths) == 2 and all(os.path.dirname(p) == str(tmp_path) for p in paths)
            assert all(n.node_id in n.ledger_path for n in sup.nodes)
            assert all(os.path.isfile(p) for p in paths)
            labels = {n.label for n in sup.nodes}
            # calls go to the node with the fewest in flight: both take some
            handles = [await sup.start("sleep", "0.3", deadline=30) for _ in range(4)]
            assert {h.node for h in handles} == labels
            assert [(await h.outcome()).status for h in handles] == ["completed"] * 4
            sup.batch_size = 5
            calls = [Call(tool="text.upper", value=f"v{i}") for i in range(20)]
            outs = await sup.invoke_many(calls)
            assert [o.value for o in outs] == [f"V{i}" for i in range(20)]  # type: ignore[union-attr]

            # a call on each node; then the added node goes away under its call
            running = [await sup.start("sleep", "120", deadline=150) for _ in range(2)]
            lost = next(n for n in sup.nodes if n.node_id == added.node_id)
            (on_lost,) = [h for h in running if h.node == lost.label]
            (on_head,) = [h for h in running if h.node != lost.label]
            await asyncio.sleep(0.5)
            started = descendants(lost.pid)
            prefix = host_prefix(lost.pid)
            assert started
            await asyncio.to_thread(cluster.remove_node, added, False)  # no graceful exit
            out = await asyncio.wait_for(on_lost.outcome(), 60)
            assert (out.status, out.kill_reason) == ("indeterminate", NODE_LOST)
            assert lost.label in (out.error or "")
            # the head node serves on, and its own call was never touched
            for _ in range(3):
                again = await sup.invoke("text.upper", "after", deadline=30)
                assert (again.status, again.value) == ("completed", "AFTER")
            assert not on_head.done
            # nothing of the lost node's actor survives; its cgroups go with a sweep
            assert wait_for(lambda: not alive(lost.pid) and not [p for p in started if alive(p)])
            collect_orphans(detect_layout(), again=True)
            assert not cgroups_of(prefix)

            # the head's actor SIGKILLed under its call: the removed node's actor cannot be
            # placed again (its node is gone: dropped for good), and the head's, restarted,
            # opens its own ledger (not the removed node's, unlocked beside it) and
            # recovers that call
            head = next(n for n in sup.nodes if n.node_id != added.node_id)
            os.kill(head.pid, signal.SIGKILL)
            out = await asyncio.wait_for(on_head.outcome(), 60)
            assert (out.status, out.kill_reason) == ("indeterminate", NODE_LOST)
            again = await sup.invoke("text.upper", "restarted", deadline=60)
            assert (again.status, again.value) == ("completed", "RESTARTED"), again.error
            recovered = await sup.outcome(on_head.idempotency_key)
            assert recovered is not None and recovered.status == "indeterminate"
            assert await sup.outcome(on_lost.idempotency_key) is None  # the other file's

    asyncio.run(main())
