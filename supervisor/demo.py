"""Moved to `supervisor.commands.demo`; this path stays for one release (removed in 0.2)."""

from supervisor.commands.demo import example_scripted

__all__ = ["example_scripted"]
