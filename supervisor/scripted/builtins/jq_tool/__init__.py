"""``jq`` over libjq (the ``jq`` package), formatted and exiting like the jq 1.6 binary.

Filters run in jq engine child processes (``pool.py``), never in the host: libjq holds
the GIL for as long as a filter runs, so only another process can be stopped at a
deadline or a memory limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .limits import JqLimits
from .pool import JqEnginePool, configure, default_pool
from .pool import jq as _contained_jq

if TYPE_CHECKING:
    from collections.abc import Callable

    from supervisor.scripted.contract import CommandResult

#: The command. It returns an awaitable (which the interpreter awaits, as the contract's
#: ``Command`` allows) when called inside an event loop and the answer takes a while;
#: typed as the text tools' sync signature until ``builtins.TextTool`` admits that.
jq: Callable[[list[str], str | None], CommandResult] = _contained_jq  # type: ignore[assignment]

__all__ = ["JqEnginePool", "JqLimits", "configure", "default_pool", "jq"]
