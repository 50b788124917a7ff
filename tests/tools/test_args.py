"""``ToolArgs``: typed reads of a callback's params, None on a missing key or a type
mismatch (never a conversion), as bashkit's ``param_str/i64/f64/bool``."""

from __future__ import annotations

import pytest

from supervisor.tools import ToolArgs

PARAMS = {"s": "42", "i": 42, "big": 2**63, "f": 2.5, "t": True, "n": None, "l": [1]}


@pytest.mark.parametrize(
    ("key", "as_str", "as_i64", "as_f64", "as_bool"),
    [
        ("s", "42", None, None, None),  # a flag without a schema stays a string
        ("i", None, 42, 42.0, None),
        ("big", None, None, float(2**63), None),  # past i64: not an i64
        ("f", None, None, 2.5, None),
        ("t", None, None, None, True),  # a bool is not a number
        ("n", None, None, None, None),
        ("l", None, None, None, None),
        ("missing", None, None, None, None),
    ],
)
def test_typed_accessors(
    key: str, as_str: str | None, as_i64: int | None, as_f64: float | None, as_bool: bool | None
) -> None:
    args = ToolArgs(PARAMS, "in")
    assert (args.param_str(key), args.param_i64(key), args.param_f64(key)) == (
        as_str,
        as_i64,
        as_f64,
    )
    assert args.param_bool(key) is as_bool
    assert args.stdin == "in"


def test_a_callback_reads_its_flags_typed() -> None:
    from supervisor.scripted import ScriptedTool

    def get(params: dict[str, object], stdin: str | None) -> str:
        args = ToolArgs(params, stdin)
        return f"{args.param_i64('id')} {args.param_str('id')} {args.param_bool('v')}\n"

    tool = ScriptedTool("t")
    tool.add_tool(
        "get",
        "Get",
        get,
        schema={
            "type": "object",
            "properties": {"id": {"type": "integer"}, "v": {"type": "boolean"}},
        },
    )
    assert tool.execute_sync("get --id 7 --v; get --id=8").stdout == "7 None True\n8 None None\n"
