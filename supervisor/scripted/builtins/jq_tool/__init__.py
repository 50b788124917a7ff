"""``jq`` over libjq (the ``jq`` package), formatted and exiting like the jq 1.6 binary."""

from __future__ import annotations

from .command import jq

__all__ = ["jq"]
