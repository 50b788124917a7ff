"""Effectful adapters for the supervisor's journal tests, loaded in the sandbox.

Each run appends a line to ``$JOURNAL_TEST_EFFECTS/<tool>.log`` (a writable bind), so a
test counts the effects that really happened, whatever the host was told.
"""

from __future__ import annotations

import os
import time
from typing import Any

from worker_runtime import AdapterRegistry, Context

registry = AdapterRegistry()


def _effects() -> str:
    return os.environ["JOURNAL_TEST_EFFECTS"]


def _record(ctx: Context, value: Any) -> None:
    """Append one line; the log is writable by every sandbox uid (each supervisor's
    sandboxes run as uids of their own; in a sticky directory, O_CREAT on another uid's
    file is refused, so an existing log is opened without it)."""
    path = os.path.join(_effects(), f"{ctx.tool}.log")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, 0o666)
    with os.fdopen(fd, "a") as log:
        log.write(f"{ctx.idempotency_key} {ctx.attempt} {value!r}\n")
        log.flush()
        os.fsync(log.fileno())


@registry.adapter("pay", format="json", effectful=True, description="Charge an amount.")
def pay(value: Any, ctx: Context) -> Any:
    _record(ctx, value)
    return {"receipt": f"r-{value['amount']}"}


@registry.adapter("ship.lost", effectful=True)
def ship_lost(value: str, ctx: Context) -> str:
    """The effect happens and the worker journals its answer, but the answer never
    reaches the host: the worker's frame pipe (fd 4) is gone, as if the worker had died
    between its journal and its frame; it fails its write and exits."""
    _record(ctx, value)
    os.close(4)
    return f"shipped:{value}"


@registry.adapter("ship.gated", effectful=True, cancellable=False)
def ship_gated(value: str, ctx: Context) -> str:
    """The effect happens, then the answer waits for ``$JOURNAL_TEST_EFFECTS/go``."""
    _record(ctx, value)
    while not os.path.exists(os.path.join(_effects(), "go")):
        time.sleep(0.01)
    return f"shipped:{value}"


@registry.adapter("ship.hang", effectful=True, cancellable=False)
def ship_hang(value: str, ctx: Context) -> str:
    """The effect happens, then the call never ends."""
    _record(ctx, value)
    time.sleep(300)
    return value


@registry.adapter("wait", cancellable=False)
def wait(value: str, ctx: Context) -> str:
    """Not effectful: never ends."""
    _record(ctx, value)
    time.sleep(300)
    return value


@registry.adapter("echo")
def echo(value: str, ctx: Context) -> str:
    return value
