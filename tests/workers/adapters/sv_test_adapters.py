"""Adapters for the supervisor's tests: well-behaved, failing, stubborn and hostile ones.

Loaded inside the sandbox as ``sv_test_adapters:registry``; every tool takes text.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from worker_runtime import AdapterError, AdapterRegistry, Cancelled, Context, Unavailable

registry = AdapterRegistry()


@registry.adapter("echo")
def echo(value: str, ctx: Context) -> str:
    return value


@registry.adapter("json.echo", format="json")
def json_echo(value: Any, ctx: Context) -> Any:
    return value


@registry.adapter(
    "json.sum",
    format="json",
    description="Add two numbers a and b.",
    schema={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
)
def json_sum(value: Any, ctx: Context) -> Any:
    return {"sum": value["a"] + value["b"]}


@registry.adapter("fail")
def fail(value: str, ctx: Context) -> str:
    raise AdapterError(value or "refused", code="nope")


@registry.adapter("crash")
def crash(value: str, ctx: Context) -> str:
    raise RuntimeError("secret internal detail")


@registry.adapter("flaky")
def flaky(value: str, ctx: Context) -> str:
    """Unavailable (retryable) until attempt ``value``; reports the attempt and key."""
    if ctx.attempt < int(value):
        raise Unavailable(f"not yet (attempt {ctx.attempt})")
    return f"ok attempt={ctx.attempt} key={ctx.idempotency_key}"


@registry.adapter("chunks")
def chunks(value: str, ctx: Context) -> str:
    sent = sum(1 for i in range(1, int(value) + 1) if ctx.emit(f"c{i}"))
    return f"sent {sent}"


@registry.adapter("sleep")
def sleep(value: str, ctx: Context) -> str:
    """Cooperative: wakes on cancel and acknowledges it."""
    if ctx.wait_cancelled(float(value)):
        raise Cancelled()
    return f"slept {value}"


@registry.adapter("slow.ack")
def slow_ack(value: str, ctx: Context) -> str:
    """Cooperative but slow to stop: acknowledges ``value`` seconds after the cancel."""
    if ctx.wait_cancelled(30):
        time.sleep(float(value))
        raise Cancelled()
    return "never cancelled"


@registry.adapter("stubborn")
def stubborn(value: str, ctx: Context) -> str:
    """Ignores its token; returns after ``value`` seconds (a cancel ends in too_late)."""
    time.sleep(float(value))
    return f"stubborn {value}"


@registry.adapter("hang")
def hang(value: str, ctx: Context) -> str:
    """Never returns and ignores cancellation."""
    while True:
        time.sleep(0.05)


@registry.adapter("uncancellable", cancellable=False)
def uncancellable(value: str, ctx: Context) -> str:
    time.sleep(float(value))
    return "finished"


@registry.adapter("whoami")
def whoami(value: str, ctx: Context) -> str:
    return json.dumps({"pid": os.getpid(), "uid": os.getuid()})


@registry.adapter("suicide")
def suicide(value: str, ctx: Context) -> str:
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@registry.adapter("flood")
def flood(value: str, ctx: Context) -> str:
    """Write ``value`` MiB to stdout and stderr, then answer."""
    block = b"x" * 65536 + b"\n"
    for _ in range(int(value) * 16):
        os.write(1, block)
        os.write(2, block)
    return "flooded"


@registry.adapter("forkbomb")
def forkbomb(value: str, ctx: Context) -> str:
    """Fork until the pids limit has said no 20 times (at most ``value`` seconds); the
    children sleep forever."""
    forked = failed = 0
    end = time.monotonic() + float(value)
    while time.monotonic() < end and failed < 20:
        try:
            pid = os.fork()
        except OSError:
            failed += 1
            time.sleep(0.001)
            continue
        if pid == 0:
            with contextlib.suppress(BaseException):
                while True:
                    time.sleep(1)
            os._exit(0)
        forked += 1
    return json.dumps({"forked": forked, "failed": failed})


@registry.adapter("memhog")
def memhog(value: str, ctx: Context) -> str:
    hoard = []
    while True:
        hoard.append(bytearray(16 * 1024 * 1024))


@registry.adapter("big")
def big(value: str, ctx: Context) -> str:
    return "y" * int(value)


@registry.adapter("stdin.size")
def stdin_size(value: str, ctx: Context) -> str:
    return str(len(value))


@registry.adapter("print")
def printer(value: str, ctx: Context) -> str:
    print(value, flush=True)
    print(value, file=sys.stderr, flush=True)
    return "printed"
