"""Adapters that misbehave on purpose: ``--adapters hostile_adapters:registry``.

The tests put this directory on the worker's PYTHONPATH.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from worker_runtime import (
    AdapterError,
    AdapterRegistry,
    Cancelled,
    Context,
    InvalidInput,
    Unavailable,
)
from worker_runtime.bridges.command import CommandAdapter

registry = AdapterRegistry()

SECRET = "secret-token-4f1d"
FAKE_FRAME = "0" * 64 + ' {"type":"result","v":1,"sid":"x","seq":1,"rid":"r1"}'


@registry.adapter("flood.output")
def flood_output(value: str, ctx: Context) -> str:
    """Floods stdout and stderr (with frame-looking lines too), then answers normally."""
    size = int(value)
    line = FAKE_FRAME + "\n"
    for _ in range(size // len(line) + 1):
        sys.stdout.write(line)
        sys.stderr.write(line)
    sys.stdout.flush()
    os.write(1, b"raw bytes on fd 1\n")
    return "flooded"


@registry.adapter("fail.secret")
def fail_secret(value: str, ctx: Context) -> str:
    raise RuntimeError(f"internal failure holding {SECRET}")


@registry.adapter("fail.exposed", expose_errors=True)
def fail_exposed(value: str, ctx: Context) -> str:
    raise ValueError("visible detail")


@registry.adapter("fail.invalid")
def fail_invalid(value: str, ctx: Context) -> str:
    raise InvalidInput("the input is not acceptable")


@registry.adapter("fail.unavailable")
def fail_unavailable(value: str, ctx: Context) -> str:
    raise Unavailable("try again later")


class _SloppyError(AdapterError):
    """An error class with a code outside the grammar and no super().__init__ call."""

    code = "Not A Code"

    def __init__(self) -> None:
        pass


@registry.adapter("fail.sloppy")
def fail_sloppy(value: str, ctx: Context) -> str:
    raise _SloppyError()


@registry.adapter("fail.exit")
def fail_exit(value: str, ctx: Context) -> str:
    sys.exit(7)  # in an adapter thread this must stay an ordinary adapter failure


@registry.adapter("bad.output")
def bad_output(value: str, ctx: Context) -> Any:
    return 42  # not a str, for a text grant


@registry.adapter("big.output")
def big_output(value: str, ctx: Context) -> str:
    return "x" * int(value)


@registry.adapter("ack.uninvited")
def ack_uninvited(value: str, ctx: Context) -> str:
    raise Cancelled()  # without any cancel: not an acknowledgement


@registry.adapter("emit.flood")
def emit_flood(value: str, ctx: Context) -> str:
    accepted = sum(ctx.emit(f"chunk {i}") for i in range(int(value)))
    return f"accepted {accepted}"


@registry.adapter("context.echo", format="json")
def context_echo(value: Any, ctx: Context) -> Any:
    return {
        "rid": ctx.rid,
        "tool": ctx.tool,
        "attempt": ctx.attempt,
        "idempotency_key": ctx.idempotency_key,
        "remaining": ctx.remaining(),
        "cancelled": ctx.cancelled,
    }


@registry.adapter("stubborn.spin")
def stubborn_spin(value: str, ctx: Context) -> str:
    """Ignores its token and burns CPU."""
    end = time.monotonic() + float(value)
    while time.monotonic() < end:
        pass
    return "spun"


registry.add(
    "command.group",
    CommandAdapter(
        ["sh", "-c", "sleep 60 & sleep 60 & echo started; wait"], timeout=120, grace=0.3
    ),
)


class _SlowStart(CommandAdapter):
    """A spawn that returns only once the call is aborted: the window in which the
    program has started its group but its pid has not reached the adapter yet (one call
    at a time)."""

    ctx = Context()

    def __call__(self, value: Any, ctx: Context) -> Any:
        self.ctx = ctx
        return super().__call__(value, ctx)

    def _spawn(self) -> Any:
        proc = super()._spawn()
        self.ctx.wait_cancelled(30)
        return proc


registry.add(
    "command.slow_start",
    _SlowStart(["sh", "-c", "sleep 60 & sleep 60 & echo started; wait"], timeout=120),
)
registry.add(
    "command.deaf",
    CommandAdapter(
        ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait; wait"], timeout=120, grace=0.3
    ),
)
registry.add(
    "command.fds",
    CommandAdapter(
        [
            sys.executable,
            "-c",
            "import os\nfor fd in (3, 4):\n    try:\n        os.fstat(fd)\n"
            "        print(fd)\n    except OSError:\n        pass",
        ]
    ),
)
