"""Moved to `supervisor.scripted.text_tools` (the shell builtins are
`supervisor.scripted.shell.builtins`); this path stays for one release (removed in 0.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

__getattr__ = lazy_exports(__name__, {"TEXT_COMMANDS": "supervisor.scripted.text_tools"})

if TYPE_CHECKING:
    from supervisor.scripted.text_tools import TEXT_COMMANDS

__all__ = ["TEXT_COMMANDS"]
