"""One pending bound, one audit path (issue 18 item 3), with a real supervisor: a
script's local and external calls share ``max_pending`` and one verified hash chain."""

from __future__ import annotations

import threading
from typing import Any

import trio
from sv_support import supervisor

from supervisor.ledger import AuditKind
from supervisor.scripted import BuiltinContext, ExecResult, ScriptedTool
from supervisor.tools.local_audit import local_call


async def test_local_and_external_calls_of_one_script_are_in_one_verified_chain() -> None:
    async with supervisor() as sup:
        st = ScriptedTool("shop", audit=sup.local_audit())
        schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
        st.add_tool("lookup", "local", lambda p, s: f"sku-{p['id']}\n", schema=schema)
        st.add_tool("echo_tool", "sandboxed", sup.tool_callback("echo"))
        result = await st.execute('lookup --id 7 | echo_tool; lookup --id x; echo "s=$?"')
        assert result.stdout == "sku-7\ns=2\n"
        events = sup.ledger.audit()
        local = [e for e in events if e.kind == AuditKind.LOCAL_CALL]
        assert [(e.op_id, e.tool, e.call_index, e.detail) for e in local] == [
            (0, "lookup", 1, "exit 0"),
            (0, "lookup", 2, "exit 2"),
        ]
        first = local_call("lookup", {"id": 7}, None, "sku-7\n", "", 0)
        assert (local[0].bytes_in, local[0].bytes_out, local[0].digest) == (
            first.bytes_in,
            first.bytes_out,
            first.digest,
        )
        external = [e.kind for e in events if e.op_id != 0]
        assert external == [AuditKind.STARTED, AuditKind.CLAIMED, AuditKind.COMPLETED]
        assert {e.tool for e in events if e.op_id != 0} == {"echo"}  # not counted twice
        assert sup.ledger.verify_audit_chain() == len(events) == 5


async def test_local_and_external_calls_share_the_pending_bound() -> None:
    held, release = trio.Event(), trio.Event()

    async def hold(params: dict[str, Any], stdin: str | None) -> str:
        held.set()
        await release.wait()
        return "held\n"

    async def until_held(ctx: BuiltinContext) -> str:
        await held.wait()
        return ""

    async def let_go(ctx: BuiltinContext) -> str:
        release.set()
        return ""

    async with supervisor(max_pending=1) as sup:

        async def until_pending(ctx: BuiltinContext) -> str:
            while sup.ledger.pending_count < 1:
                await trio.sleep(0.01)
            return ""

        st = ScriptedTool("shop", audit=sup.local_audit())
        st.add_tool("hold", "local, waits", hold)
        st.add_tool("lookup", "local", lambda p, s: "sku\n")
        st.add_tool("echo_tool", "sandboxed", sup.tool_callback("echo"))
        st.add_tool("nap", "sandboxed", sup.tool_callback("sleep"))
        for name, builtin in [
            ("until_held", until_held),
            ("let_go", let_go),
            ("until_pending", until_pending),
        ]:
            st.builtin(name, builtin)
        # a local call holds the one slot: the external call is refused, and so is a
        # second local one; once it ended, both run
        script = (
            'hold & until_held; echo x | echo_tool; echo "ext=$?"; lookup; echo "local=$?"\n'
            "let_go; wait; echo y | echo_tool; lookup\n"
        )
        result = await st.execute(script)
        assert result.stdout == "ext=1\nlocal=1\nheld\ny\nsku\n", result.stderr
        assert result.stderr.splitlines() == [
            "echo_tool: refused, the pending bound is reached (1 operations are pending "
            "already (1 of them local calls of scripts))",
            "lookup: refused, the pending bound is reached (1 operations are pending already "
            "(1 of them local calls of scripts))",
        ]
        # an external call holds it: a local call is refused
        result = await st.execute('echo 0.3 | nap & until_pending; lookup; echo "local=$?"; wait')
        assert result.stdout == "local=1\nslept 0.3\n"
        assert "lookup: refused, the pending bound is reached" in result.stderr
        assert sup.ledger.local_in_flight == 0 and sup.ledger.pending_count == 0
        sup.ledger.verify_audit_chain()


async def test_a_script_in_another_thread_reaches_the_supervisor_loop() -> None:
    async with supervisor() as sup:
        st = ScriptedTool("shop", audit=sup.local_audit())
        st.add_tool("lookup", "local", lambda p, s: "sku\n")
        results: list[ExecResult] = []
        # a thread of its own, which ends (and closes its asyncio runner) before the
        # supervisor's fds are counted
        thread = threading.Thread(target=lambda: results.append(st.execute_sync("lookup; lookup")))
        thread.start()
        await trio.to_thread.run_sync(thread.join)
        assert results[0].stdout == "sku\nsku\n"
        local = [e.call_index for e in sup.ledger.audit() if e.kind == AuditKind.LOCAL_CALL]
        assert local == [1, 2] and sup.ledger.local_in_flight == 0
