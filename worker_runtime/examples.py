"""Example adapters shipped with the package: ``--adapters worker_runtime.examples:registry``.

Small on purpose; the demo, the docs and the tests use them.
"""

from __future__ import annotations

import time
from typing import Any

from .adapters import AdapterRegistry, Cancelled, Context, InvalidInput
from .bridges.command import CommandAdapter

registry = AdapterRegistry()


@registry.adapter("text.upper", description="Upper-case the text on stdin.")
def upper(value: str, ctx: Context) -> str:
    ctx.raise_if_cancelled()
    return value.upper()


@registry.adapter("text.reverse", description="Reverse the text on stdin.")
def reverse(value: str, ctx: Context) -> str:
    return value[::-1]


@registry.adapter(
    "json.echo",
    format="json",
    description="Return the JSON object it is given.",
    schema={"type": "object"},
)
def echo(value: Any, ctx: Context) -> Any:
    return value


@registry.adapter(
    "progress.count",
    description="Count to N (input N or N/SECONDS), streaming each number as progress.",
)
def count(value: str, ctx: Context) -> str:
    """Input "N" or "N/SECONDS": emit chunks "1".."N", pausing between them; honours cancel."""
    total, pause = _numbers(value, default_pause=0.01)
    sent = 0
    for i in range(1, int(total) + 1):
        if ctx.wait_cancelled(pause):
            raise Cancelled()
        if ctx.emit(str(i)):
            sent += 1
    return f"counted {int(total)}, streamed {sent}"


@registry.adapter("sleep", description="Sleep SECONDS (input); stops at once on cancel.")
def sleep(value: str, ctx: Context) -> str:
    """Sleep for the given seconds, waking at once on cancel (and acknowledging it)."""
    seconds, _ = _numbers(value)
    if ctx.wait_cancelled(seconds):
        raise Cancelled()
    return f"slept {seconds:g}"


@registry.adapter("stubborn.sleep", description="Sleep SECONDS (input), ignoring cancellation.")
def stubborn_sleep(value: str, ctx: Context) -> str:
    """Registered cancellable, but ignores its token: a cancel ends in too_late."""
    seconds, _ = _numbers(value)
    time.sleep(seconds)
    return f"slept {seconds:g}"


@registry.adapter(
    "uncancellable.sleep",
    cancellable=False,
    description="Sleep SECONDS (input); cannot be cancelled.",
)
def uncancellable_sleep(value: str, ctx: Context) -> str:
    """Registered cancellable=False: a cancel is answered unsupported."""
    seconds, _ = _numbers(value)
    time.sleep(seconds)
    return f"slept {seconds:g}"


registry.add(
    "text.sort", CommandAdapter(["sort"], timeout=10.0), description="Sort the lines on stdin."
)


def _numbers(value: str, default_pause: float = 0.0) -> tuple[float, float]:
    head, _, tail = value.strip().partition("/")
    try:
        first = float(head)
        second = float(tail) if tail else default_pause
    except ValueError:
        raise InvalidInput("expected a number, or NUMBER/SECONDS") from None
    if not (0 <= first <= 3600 and 0 <= second <= 60):
        raise InvalidInput("number out of range")
    return first, second
