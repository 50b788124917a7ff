"""A request's audit of local calls: a slot before each call, one record after it,
however it ends; refused calls do not run; ledger operations are not counted twice."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from supervisor.scripted import ScriptedTool
from supervisor.tools.local_audit import LEDGER_AUDITED, LocalCall, LocalCallRefused, local_call


class Recorder:
    """An audit that keeps what it is told, refuses past ``slots`` calls at once, and
    fails its records when ``broken``."""

    def __init__(self, slots: int = 8) -> None:
        self.slots = slots
        self.running = 0
        self.begun: list[str] = []
        self.ended: list[LocalCall] = []
        self.broken = False

    def begin(self, tool: str) -> None:
        if self.running >= self.slots:
            raise LocalCallRefused(f"refused, {self.slots} calls are running")
        self.running += 1
        self.begun.append(tool)

    def end(self, call: LocalCall) -> None:
        self.running -= 1
        if self.broken:
            raise OSError("disk full")
        self.ended.append(call)


def shop(audit: Recorder) -> ScriptedTool:
    st = ScriptedTool("shop", audit=audit)
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    st.add_tool("lookup", "a sync lookup", lambda p, s: f"sku-{p['id']}\n", schema=schema)

    async def later(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep(0)
        return (stdin or "").upper()

    st.add_tool("later", "an async one", later)
    return st


async def test_every_local_call_is_recorded_with_its_bytes_digest_and_outcome() -> None:
    audit = Recorder()
    st = shop(audit)
    result = await st.execute('lookup --id 7 | later; lookup --id x; echo "s=$?"')
    assert result.stdout == "SKU-7\ns=2\n"
    assert audit.begun == ["lookup", "later", "lookup"] and audit.running == 0
    ended = {(c.tool, c.outcome) for c in audit.ended}
    assert ended == {("lookup", "exit 0"), ("later", "exit 0"), ("lookup", "exit 2")}
    first = next(c for c in audit.ended if c.outcome == "exit 0" and c.tool == "lookup")
    assert first == local_call("lookup", {"id": 7}, None, "sku-7\n", "", 0)
    assert (first.bytes_in, first.bytes_out) == (len('{"id":7}'), len("sku-7\n"))
    assert local_call("lookup", {"id": 8}, None, "sku-8\n", "", 0).digest != first.digest


async def test_a_refused_call_does_not_run_and_is_traced() -> None:
    audit = Recorder(slots=0)
    ran: list[str] = []
    st = ScriptedTool("shop", audit=audit)
    st.add_tool("touch", "records that it ran", lambda p, s: ran.append("x") or "ran\n")
    result = await st.execute('touch; echo "s=$?"')
    assert result.stdout == "s=1\n" and ran == [] and audit.ended == []
    assert result.stderr == "touch: refused, 0 calls are running\n"
    trace = st.take_last_execution_trace()
    assert trace is not None and [e.exit_code for e in trace.invocations] == [1]


async def test_a_call_whose_record_fails_fails() -> None:
    audit = Recorder()
    audit.broken = True
    result = await shop(audit).execute('lookup --id 1; echo "s=$?"')
    assert result.stdout == "s=1\n"
    assert result.stderr == "lookup: audit failed: disk full\n"


async def test_a_cancelled_call_is_recorded_as_cancelled() -> None:
    audit = Recorder()
    st = ScriptedTool("shop", audit=audit)

    async def forever(params: dict[str, Any], stdin: str | None) -> str:
        await trio.sleep_forever()
        return ""

    st.add_tool("forever", "never ends", forever)
    with trio.move_on_after(0.2):
        await st.execute("forever")
    assert [(c.tool, c.outcome) for c in audit.ended] == [("forever", "cancelled")]
    assert audit.running == 0


async def test_a_ledger_operation_is_not_counted_twice() -> None:
    audit = Recorder()
    st = ScriptedTool("shop", audit=audit)

    async def external(params: dict[str, Any], stdin: str | None) -> str:
        return "done\n"

    setattr(external, LEDGER_AUDITED, True)
    st.add_tool("external", "a ledger operation of its own", external)
    assert (await st.execute("external")).stdout == "done\n"
    assert audit.begun == [] and audit.ended == []


def test_without_an_audit_nothing_changes() -> None:
    st = ScriptedTool("shop")
    st.add_tool("lookup", "a sync lookup", lambda p, s: "x\n")
    assert st.audit is None and st.execute_sync("lookup").stdout == "x\n"


@pytest.mark.parametrize("code", [None, 0, 3])
def test_the_outcome_names_the_exit_status_or_the_cancel(code: int | None) -> None:
    call = local_call("t", {}, "in", "out", "err", code)
    assert call.outcome == ("cancelled" if code is None else f"exit {code}")
    assert (call.bytes_in, call.bytes_out) == (len("{}") + 2, 6)


async def test_a_script_in_a_child_process_is_audited_in_the_host() -> None:
    from supervisor.scripted.isolation import ScriptPool

    pool = ScriptPool(size=1, max_children=2, slack=0.3)
    try:
        audit = Recorder()
        st = shop(audit)
        st.isolation = pool
        result = await st.execute("lookup --id 3 | later")
        assert result.stdout == "SKU-3\n", result.stderr
        assert sorted(c.tool for c in audit.ended) == ["later", "lookup"]
    finally:
        pool.close()
