"""Scripts in child processes: the services' backstop (see ``pool.py``)."""

from __future__ import annotations

from .pool import ScriptPool, default_script_pool

__all__ = ["ScriptPool", "default_script_pool"]
