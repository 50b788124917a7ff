"""`supervisor.cluster.routing`: which node takes the next call (no Ray, no sandbox)."""

from __future__ import annotations

import pytest

from supervisor.cluster.routing import Node, NoNode, Router

NEEDS_RAY = False
NEEDS_SANDBOX = False


def nodes(count: int) -> list[Node[str]]:
    return [Node(f"n{i}", f"actor{i}", f"node {i}") for i in range(count)]


def test_calls_spread_over_nodes_by_calls_in_flight() -> None:
    router = Router(nodes(3))
    picked = []
    for _ in range(6):
        node = router.pick()
        router.started(node)
        picked.append(node.key)
    assert sorted(picked) == ["n0", "n0", "n1", "n1", "n2", "n2"]
    busy = router.nodes[1]
    router.started(busy, 10)  # a batch of ten
    for node in router.nodes:
        if node is not busy:
            router.ended(node, 2)
    assert router.pick().key in ("n0", "n2") and busy.in_flight == 12


def test_a_lost_node_is_passed_over_until_it_answers_and_a_dead_one_is_dropped() -> None:
    router = Router(nodes(2))
    first, second = router.nodes
    router.failed(first, for_good=False)
    assert first.suspect and all(router.pick() is second for _ in range(3))
    router.started(second, 5)
    assert router.pick() is second  # still: a suspect node takes calls only when alone
    router.answered(first)
    assert router.pick() is first
    router.failed(second, for_good=True)
    router.failed(first, for_good=False)
    assert router.pick() is first  # the only live one: probe it, then use it
    router.failed(first, for_good=True)
    with pytest.raises(NoNode, match="dead"):
        router.pick()


def test_ready_is_picks_node_when_it_needs_no_probe() -> None:
    router = Router(nodes(3))
    for _ in range(5):
        router.started(router.pick())
        assert router.ready() is router.pick()
    first, second, third = router.nodes
    router.failed(first, for_good=False)
    router.failed(second, for_good=True)
    assert router.ready() is third is router.pick()  # a trusted node: no probe needed
    router.failed(third, for_good=False)
    assert router.ready() is None and router.pick().suspect  # every live one needs a probe
    router.failed(first, for_good=True)
    router.failed(third, for_good=True)
    assert router.ready() is None  # none left: the slow way says so (NoNode)


def test_suspect_nodes_are_probed_in_turn_until_one_answers() -> None:
    router = Router(nodes(2))
    first, second = router.nodes
    router.started(second)  # second has more in flight: first comes first
    router.failed(first, for_good=False)
    router.failed(second, for_good=False)
    assert router.pick() is first
    router.unanswered_probe(first)  # still restarting: probe the other
    assert router.pick() is second
    router.unanswered_probe(second)
    assert router.pick() is first  # each probed once in vain: in turn again
    router.answered(second)
    assert router.pick() is second and router.ready() is second and not second.unanswered
