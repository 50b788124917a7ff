"""``ToolArgs``: a callback's parameters with typed accessors (bashkit's ``ToolArgs``:
``param_str``, ``param_i64``, ``param_f64``, ``param_bool``).

Callbacks keep bashkit's Python signature ``(params, stdin)``; a callback that wants
typed reads wraps them: ``args = ToolArgs(params, stdin)``. Each accessor returns None
when the key is missing or holds another type, never a converted value, so a schema-less
flag (always a string) is not silently read as a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_I64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class ToolArgs:
    """The parsed flags of one call (``params``) and its piped input (``stdin``)."""

    params: Mapping[str, Any] = field(default_factory=dict)
    stdin: str | None = None

    def param_str(self, key: str) -> str | None:
        value = self.params.get(key)
        return value if isinstance(value, str) else None

    def param_i64(self, key: str) -> int | None:
        """An integer in the signed 64-bit range (a bool, a float or a string is None)."""
        value = self.params.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value if _I64[0] <= value <= _I64[1] else None

    def param_f64(self, key: str) -> float | None:
        """A number (an integer reads as a float; a bool or a string is None)."""
        value = self.params.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def param_bool(self, key: str) -> bool | None:
        value = self.params.get(key)
        return value if isinstance(value, bool) else None
