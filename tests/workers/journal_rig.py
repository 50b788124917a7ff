"""What the journal tests share: a supervisor of the journaled adapters
(``adapters/sv_journal_adapters.py``) whose effects land in a directory the test reads,
and the calls the restart test leaves in flight."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sandbox import Bind, SandboxPolicy
from sandbox.policy import DEFAULT_ENV
from supervisor.workers.supervisor import Supervisor

JOURNALED = "sv_journal_adapters:registry"
#: The restart test's calls: name -> (tool, value, idempotency key).
CALLS = {
    "a": ("ship.gated", "a", "order-a"),
    "b": ("ship.hang", "b", "order-b"),
    "c": ("wait", "c", "order-c"),
}


def effects_dir(root: Path) -> Path:
    """A directory every sandbox uid may write (the effects logs)."""
    effects = root / "effects"
    effects.mkdir(exist_ok=True)
    os.chmod(effects, 0o1777)
    return effects


def effects_of(effects: Path, tool: str) -> list[str]:
    path = effects / f"{tool}.log"
    return path.read_text().splitlines() if path.exists() else []


def journaled_policy(effects: Path, **policy: Any) -> SandboxPolicy:
    return SandboxPolicy(
        binds=(Bind(str(effects), "/effects", writable=True),),
        env={**DEFAULT_ENV, "JOURNAL_TEST_EFFECTS": "/effects"},
        **policy,
    )


@asynccontextmanager
async def journaled(effects: Path, **kwargs: Any) -> AsyncIterator[Supervisor]:
    kwargs.setdefault("ping_interval", None)
    kwargs.setdefault("policy", journaled_policy(effects))
    async with Supervisor(adapters=[JOURNALED], **kwargs) as sup:
        yield sup
