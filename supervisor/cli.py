"""Moved to `supervisor.commands.cli`; this path stays for one release (removed in 0.2),
for console scripts installed before the move (``sandvisor = supervisor.cli:main``)."""

from supervisor.commands.cli import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
