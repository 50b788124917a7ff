"""Helpers for the supervisor's tests: a checked supervisor, the faulty worker, probes."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psutil
from proc_helpers import fd_table, fds_opened

from sandbox import SandboxPolicy, python_command
from sandbox.policy import DEFAULT_ENV
from supervisor.ledger import ToolPolicy
from supervisor.workers.supervisor import Supervisor

ADAPTERS = "sv_test_adapters:registry"
EXAMPLES = "worker_runtime.examples:registry"
KiB = 1024


def fake_worker(mode: str, **policy: Any) -> dict[str, Any]:
    """Supervisor arguments for the misbehaving worker in ``fakes/`` (via worker_argv)."""
    command = python_command("sv_fake_worker", [mode], modules=("worker_runtime", "msgspec"))
    return {
        "worker_argv": list(command.argv),
        "policy": SandboxPolicy(binds=command.binds, env={**DEFAULT_ENV, **command.env}, **policy),
        "tools": [ToolPolicy("fake", max_calls=2**40, max_input_bytes=512 * KiB)],
    }


_launched_before = False


@asynccontextmanager
async def supervisor(*, check_fds: bool = True, **kwargs: Any) -> AsyncIterator[Supervisor]:
    """A started supervisor; after it closed, no process of any of its sandboxes lives
    and (once the sandbox's one-time fd set-up happened in this process) no fd leaked."""
    global _launched_before
    if not {"adapters", "worker_argv", "groups"} & kwargs.keys():
        kwargs["adapters"] = [ADAPTERS]
    kwargs.setdefault("ping_interval", None)
    fds = fd_table()
    sup = Supervisor(**kwargs)
    async with sup:
        yield sup
    assert_no_survivors(sup)
    if _launched_before and check_fds:
        gc.collect()
        leaked = fds_opened(fds, fd_table())
        assert not leaked, f"the supervisor leaked fds: {leaked}"
    _launched_before = True


def assert_no_survivors(sup: Supervisor) -> None:
    pools = [sup.group(name).pool for name in sup.groups]
    sessions = [s for pool in pools for s in (*pool.history, *pool.sessions)]
    left = {s.id: s.survivors() for s in sessions}  # each sandbox's cleanup awaited its end
    assert not any(left.values()), f"sandbox processes survive: {left}"


def rss() -> int:
    return int(psutil.Process().memory_info().rss)


def worker_process(session_pid: int | None) -> psutil.Process:
    """The Python worker inside a session's sandbox (a descendant of its bwrap)."""
    assert session_pid is not None
    for child in psutil.Process(session_pid).children(recursive=True):
        try:
            if "worker_runtime" in " ".join(child.cmdline()) or "sv_fake" in " ".join(
                child.cmdline()
            ):
                return child
        except psutil.Error:
            continue
    raise AssertionError(f"no worker process under pid {session_pid}")


def check_ledger(sup: Supervisor, *, indeterminate_ok: bool = True) -> None:
    """Every operation is resolved, or pending only because it is indeterminate."""
    for info in sup.ledger.pending():
        assert indeterminate_ok and info.indeterminate, f"operation left pending: {info}"


async def ended_session(sup: Supervisor, session_id: str | None) -> Any:
    """The session once its teardown finished (it is in the pool's history)."""
    import trio

    with trio.fail_after(10):
        while True:
            for session in sup.pool.history:
                if session.id == session_id:
                    return session
            await trio.sleep(0.005)
