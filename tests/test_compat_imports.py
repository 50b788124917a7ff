"""The import paths README and docs showed before the house moved still work, for one
release (until 0.2), and give the very objects of the new homes."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("supervisor.cli", "main", "supervisor.commands.cli"),
    ("supervisor.tooldefs", "openai_tools", "supervisor.commands.tooldefs"),
    ("supervisor.tooldefs", "anthropic_tools", "supervisor.commands.tooldefs"),
    ("supervisor.tooldefs", "tool_call_executor", "supervisor.commands.tooldefs"),
    ("supervisor.demo", "example_scripted", "supervisor.commands.demo"),
    ("supervisor.audit", "CallEvent", "supervisor.workers.call_audit"),
    ("supervisor.scripted.engine", "run_script", "supervisor.scripted.shell.execution"),
    ("supervisor.scripted.builtins", "TEXT_COMMANDS", "supervisor.scripted.text_tools"),
    ("worker_runtime.command", "CommandAdapter", "worker_runtime.bridges.command"),
]
#: the public names of DESIGN and README, where they have always been
PUBLIC = [
    ("supervisor", "Supervisor"),
    ("supervisor", "AsyncioSupervisor"),
    ("supervisor", "SyncSupervisor"),
    ("supervisor.hosting", "AsyncioSupervisor"),
    ("supervisor.hosting", "SyncSupervisor"),
    ("supervisor.scripted", "ScriptedTool"),
    ("supervisor.scripted", "ToolDef"),
    ("supervisor.ledger", "ToolPolicy"),
    ("sandbox", "SandboxPolicy"),
    ("worker_runtime", "AdapterRegistry"),
    ("worker_runtime", "Context"),
    ("worker_runtime", "Cancelled"),
]


@pytest.mark.parametrize(("old", "name", "new"), MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_the_old_path_gives_the_new_object(old: str, name: str, new: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(new), name
    )


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_public_names_stay(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is not None
