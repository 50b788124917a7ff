"""The text tools of the logic-only shell: stdin-only commands as pure Python functions.

``TEXT_COMMANDS`` maps each name (``jq grep sed awk sort uniq cut tr wc head tail seq
expr`` and the extras ``tac rev nl paste fold``) to a ``Command``: ``(args, stdin) ->
CommandResult``. None of them touches the filesystem, a process or the network; file
operands are rejected with each tool's own wording (reference-bashkit.md 4.2), and every
tool bounds its output (``common.MAX_OUTPUT_BYTES``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

# Lazy, so that a jq engine child, which imports ``builtins.jq_tool.child``, does not
# load every tool (nor the engine pool's asyncio) to start.
__getattr__ = lazy_exports(__name__, {"TEXT_COMMANDS": f"{__name__}.text_commands"})

if TYPE_CHECKING:
    from .text_commands import TEXT_COMMANDS

__all__ = ["TEXT_COMMANDS"]
