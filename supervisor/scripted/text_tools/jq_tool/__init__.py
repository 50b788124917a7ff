"""``jq`` over libjq (the ``jq`` package), formatted and exiting like the jq 1.6 binary.

Filters run in jq engine child processes (``pool.py``), never in the host: libjq holds
the GIL for as long as a filter runs, so only another process can be stopped at a
deadline or a memory limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor._lazy import lazy_exports

# Lazy: the engine child (``child.py``) imports this package and needs none of these.
__getattr__ = lazy_exports(
    __name__,
    {
        "JqLimits": f"{__name__}.limits",
        "JqEnginePool": f"{__name__}.pool",
        "configure": f"{__name__}.pool",
        "default_pool": f"{__name__}.pool",
        "jq": f"{__name__}.pool",
    },
)

if TYPE_CHECKING:
    from .limits import JqLimits
    from .pool import JqEnginePool, configure, default_pool, jq

__all__ = ["JqEnginePool", "JqLimits", "configure", "default_pool", "jq"]
