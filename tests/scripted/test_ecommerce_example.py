"""The seed's e-commerce example end to end (bashkit ``examples/scripted_tool.rs``): the
same four tools (get_user, list_orders, get_inventory, create_discount), the same store
name and the same six demo scripts, through the interpreter, jq and the tool surface.
Expected outputs are written out, and the bashkit 0.20.1 wheel must agree with them."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.scripted import ScriptedTool, ToolDef

USERS = {
    1: ("Alice", "alice@example.com", "premium"),
    2: ("Bob", "bob@example.com", "basic"),
    3: ("Charlie", "charlie@example.com", "premium"),
}
ORDERS = {
    1: '[{"order_id":101,"item":"Laptop","qty":1,"price":999.99},'
    '{"order_id":102,"item":"Mouse","qty":2,"price":29.99}]',
    2: '[{"order_id":201,"item":"Keyboard","qty":1,"price":79.99}]',
    3: "[]",
}
STOCK = {"laptop": 15, "mouse": 142, "keyboard": 67}


def get_user(params: dict[str, Any], stdin: str | None = None) -> str:
    uid = params["id"]
    if uid not in USERS:
        raise LookupError(f"user {uid} not found")
    name, email, tier = USERS[uid]
    return f'{{"id":{uid},"name":"{name}","email":"{email}","tier":"{tier}"}}\n'


def list_orders(params: dict[str, Any], stdin: str | None = None) -> str:
    uid = params["user_id"]
    if uid not in ORDERS:
        raise LookupError(f"no orders for user {uid}")
    return ORDERS[uid] + "\n"


def get_inventory(params: dict[str, Any], stdin: str | None = None) -> str:
    item = params["item"]
    return f'{{"item":"{item}","in_stock":{STOCK.get(item.lower(), 0)}}}\n'


def create_discount(params: dict[str, Any], stdin: str | None = None) -> str:
    uid, pct = params["user_id"], params["percent"]
    return f'{{"code":"SAVE{pct}-U{uid}","percent":{pct},"user_id":{uid}}}\n'


def schema(**props: tuple[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": t, "description": d} for k, (t, d) in props.items()},
        "required": list(props),
    }


TOOLS = [
    ToolDef("get_user", "Fetch user by ID", schema(id=("integer", "User ID"))),
    ToolDef("list_orders", "List orders for a user", schema(user_id=("integer", "User ID"))),
    ToolDef("get_inventory", "Check inventory for an item", schema(item=("string", "Item name"))),
    ToolDef(
        "create_discount",
        "Create a discount code",
        schema(user_id=("integer", "User ID"), percent=("integer", "Discount percentage")),
    ),
]
CALLBACKS = [get_user, list_orders, get_inventory, create_discount]
SHORT = "E-commerce API orchestrator with user, order, and inventory tools"

DEMOS: list[tuple[str, str, str]] = [
    (
        "single-call",
        "get_user --id 1",
        '{"id":1,"name":"Alice","email":"alice@example.com","tier":"premium"}\n',
    ),
    ("pipeline-jq", "get_user --id 1 | jq -r '.name'", "Alice\n"),
    (
        "multi-step",
        """
        user=$(get_user --id 1)
        name=$(echo "$user" | jq -r '.name')
        tier=$(echo "$user" | jq -r '.tier')
        orders=$(list_orders --user_id 1)
        total=$(echo "$orders" | jq '[.[].price] | add')
        count=$(echo "$orders" | jq 'length')
        echo "Customer: $name (tier: $tier)"
        echo "Orders: $count, Estimated total: $total"
        """,
        "Customer: Alice (tier: premium)\nOrders: 2, Estimated total: 1029.98\n",
    ),
    (
        "loop-conditional",
        """
        for uid in 1 2 3; do
            user=$(get_user --id $uid)
            name=$(echo "$user" | jq -r '.name')
            tier=$(echo "$user" | jq -r '.tier')
            if [ "$tier" = "premium" ]; then
                echo "$name is premium - creating discount"
                create_discount --user_id $uid --percent 20 | jq -r '.code'
            else
                echo "$name is $tier - no discount"
            fi
        done
        """,
        "Alice is premium - creating discount\nSAVE20-U1\nBob is basic - no discount\n"
        "Charlie is premium - creating discount\nSAVE20-U3\n",
    ),
    (
        "inventory",
        """
        for item in Laptop Mouse Keyboard Widget; do
            result=$(get_inventory --item "$item")
            stock=$(echo "$result" | jq '.in_stock')
            if [ "$stock" -eq 0 ]; then
                echo "$item: OUT OF STOCK"
            else
                echo "$item: $stock in stock"
            fi
        done
        """,
        "Laptop: 15 in stock\nMouse: 142 in stock\nKeyboard: 67 in stock\nWidget: OUT OF STOCK\n",
    ),
    (
        "aggregate-report",
        """
        echo "=== $STORE_NAME Report ==="
        for uid in 1 2; do
            name=$(get_user --id $uid | jq -r '.name')
            orders=$(list_orders --user_id $uid)
            count=$(echo "$orders" | jq 'length')
            echo "$name: $count orders"
        done
        """,
        "=== Bashkit Shop Report ===\nAlice: 2 orders\nBob: 1 orders\n",
    ),
]

ERRORS: list[tuple[str, str, tuple[str, str, int]]] = [
    ("unknown-user", "get_user --id 9", ("", "get_user: callback failed\n", 1)),
    (
        "missing-flag",
        "get_user",
        ("", "get_user: schema error: required property 'id' is missing\n", 2),
    ),
    (
        "failure-then-continue",
        "list_orders --user_id 9; echo $?",
        ("1\n", "list_orders: callback failed\n", 0),
    ),
    ("bad-type", "get_user --id x", ("", "get_user: schema error: input.id must be integer\n", 2)),
]


@pytest.fixture(scope="module")
def shop() -> ScriptedTool:
    tool = ScriptedTool("ecommerce_api", short_description=SHORT)
    for definition, callback in zip(TOOLS, CALLBACKS, strict=True):
        tool.add_tool(definition, callback)
    tool.env("STORE_NAME", "Bashkit Shop")
    return tool


def oracle() -> Any:
    from bashkit.scripted import ScriptedTool as Oracle

    tool = Oracle("ecommerce_api", short_description=SHORT)
    for definition, callback in zip(TOOLS, CALLBACKS, strict=True):
        tool.add_tool(
            definition.name, definition.description, callback, dict(definition.input_schema)
        )
    tool.env("STORE_NAME", "Bashkit Shop")
    return tool


@pytest.mark.parametrize(("script", "stdout"), [d[1:] for d in DEMOS], ids=[d[0] for d in DEMOS])
def test_demo(shop: ScriptedTool, script: str, stdout: str) -> None:
    result = shop.execute_sync(script)
    assert (result.stdout, result.stderr, result.exit_code, result.error) == (stdout, "", 0, None)


@pytest.mark.parametrize(("script", "stdout"), [d[1:] for d in DEMOS], ids=[d[0] for d in DEMOS])
def test_demo_matches_bashkit(script: str, stdout: str) -> None:
    result = oracle().execute_sync(script)
    assert (result.stdout, result.exit_code) == (stdout, 0)


@pytest.mark.parametrize(
    ("script", "expected"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_error_paths(shop: ScriptedTool, script: str, expected: tuple[str, str, int]) -> None:
    result = shop.execute_sync(script)
    assert (result.stdout, result.stderr, result.exit_code) == expected
    bashkit = oracle().execute_sync(script)
    assert (bashkit.stdout, bashkit.stderr, bashkit.exit_code) == expected


def test_what_the_model_sees(shop: ScriptedTool) -> None:
    assert shop.name == "ecommerce_api"
    assert "`create_discount --percent <integer> --user_id <integer>`" in shop.system_prompt()
    assert (
        "| `get_inventory` | Check inventory for an item | `get_inventory --item <string>` |"
        in (shop.help())
    )


async def test_demos_under_trio_with_trace(shop: ScriptedTool) -> None:
    script = DEMOS[3][1]
    result = await shop.execute(script)
    assert result.stdout == DEMOS[3][2]
    trace = shop.take_last_execution_trace()
    assert trace is not None
    calls = [(e.name, e.args, e.exit_code) for e in trace.invocations]
    assert calls == [
        ("get_user", ["--id", "1"], 0),
        ("create_discount", ["--user_id", "1", "--percent", "20"], 0),
        ("get_user", ["--id", "2"], 0),
        ("get_user", ["--id", "3"], 0),
        ("create_discount", ["--user_id", "3", "--percent", "20"], 0),
    ]
