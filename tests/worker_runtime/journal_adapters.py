"""Effectful adapters for the journal tests: each run appends a line to an effects log.

``$JOURNAL_TEST_EFFECTS`` names the directory of the logs (one file per tool), so a test
counts how often an effect really ran, whatever the worker answered.
"""

from __future__ import annotations

import os
import time
from typing import Any

from worker_runtime import AdapterError, AdapterRegistry, Context, Unavailable

registry = AdapterRegistry()


def _record(ctx: Context, value: Any) -> None:
    path = os.path.join(os.environ["JOURNAL_TEST_EFFECTS"], f"{ctx.tool}.log")
    with open(path, "a") as log:
        log.write(f"{ctx.idempotency_key} {ctx.attempt} {value!r}\n")
        log.flush()
        os.fsync(log.fileno())


@registry.adapter("pay", format="json", effectful=True, description="Charge an amount.")
def pay(value: Any, ctx: Context) -> Any:
    _record(ctx, value)
    return {"receipt": f"r-{value['amount']}"}


@registry.adapter("note", effectful=True)
def note(value: str, ctx: Context) -> str:
    """``flaky``: unavailable (retryable) on attempt 1; ``refuse``: a final error."""
    _record(ctx, value)
    if value == "flaky" and ctx.attempt < 2:
        raise Unavailable("not yet")
    if value == "refuse":
        raise AdapterError("no, never", code="refused")
    return value.upper()


@registry.adapter("note.lost", effectful=True)
def lost(value: str, ctx: Context) -> str:
    """The effect happens and is answered, but the answer never reaches the host: the
    worker's frame pipe is gone (as if the worker died between its journal and its
    frame), so the worker fails writing and exits."""
    _record(ctx, value)
    os.close(int(os.environ.get("JOURNAL_TEST_FD_OUT", "4")))
    return f"done:{value}"


@registry.adapter("note.hang", effectful=True, cancellable=False)
def hang(value: str, ctx: Context) -> str:
    """The effect happens, then the call never ends (until its worker is killed)."""
    _record(ctx, value)
    time.sleep(300)
    return value


@registry.adapter("plain")
def plain(value: str, ctx: Context) -> str:
    return value
