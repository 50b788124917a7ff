"""Which node takes the next call: the one with the fewest calls of ours in flight.

Sans-IO: the `RaySupervisor` tells the router when a call starts and ends and when a node
failed or answered again; the router never waits. A node whose actor was lost under a call
is *suspect*: passed over while another node can take the call, and otherwise used only
once its restarted actor has answered a probe (Ray fails a call sent to an actor that is
restarting, and such a call must not be sent at all); suspect nodes are probed in turn. A
node whose actor is dead for good (Ray will not restart it) is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

A = TypeVar("A")


@dataclass
class Node(Generic[A]):
    """One node's actor and what the router knows of it."""

    key: str  # the Ray node id
    actor: A
    label: str
    in_flight: int = 0
    suspect: bool = False  # lost under a call; to be probed before it takes another
    dead: bool = False
    calls: int = 0  # calls routed here in all (a tie-break, and for reading)
    unanswered: int = 0  # probes of it that failed since it was last trusted


class NoNode(Exception):
    """Every node's actor is dead for good."""


class Router(Generic[A]):
    def __init__(self, nodes: Sequence[Node[A]]) -> None:
        self.nodes = list(nodes)

    def pick(self) -> Node[A]:
        """The live node with the fewest calls in flight (then the fewest routed in all),
        preferring nodes that are not suspect (if it returns a suspect one, probe it)."""
        live = [n for n in self.nodes if not n.dead]
        if not live:
            raise NoNode("every node's actor is dead; start the RaySupervisor again")
        trusted = [n for n in live if not n.suspect]
        if trusted:
            return min(trusted, key=lambda n: (n.in_flight, n.calls))
        # every one suspect: the one probed in vain the fewest times, so that a node
        # slow to come back does not keep the others from being probed
        return min(live, key=lambda n: (n.unanswered, n.in_flight, n.calls))

    def ready(self) -> Node[A] | None:
        """The node `pick` gives when that node needs no probe; None when every live
        node is suspect, or none is left (the caller then takes the way that probes, or
        says why)."""
        best: Node[A] | None = None
        for node in self.nodes:
            if node.dead or node.suspect:
                continue
            if best is None or (node.in_flight, node.calls) < (best.in_flight, best.calls):
                best = node
        return best

    def started(self, node: Node[A], count: int = 1) -> None:
        node.in_flight += count
        node.calls += count

    def ended(self, node: Node[A], count: int = 1) -> None:
        node.in_flight -= count

    def failed(self, node: Node[A], *, for_good: bool) -> None:
        """Its actor was lost under a call (``for_good``: Ray will not restart it)."""
        if for_good:
            node.dead = True
        else:
            node.suspect = True

    def unanswered_probe(self, node: Node[A]) -> None:
        """A suspect node did not answer its probe (yet): probe the others first."""
        node.unanswered += 1

    def answered(self, node: Node[A]) -> None:
        node.suspect = False
        node.unanswered = 0
