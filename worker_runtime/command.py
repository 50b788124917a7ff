"""Moved to `worker_runtime.bridges.command`; this path stays for one release (removed in
0.2)."""

from .bridges.command import CommandAdapter

__all__ = ["CommandAdapter"]
