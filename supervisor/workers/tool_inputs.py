"""A sandboxed json tool's input checked against the schema its worker described, on the
host, before the call is dispatched (or even recorded in the ledger).

The rules are the ones a local tool's schema gets in a script (`supervisor.tools.schema`:
``type``, ``enum``, ``required``, ``additionalProperties: false``, ``properties``,
``items``, ``oneOf``/``anyOf``/``allOf``, local ``$ref``), so a call is judged the same
whether a script or `Supervisor.invoke` makes it. Keywords outside that set describe the
tool and are left to the worker: a schema comes from an untrusted worker, and a
``pattern`` run by Python's backtracking ``re`` could stall the host's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from supervisor.ledger import InvalidInput
from supervisor.tools.schema import SchemaValidator
from worker_runtime.protocol.messages import ToolSpec

log = logging.getLogger(__name__)


class InputChecker:
    """One validator per described json tool with a schema, compiled once."""

    __slots__ = ("_broken", "_validators", "checked")

    def __init__(self, specs: Iterable[ToolSpec]) -> None:
        self._validators: dict[str, SchemaValidator] = {}
        self._broken: dict[str, str] = {}
        for spec in specs:
            if spec.format != "json" or not spec.schema:
                continue
            try:
                self._validators[spec.name] = SchemaValidator(spec.schema)
            except Exception as exc:  # an untrusted schema the validator cannot compile
                self._broken[spec.name] = f"{type(exc).__name__}: {exc}"
        #: The tools `check` has anything to say about (the others pass as they are).
        self.checked = frozenset(self._validators) | frozenset(self._broken)

    def check(self, tool: str, value: Any) -> None:
        """Raise `InvalidInput` (one line, what is wrong) unless ``value`` fits."""
        validator = self._validators.get(tool)
        if validator is None:
            broken = self._broken.get(tool)
            if broken is not None:
                raise InvalidInput(f"tool {tool!r}: its schema cannot be checked ({broken})")
            return
        try:
            problem = validator.error(value)
        except Exception as exc:  # a schema shape the walker trips on: fail closed
            log.debug("schema check of %s failed", tool, exc_info=True)
            problem = f"its schema cannot be checked ({type(exc).__name__})"
        if problem is not None:
            raise InvalidInput(f"tool {tool!r}: input does not match its schema: {problem}")
