"""Scale-out on Ray: `RaySupervisor`, the asyncio supervisor's surface over a cluster.

Ray is an optional extra (``pip install 'sandvisor[ray]'``, on every node); this package
imports without it, and `RaySupervisor` says so when entered. See docs/cluster.md.
"""

from supervisor.cluster.errors import ClusterError, NodeUnfit
from supervisor.cluster.outcomes import NODE_LOST
from supervisor.cluster.ray_supervisor import RayCallHandle, RaySupervisor
from supervisor.cluster.wire import Call, NodeInfo

__all__ = [
    "NODE_LOST",
    "Call",
    "ClusterError",
    "NodeInfo",
    "NodeUnfit",
    "RayCallHandle",
    "RaySupervisor",
]
