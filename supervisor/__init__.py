"""sandvisor's host side: supervisor, ledger, tool registry, scripted orchestration, CLI.

Public names are imported lazily so that ``import supervisor.scripted`` does not pay for
the worker supervisor, and the reverse.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, str] = {}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'supervisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
