"""The registry contract (reference-bashkit.md section 6 and bashkit's
``tool_registry_tests.rs``): one dispatcher for shell commands and structured calls,
schema before policy before callback, deadlines, sanitisation, tenants and traces."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import trio

from supervisor.scripted.contract import CommandResult, execution_deadline
from supervisor.scripted.tool_commands import command_table
from supervisor.tools import (
    Allow,
    CapabilityRevoked,
    Deny,
    RequestScope,
    ToolCall,
    ToolCallSurface,
    ToolDef,
    ToolFailure,
    ToolRegistry,
    current_call,
)
from supervisor.tools.context import current_request
from supervisor.tools.trace import InvocationTrace


def orders_def() -> ToolDef:
    return (
        ToolDef("orders.list", "List customer orders")
        .with_category("orders")
        .with_tags(["read"])
        .with_schema(
            {
                "type": "object",
                "required": ["customer"],
                "additionalProperties": False,
                "properties": {"customer": {"type": "string"}},
            }
        )
    )


async def shell(
    registry: ToolRegistry,
    argv: list[str],
    *,
    tenant: str | None = None,
    trace: InvocationTrace | None = None,
    stdin: str | None = None,
) -> CommandResult:
    """One shell command through the registry's commands, inside a request scope."""
    scope = RequestScope(tenant, trace if trace is not None else registry.trace())
    token = current_request.set(scope)
    try:
        result = command_table(registry)[argv[0]](argv[1:], stdin)
        if not isinstance(result, CommandResult):
            result = await result
    finally:
        current_request.reset(token)
    return result


async def test_one_registry_serves_shell_and_structured_calls_with_one_policy() -> None:
    calls: list[tuple[str | None, str, ToolCallSurface]] = []
    policy_calls: list[ToolCall] = []

    def callback(params: dict[str, Any], stdin: str | None) -> str:
        ctx = current_call()
        calls.append((ctx.tenant_id, params["customer"], ctx.surface))
        return json.dumps({"customer": params["customer"], "orders": [1, 2]})

    def policy(call: ToolCall) -> Any:
        policy_calls.append(call)
        assert call.tenant_id == "tenant-a"
        return Allow

    registry = ToolRegistry(policy=policy)
    registry.register(orders_def(), callback)
    sh = await shell(registry, ["orders.list", "--customer", "shell"], tenant="tenant-a")
    py = await registry.call("orders.list", {"customer": "python"}, tenant="tenant-a")
    mcp = await registry.call(
        "orders.list", {"customer": "mcp"}, tenant="tenant-a", surface=ToolCallSurface.MCP
    )
    assert sh.exit_code == 0, sh.stderr
    assert py.value()["customer"] == "python"
    assert mcp.value() == {"customer": "mcp", "orders": [1, 2]}
    assert [c.surface for c in policy_calls] == ["shell", "python", "mcp"]
    assert [c.params["customer"] for c in policy_calls] == ["shell", "python", "mcp"]
    assert calls == [
        ("tenant-a", "shell", "shell"),
        ("tenant-a", "python", "python"),
        ("tenant-a", "mcp", "mcp"),
    ]


async def test_schema_then_policy_then_sanitised_failure_with_request_traces() -> None:
    ran: list[str] = []

    def callback(params: dict[str, Any], stdin: str | None) -> str:
        ran.append(params["customer"])
        raise RuntimeError("postgres://secret@internal/orders")

    def policy(call: ToolCall) -> Any:
        return Deny if call.tenant_id == "denied" else Allow

    registry = ToolRegistry(policy=policy)
    registry.register(orders_def(), callback)

    schema = await shell(registry, ["orders.list"])
    assert (schema.stderr, schema.exit_code) == (
        "orders.list: schema error: required property 'customer' is missing\n",
        2,
    )
    denied = await registry.call("orders.list", {"customer": "x"}, tenant="denied")
    assert (denied.stderr, denied.exit_code) == ("orders.list: denied by policy\n", 1)
    assert ran == []

    allowed_trace = registry.trace()
    failed = await shell(
        registry, ["orders.list", "--customer", "x"], tenant="ok", trace=allowed_trace
    )
    assert (failed.stderr, failed.exit_code) == ("orders.list: callback failed\n", 1)
    assert "postgres" not in failed.stderr + failed.stdout
    entries = allowed_trace.take()
    assert [(e.name, e.kind, e.args, e.exit_code) for e in entries] == [
        ("orders.list", "tool", ["--customer", "x"], 1)
    ]
    assert registry.discover(category="orders")[0]["name"] == "orders.list"
    assert registry.discover(tag="write") == []


async def test_deadline_cancels_async_callback_and_tenants_stay_apart() -> None:
    cancelled = trio.Event()

    async def slow(params: dict[str, Any], stdin: str | None) -> str:
        try:
            await trio.sleep(1)
        except trio.Cancelled:
            cancelled.set()
            raise
        return "late"

    registry = ToolRegistry()
    registry.register(orders_def(), slow)
    token = execution_deadline.set(time.monotonic() + 0.025)
    try:
        with trio.fail_after(2):
            timeout = await shell(registry, ["orders.list", "--customer", "x"])
    finally:
        execution_deadline.reset(token)
    assert (timeout.stderr, timeout.exit_code) == ("orders.list: callback timeout\n", 1)
    assert cancelled.is_set()

    seen: list[str | None] = []

    def who(params: dict[str, Any], stdin: str | None) -> str:
        tenant = current_call().tenant_id
        seen.append(tenant)
        return tenant or ""

    registry = ToolRegistry()
    registry.register(orders_def(), who)
    a_trace, b_trace = registry.trace(), registry.trace()
    first = await shell(registry, ["orders.list", "--customer", "x"], tenant="a", trace=a_trace)
    second = await registry.call("orders.list", {"customer": "x"}, tenant="b", trace=b_trace)
    assert (first.stdout, second.stdout) == ("a", "b")
    assert seen == ["a", "b"]
    assert len(a_trace.take()) == 1
    assert len(b_trace.take()) == 1
    assert registry.default_trace.take() == []


async def test_call_context_is_revoked_after_the_call() -> None:
    kept: list[Any] = []

    async def keep(params: dict[str, Any], stdin: str | None) -> str:
        ctx = current_call()
        kept.append(ctx)
        await trio.sleep(0)
        assert ctx.tenant_id == "tenant-a"
        return "ok"

    registry = ToolRegistry()
    registry.register(orders_def(), keep)
    out = await registry.call("orders.list", {"customer": "x"}, tenant="tenant-a")
    assert out.stdout == "ok"
    with pytest.raises(CapabilityRevoked):
        _ = kept[0].tenant_id
    with pytest.raises(CapabilityRevoked):
        _ = kept[0].surface
    with pytest.raises(CapabilityRevoked):
        current_call()


async def test_structured_call_errors() -> None:
    registry = ToolRegistry()
    registry.register(orders_def(), lambda p, s: "ok")
    missing = await registry.call("orders.nope", {})
    assert (missing.stderr, missing.exit_code) == ("orders.nope: unknown tool\n", 127)
    bad = await registry.call("orders.list", {"customer": float("nan")})
    assert bad.exit_code == 2 and bad.stderr.startswith("orders.list: input is not JSON")
    extra = await registry.call("orders.list", {"customer": "x", "limit": 3})
    assert extra.stderr == "orders.list: schema error: unknown property 'limit'\n"
    assert (await registry.call("orders.list", {"customer": "x"})).value() == "ok"


async def test_policy_that_raises_denies() -> None:
    def broken(call: ToolCall) -> Any:
        raise KeyError("oops")

    registry = ToolRegistry(policy=broken)
    registry.register(orders_def(), lambda p, s: "ok")
    out = await registry.call("orders.list", {"customer": "x"})
    assert (out.stderr, out.exit_code) == ("orders.list: denied by policy\n", 1)


async def test_policy_returning_anything_but_allow_denies() -> None:
    registry = ToolRegistry(policy=lambda call: True)  # type: ignore[arg-type,return-value]
    registry.register(orders_def(), lambda p, s: "ok")
    out = await registry.call("orders.list", {"customer": "x"})
    assert out.exit_code == 1


async def test_async_tool_failure_and_timeout_in_structured_call() -> None:
    async def fails(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep(0)
        raise ToolFailure("orders.list: worker cancelled\n", 130)

    async def hangs(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep_forever()
        return ""

    registry = ToolRegistry()
    registry.register(orders_def(), fails)
    registry.register(ToolDef("slow", "slow"), hangs)
    out = await registry.call("orders.list", {"customer": "x"})
    assert (out.stderr, out.exit_code) == ("orders.list: worker cancelled\n", 130)
    with trio.fail_after(2):
        late = await registry.call("slow", timeout=0.02)
    assert (late.stderr, late.exit_code) == ("slow: callback timeout\n", 1)


def test_registry_works_under_asyncio() -> None:
    async def cb(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(0)
        return f"{current_call().surface}:{params['customer']}"

    async def hangs(params: dict[str, Any], stdin: str | None) -> str:
        await asyncio.sleep(10)
        return ""

    registry = ToolRegistry()
    registry.register(orders_def(), cb)
    registry.register(ToolDef("slow", "slow"), hangs)

    async def main() -> tuple[str, str]:
        ok = await registry.call("orders.list", {"customer": "x"})
        late = await asyncio.wait_for(registry.call("slow", timeout=0.02), 2)
        return ok.stdout, late.stderr

    assert asyncio.run(main()) == ("python:x", "slow: callback timeout\n")


def test_names_and_registration_fail_closed() -> None:
    registry = ToolRegistry()
    for bad in ("", "a-b", "1a", "a..b", "a.", "help", "discover", "a b", "local", "export"):
        with pytest.raises(ValueError):
            registry.register(ToolDef(bad, "x"), lambda p, s: "")
    registry.register(ToolDef("a.b_c.D9", "ok"), lambda p, s: "")
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ToolDef("a.b_c.D9", "again"), lambda p, s: "")
    with pytest.raises(TypeError):
        registry.register(ToolDef("c", "x", {"bad": object()}), lambda p, s: "")
    with pytest.raises(TypeError):
        registry.register(ToolDef("d", "x"), "not callable")  # type: ignore[arg-type]
    shell_names = ToolRegistry(dotted_names=False)
    shell_names.register(ToolDef("x-y", "dashes are fine in a ScriptedTool"), lambda p, s: "")
    for bad in ("a/b", "a=b", "a;b", "a$b", "help"):
        with pytest.raises(ValueError):
            shell_names.register(ToolDef(bad, "x"), lambda p, s: "")


def test_schema_is_copied_at_registration() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    registry = ToolRegistry()
    tool = registry.register(ToolDef("t", "x", schema), lambda p, s: "")
    schema["properties"]["n"]["type"] = "string"
    assert tool.validator.error({"n": "x"}) == "input.n must be integer"


def test_decorator_registration() -> None:
    registry = ToolRegistry()

    @registry.tool("math.add", "Add", schema={"type": "object"}, tags=["m"], category="math")
    def add(params: dict[str, Any], stdin: str | None) -> str:
        return "3"

    assert registry.definitions()[0].category == "math"
    assert "math.add" in registry and len(registry) == 1
