"""External tools in scripts: a sandboxed tool as a `ScriptedTool` command, with every
outcome mapped to its documented exit status and one-line message."""

from __future__ import annotations

import pytest
import trio
from sv_support import supervisor

from supervisor.scripted import ScriptedTool
from supervisor.workers.outcome import Outcome
from supervisor.workers.tool_callbacks import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_INDETERMINATE,
    EXIT_TIMED_OUT,
    default_decoder,
    failure_of,
)


async def test_outcomes_become_exit_statuses_in_a_script() -> None:
    # a generous grace: at the default 15 ms a loaded machine turns nap's acknowledged
    # deadline into a kill (125, not 124), as it did test_deadlines' cooperative one
    async with supervisor(cancel_grace=2.0) as sup:
        st = ScriptedTool("ext")
        st.add_tool("echo_tool", "echo stdin", sup.tool_callback("echo"))
        st.add_tool("refuse", "always fails", sup.tool_callback("fail"))
        st.add_tool("nap", "cooperative sleep", sup.tool_callback("sleep", deadline=0.2))
        st.add_tool("wedge", "ignores cancel", sup.tool_callback("hang", deadline=0.2))
        script = (
            "echo hello | echo_tool\n"
            'echo "no such order" | refuse; echo "refuse=$?"\n'
            'echo 30 | nap; echo "nap=$?"\n'
            'echo x | wedge; echo "wedge=$?"\n'
        )
        result = await st.execute(script)
        assert result.stdout == "hello\nrefuse=1\nnap=124\nwedge=125\n"
        assert result.stderr.splitlines() == [
            "refuse: no such order",
            "nap: timed out (deadline 0.2 s)",
            "wedge: outcome unknown (deadline); the effect may or may not have happened",
        ]
        assert result.exit_code == 0


async def test_json_tools_take_flags_as_parameters() -> None:
    async with supervisor() as sup:
        st = ScriptedTool("ext")
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        st.add_tool("jecho", "json echo", sup.tool_callback("json.echo"), schema=schema)
        result = await st.execute("echo piped | jecho --n 3")
        assert result.stdout == '{"n":3,"stdin":"piped\\n"}\n' and result.exit_code == 0


async def test_text_tools_refuse_flags() -> None:
    async with supervisor() as sup:
        st = ScriptedTool("ext")
        st.add_tool("echo_tool", "echo stdin", sup.tool_callback("echo"))
        result = await st.execute("echo_tool --loud yes")
        assert result.exit_code == 2 and "takes its input on stdin" in result.stderr


async def test_from_another_thread_and_event_loop() -> None:
    # execute_sync keeps an asyncio runner (and its fds) per thread: not ours to check;
    # a generous grace for nap's acknowledged deadline (see the test above)
    async with supervisor(check_fds=False, cancel_grace=2.0) as sup:
        st = ScriptedTool("ext")
        st.add_tool("echo_tool", "echo stdin", sup.tool_callback("echo"))
        st.add_tool("nap", "sleep", sup.tool_callback("sleep", deadline=0.2))

        def run_sync() -> tuple[str, str, int]:
            r = st.execute_sync('echo hi | echo_tool; echo 9 | nap; echo "nap=$?"')
            return r.stdout, r.stderr, r.exit_code

        stdout, stderr, code = await trio.to_thread.run_sync(run_sync)
        assert stdout == "hi\nnap=124\n" and "nap: timed out" in stderr and code == 0


async def test_a_script_timeout_cancels_the_external_call() -> None:
    async with supervisor() as sup:
        st = ScriptedTool("ext", timeout_seconds=0.3)
        st.add_tool("nap", "sleep", sup.tool_callback("sleep"))
        result = await st.execute("echo 30 | nap")
        assert result.exit_code != 0
        with trio.fail_after(5):
            while sup.ledger.pending_count:
                await trio.sleep(0.02)
        last = [e for e in sup.ledger.audit() if e.kind == "cancelled"]
        assert last, "the external call was cancelled cooperatively"


async def test_unknown_tools_are_refused_at_once() -> None:
    async with supervisor() as sup:
        with pytest.raises(ValueError, match="has no tool"):
            sup.tool_callback("nope")


@pytest.mark.parametrize(
    ("status", "code", "text"),
    [
        ("failed", EXIT_FAILED, "t: boom"),
        ("timed_out", EXIT_TIMED_OUT, "t: timed out (deadline 1.5 s)"),
        ("cancelled", EXIT_CANCELLED, "t: cancelled"),
        ("indeterminate", EXIT_INDETERMINATE, "t: outcome unknown (eof); the effect"),
    ],
)
def test_failure_table(status: str, code: int, text: str) -> None:
    out = Outcome(status=status, tool="t", error="boom\nsecond line", kill_reason="eof")  # type: ignore[arg-type]
    failure = failure_of("t", out, 1.5)
    assert failure.exit_code == code and failure.message.startswith(text)
    assert failure.message.endswith("\n") and failure.message.count("\n") == 1
    assert default_decoder({"a": [1]}) == '{"a":[1]}\n' and default_decoder("x") == "x"
