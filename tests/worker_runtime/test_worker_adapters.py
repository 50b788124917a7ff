"""The adapter author's API: AdapterRegistry, Context, Cancelled, typed errors, arguments."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import worker_runtime
from worker_runtime import AdapterError, AdapterRegistry, Cancelled, Context, InvalidInput
from worker_runtime.__main__ import UsageError, load_registry, parse_args
from worker_runtime.examples import registry as examples


def test_the_fixed_public_names_are_exported() -> None:
    for name in ("AdapterRegistry", "Context", "Cancelled"):
        assert hasattr(worker_runtime, name)


def test_registering_with_the_decorator() -> None:
    registry = AdapterRegistry()

    @registry.adapter("t.up", format="json", cancellable=False, expose_errors=True)
    def up(value: object, ctx: Context) -> object:
        return value

    adapter = registry.get("t.up")
    assert adapter is not None and adapter.fn is up
    assert (adapter.format, adapter.cancellable, adapter.expose_errors) == ("json", False, True)
    assert registry.formats() == {"t.up": "json"} and "t.up" in registry and len(registry) == 1


@pytest.mark.parametrize(
    ("tool", "kw", "error"),
    [
        ("Bad Name", {}, ValueError),
        ("t", {"format": "xml"}, ValueError),
    ],
)
def test_registry_refuses_bad_registrations(tool: str, kw: dict[str, str], error: type) -> None:
    with pytest.raises(error):
        AdapterRegistry().add(tool, lambda v, c: v, **kw)  # type: ignore[arg-type]


def test_registry_refuses_a_tool_twice_and_non_callables() -> None:
    registry = AdapterRegistry()
    registry.add("t", lambda v, c: v)
    with pytest.raises(ValueError):
        registry.add("t", lambda v, c: v)
    with pytest.raises(TypeError):
        registry.add("u", "not callable")  # type: ignore[arg-type]
    other = AdapterRegistry()
    other.add("t", lambda v, c: v)
    with pytest.raises(ValueError):
        registry.update(other)


def test_context_token() -> None:
    ctx = Context()
    assert not ctx.cancelled and not ctx.wait_cancelled(0.01)
    ctx.raise_if_cancelled()
    threading.Timer(0.05, ctx._cancel).start()
    assert ctx.wait_cancelled(5)
    assert ctx.cancelled
    with pytest.raises(Cancelled):
        ctx.raise_if_cancelled()


def test_context_emit_and_deadline() -> None:
    sent: list[str] = []

    def emit(text: str) -> bool:
        sent.append(text)
        return True

    ctx = Context(emit=emit, deadline=time.monotonic() + 10)
    assert ctx.emit("x") and sent == ["x"]
    assert Context().emit("x") is False  # no stream: dropped
    with pytest.raises(TypeError):
        ctx.emit(b"bytes")  # type: ignore[arg-type]
    remaining = ctx.remaining()
    assert remaining is not None and 0 < remaining <= 10
    assert Context().remaining() is None
    assert Context(deadline=time.monotonic() - 1).remaining() == 0.0


def test_abort_hooks_run_once_the_session_dies_unless_removed() -> None:
    ran: list[str] = []
    ctx = Context()
    ctx.on_abort(lambda: ran.append("a"))
    remove = ctx.on_abort(lambda: ran.append("b"))

    def failing() -> None:
        raise ZeroDivisionError

    ctx.on_abort(failing)  # a failing hook does not stop the others
    ctx.on_abort(lambda: ran.append("c"))
    remove()
    ctx._abort()
    assert ran == ["a", "c"] and ctx.cancelled


def test_adapter_errors_carry_a_valid_code() -> None:
    assert (InvalidInput("m").code, InvalidInput("m").retryable) == ("invalid_input", False)
    custom = AdapterError("m", code="quota_exceeded", retryable=True)
    assert (custom.code, custom.message, custom.retryable) == ("quota_exceeded", "m", True)
    with pytest.raises(ValueError):
        AdapterError("m", code="Not Valid")


def test_the_example_registry() -> None:
    assert {a.tool for a in examples} >= {
        "text.upper",
        "text.reverse",
        "json.echo",
        "progress.count",
        "sleep",
        "stubborn.sleep",
        "uncancellable.sleep",
        "text.sort",
    }
    ctx = Context()
    assert examples.get("text.reverse").fn("abc", ctx) == "cba"  # type: ignore[union-attr]
    with pytest.raises(InvalidInput):
        examples.get("sleep").fn("soon", ctx)  # type: ignore[union-attr]


def test_parse_args() -> None:
    assert parse_args(["--adapters", "a:b"]) == (["a:b"], 3, 4)
    assert parse_args(["--adapters=a:b", "--adapters", "c:d", "--fd-in", "7", "--fd-out=8"]) == (
        ["a:b", "c:d"],
        7,
        8,
    )
    for bad in ([], ["--fd-in", "0", "--adapters", "a:b"], ["--adapters", "a:b", "extra"]):
        with pytest.raises(UsageError):
            parse_args(bad)
    with pytest.raises(UsageError):
        load_registry(["worker_runtime.examples"])


def test_the_worker_imports_only_itself_msgspec_and_the_stdlib() -> None:
    code = (
        "import sys, worker_runtime.__main__ as m, worker_runtime.examples, "
        "worker_runtime.driver;"
        "mods = {n.split('.')[0] for n in sys.modules};"
        "print(sorted(mods & {'trio', 'cryptography', 'supervisor', 'sandbox', 'anyio', "
        "'subprocess', 'argparse', 'concurrent', 'asyncio', 'psutil'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
