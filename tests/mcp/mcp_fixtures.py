"""What the MCP server tests share (a module of its own: ``conftest`` is a name every test
directory has, so a test importing from it could get another directory's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Servers:
    """Commands of the installed servers (each a list of argv)."""

    everything: list[str]
    filesystem: list[str]
    time: list[str]
    hostile: list[str]


def sandbox_writable(path: Path) -> Path:
    """A new directory the sandbox may write (it runs as a uid of its own)."""
    path.mkdir()
    path.chmod(0o777)
    return path
