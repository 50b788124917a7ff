"""Adapters that describe themselves (issue 18, item 4): the description and input schema
travel in ``--describe`` and ``ready``, every surface shows them, and a json input is
checked against the schema on the host before anything is dispatched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sv_support import EXAMPLES, supervisor

from supervisor.commands.mcp_server import McpTools
from supervisor.commands.scripted_bridge import add_sandboxed_tools
from supervisor.ledger import InvalidInput
from supervisor.scripted import ScriptedTool
from worker_runtime import AdapterRegistry, Context

SUM_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


async def test_the_description_and_schema_reach_the_host() -> None:
    async with supervisor() as sup:
        spec = sup.specs["json.sum"]
        assert spec.description == "Add two numbers a and b."
        assert spec.schema == SUM_SCHEMA
        assert sup.specs["echo"].description == "" and sup.specs["echo"].schema is None
        session = sup.pool.sessions[0]
        assert session.tools is not None and session.tools["json.sum"] == spec


async def test_a_json_input_is_checked_before_dispatch() -> None:
    async with supervisor() as sup:
        out = await sup.invoke("json.sum", {"a": 2, "b": 3})
        assert out.status == "completed" and out.value == {"sum": 5}
        calls = sup.pool.sessions[0].calls_started
        for bad, why in [
            ({"a": 2}, "missing required property 'b'|required"),
            ({"a": 2, "b": "3"}, "number"),
            ({"a": 2, "b": 3, "c": 4}, "c"),
        ]:
            with pytest.raises(InvalidInput, match=why):
                await sup.invoke("json.sum", bad)
        assert sup.pool.sessions[0].calls_started == calls  # nothing reached a worker
        assert sup.ledger.pending_count == 0


async def test_scripts_help_and_mcp_show_the_worker_s_description() -> None:
    async with supervisor(adapters=[EXAMPLES]) as sup:
        shop = ScriptedTool("shop")
        add_sandboxed_tools(shop, sup.tools, sup.tool_callback, specs=sup.specs)
        assert "Upper-case the text on stdin." in shop.help()
        result = await shop.execute("echo hi | text.upper")
        assert result.stdout == "HI\n"
        listed = {t.name: t for t in McpTools(ScriptedTool("x"), sup).list()}
        assert listed["text.upper"].description.startswith("Upper-case the text on stdin.")
        assert listed["json.echo"].input_schema == {"type": "object"}


async def test_a_script_gets_schema_driven_flags_and_the_schema_s_refusal() -> None:
    async with supervisor() as sup:
        shop = ScriptedTool("shop")
        add_sandboxed_tools(shop, sup.tools, sup.tool_callback, specs=sup.specs)
        ok = await shop.execute("json.sum --a 2 --b 5")
        assert ok.exit_code == 0 and json.loads(ok.stdout) == {"sum": 7}
        bad = await shop.execute("json.sum --a 2")
        assert bad.exit_code == 2 and "schema error" in bad.stderr


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"format": "text", "schema": {"type": "object"}}, ValueError),  # text: no schema
        ({"format": "json", "schema": {"x": object()}}, TypeError),  # not JSON
        ({"format": "json", "schema": ["a"]}, TypeError),  # not an object
        ({"format": "json", "description": "d" * 9000}, ValueError),  # too long
    ],
)
def test_registration_refuses_what_ready_could_not_carry(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    registry = AdapterRegistry()
    with pytest.raises(error):
        registry.adapter("t", **kwargs)(lambda value, ctx: value)
    assert "t" not in registry


def test_the_schema_is_a_private_copy() -> None:
    registry = AdapterRegistry()
    schema: dict[str, Any] = {"type": "object", "required": ["a"]}

    @registry.adapter("t", format="json", description="d", schema=schema)
    def t(value: Any, ctx: Context) -> Any:
        return value

    schema["required"].append("b")
    spec = registry.specs()["t"]
    assert (spec.description, spec.schema) == ("d", {"type": "object", "required": ["a"]})
