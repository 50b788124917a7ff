"""The cluster's own refusals (the supervisor's are raised as they are)."""

from __future__ import annotations

from supervisor.workers.supervisor import SupervisorError


class ClusterError(SupervisorError):
    """The cluster cannot serve: Ray is missing, a name is taken, no node is left."""


class NodeUnfit(ClusterError):
    """A node cannot run sandboxes, or its supervisor did not start; says which node."""
