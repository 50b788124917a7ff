"""Helpers for the language-core unit tests: run a script with a small command table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from supervisor.scripted.contract import (
    Command,
    CommandResult,
    ExecResult,
    ExecutionLimits,
    ScriptRequest,
)
from supervisor.scripted.shell.execution import run_script


@dataclass
class Recorder:
    """A table command that records its calls and echoes its stdin back."""

    calls: list[tuple[list[str], str | None]] = field(default_factory=list)

    def __call__(self, args: list[str], stdin: str | None) -> CommandResult:
        self.calls.append((list(args), stdin))
        return CommandResult(stdout="" if stdin is None else stdin)


async def run(
    script: str,
    commands: Mapping[str, Command] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: frozenset[str] = frozenset(),
    request_timeout: float | None = None,
    **limits: Any,
) -> ExecResult:
    return await run_script(
        ScriptRequest(
            script,
            commands=dict(commands or {}),
            env=dict(env or {}),
            limits=replace(ExecutionLimits(), **limits),
            overrides=overrides,
            request_timeout_seconds=request_timeout,
        )
    )
