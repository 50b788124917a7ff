"""``sandvisor mcp``: a `ScriptedTool` and sandboxed tools as an MCP server over stdio.

Built on the official ``mcp`` SDK (low-level ``Server``), on trio next to the
`Supervisor`. The tools:

- ``<name>``: the script tool (input ``{"commands", "timeout_ms"}``, the ScriptedTool's
  request schema; result ``stdout``/``stderr``/``exit_code`` as structured content);
- ``<name>_discover``: ``discover``/``help`` over the same tools;
- every sandboxed tool by its own name: a text tool takes ``{"input": "..."}``, a json
  tool takes its JSON object as the arguments.

MCP semantics (spec 2025-06-18): a ``notifications/cancelled`` for a running call cancels
its handler, which the supervisor turns into a cooperative ``cancel`` of the sandboxed
call (grace, then kill); no response is sent for it. When the client sent a
``progressToken``, each chunk a sandboxed tool streams becomes a
``notifications/progress`` (progress 1, 2, 3...; the chunk is the message). Logs go to
stderr; fd 1 carries nothing but MCP.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from typing import TYPE_CHECKING, Any

import trio

from supervisor.ledger import LedgerError, ToolPolicy
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import Supervisor, SupervisorError
from supervisor.workers.tool_callbacks import failure_of
from worker_runtime.protocol.messages import ToolSpec

if TYPE_CHECKING:  # the scripted shell loads when it is served: `--server` never does
    from supervisor.scripted import ScriptedTool
    from supervisor.scripted.contract import ExecResult

log = logging.getLogger(__name__)

SERVER_NAME = "sandvisor"


def _text_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "the tool's text input"}},
        "required": ["input"],
        "additionalProperties": False,
    }


def sandboxed_input_schema(policy: ToolPolicy, spec: ToolSpec | None = None) -> dict[str, Any]:
    """The MCP input schema of a sandboxed tool: its worker's own for a json tool."""
    if policy.format == "text":
        return _text_schema()
    if spec is not None and spec.schema:
        return dict(spec.schema)
    return {"type": "object", "description": "the tool's JSON input (an object)"}


def sandboxed_description(policy: ToolPolicy, spec: ToolSpec | None = None) -> str:
    how = "text in 'input'" if policy.format == "text" else "a JSON object (the arguments)"
    limit = f"; deadline {policy.deadline:g} s" if policy.deadline is not None else ""
    own = spec.description.strip() + "\n\n" if spec is not None and spec.description else ""
    return f"{own}Sandboxed tool {policy.name}: takes {how}{limit}. Runs in an isolated worker."


def script_result(result: ExecResult) -> Any:
    """A script's `ExecResult` as an MCP ``CallToolResult``."""
    import mcp.types as types

    text = result.stdout
    if result.stderr:
        text += ("" if not text or text.endswith("\n") else "\n") + "stderr:\n" + result.stderr
    if result.exit_code != 0:
        text += ("" if not text or text.endswith("\n") else "\n") + f"exit code {result.exit_code}"
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=result.to_dict(),
        is_error=result.exit_code != 0,
    )


def outcome_result(tool: str, outcome: Outcome, deadline: float | None) -> Any:
    """A sandboxed call's `Outcome` as an MCP ``CallToolResult``."""
    import mcp.types as types

    if outcome.status == "completed":
        value = outcome.value
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    else:
        text = failure_of(tool, outcome, deadline).message.strip()
    structured = {
        "status": outcome.status,
        "value": outcome.value,
        "error": outcome.error,
        "error_code": outcome.error_code,
        "kill_reason": outcome.kill_reason,
        "op_id": outcome.op_id,
        "chunks": outcome.chunks,
        "seconds": round(outcome.total_s, 6),
    }
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured,
        is_error=outcome.status != "completed",
    )


def error_result(message: str) -> Any:
    import mcp.types as types

    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


class McpTools:
    """What `sandvisor mcp` serves: the script tool, its discover tool, sandboxed tools."""

    def __init__(
        self, scripted: ScriptedTool, sup: Supervisor | None, *, deadline: float | None = None
    ) -> None:
        from supervisor.scripted.toolset import DiscoverTool, ScriptTool

        scripted.compact_prompt = True
        self.scripted = scripted
        self.sup = sup
        self.deadline = deadline
        self.script = ScriptTool(scripted)
        self.discover = DiscoverTool(scripted)
        self.sandboxed: dict[str, ToolPolicy] = dict(sup.tools) if sup is not None else {}
        self.specs: dict[str, ToolSpec] = dict(sup.specs) if sup is not None else {}
        for name in (self.script.name, self.discover.name):
            if name in self.sandboxed:
                raise ValueError(f"the sandboxed tool {name!r} clashes with the script tools")

    def list(self) -> list[Any]:
        import mcp.types as types

        tools = [
            types.Tool(
                name=tool.name,
                description=tool.system_prompt(),
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
            )
            for tool in (self.script, self.discover)
        ]
        for name in sorted(self.sandboxed):
            policy, spec = self.sandboxed[name], self.specs.get(name)
            tools.append(types.Tool(name=name, description=sandboxed_description(policy, spec),
                                    input_schema=sandboxed_input_schema(policy, spec)))  # fmt: skip
        return tools

    async def call(self, name: str, arguments: dict[str, Any], report: Any) -> Any:
        """Run one tool call; ``report(progress, message)`` sends MCP progress (a no-op
        when the client asked for none)."""
        if name in (self.script.name, self.discover.name):
            tool = self.script if name == self.script.name else self.discover
            try:
                result = await tool.execute(arguments)
            except (TypeError, ValueError) as exc:
                return error_result(f"{name}: {exc}")
            return script_result(result)
        policy = self.sandboxed.get(name)
        if policy is None or self.sup is None:
            from mcp.shared.exceptions import MCPError
            from mcp.types import INVALID_PARAMS

            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}")
        if policy.format == "text":
            value = arguments.get("input")
            if not isinstance(value, str) or set(arguments) - {"input"}:
                return error_result(f'{name}: takes {{"input": "<text>"}}')
        else:
            value = arguments
        return await self._invoke(self.sup, name, value, report)

    async def _invoke(self, sup: Supervisor, name: str, value: Any, report: Any) -> Any:
        send, receive = trio.open_memory_channel[str](math.inf)  # bounded by the grant

        async def forward() -> None:
            count = 0
            async for text in receive:
                count += 1
                await report(count, text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(forward)
            try:
                outcome = await sup.invoke(
                    name, value, deadline=self.deadline, on_chunk=send.send_nowait
                )
            except (LedgerError, SupervisorError, ValueError) as exc:
                return error_result(f"{name}: {exc}")
            finally:
                send.close()
        return outcome_result(name, outcome, self.deadline)


def build_server(tools: McpTools, *, version: str) -> Any:
    """The SDK's low-level ``Server`` serving ``tools``."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def report(progress: int, message: str) -> None:
            await ctx.session.report_progress(float(progress), None, message)

        result: types.CallToolResult = await tools.call(
            params.name, dict(params.arguments or {}), report
        )
        return result

    return Server(
        SERVER_NAME,
        version=version,
        instructions=tools.scripted.system_prompt(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_mcp_stdio(
    scripted: ScriptedTool, supervisor_kwargs: dict[str, Any] | None, deadline: float | None
) -> None:
    """Serve over stdio until the client closes stdin, or SIGTERM/SIGINT (then the
    supervisor cancels its calls cooperatively and closes its workers). stdin and stdout
    are trio streams, so a signal never waits for a blocked read."""
    from supervisor.commands.stdio import protocol_fds, stop_on_signals

    with protocol_fds() as (fd_in, fd_out):
        source = trio.lowlevel.FdStream(fd_in)
        sink = trio.lowlevel.FdStream(fd_out)
        async with source, sink, trio.open_nursery() as nursery:
            stop = nursery.cancel_scope.cancel
            nursery.start_soon(stop_on_signals, stop, nursery.cancel_scope)
            sup = Supervisor(**supervisor_kwargs) if supervisor_kwargs else None
            if sup is None:
                await _serve(scripted, None, deadline, source, sink)
            else:
                async with sup:
                    from supervisor.commands.scripted_bridge import add_sandboxed_tools

                    add_sandboxed_tools(
                        scripted,
                        sup.tools,
                        lambda name: sup.tool_callback(name, deadline=deadline),
                        specs=sup.specs,
                    )
                    await _serve(scripted, sup, deadline, source, sink)
            nursery.cancel_scope.cancel()


async def _serve(
    scripted: ScriptedTool, sup: Supervisor | None, deadline: float | None,
    source: trio.abc.ReceiveStream, sink: trio.abc.SendStream,
) -> None:  # fmt: skip
    from mcp.server.stdio import stdio_server

    from supervisor.commands.jsonrpc_guard import checked_lines
    from supervisor.commands.stdio import LineReader, TextWriter
    from worker_runtime import __version__

    server = build_server(McpTools(scripted, sup, deadline=deadline), version=__version__)
    writer = TextWriter(sink)

    async def answer(line: str) -> None:
        await writer.write(line + "\n")
        await writer.flush()

    lines = checked_lines(LineReader(source), answer)
    streams = stdio_server(stdin=lines, stdout=writer)  # type: ignore[arg-type]
    async with streams as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- the command --------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    from supervisor.commands.common import add_scripted_options, add_supervisor_options

    parser.description = (
        "Serve a ScriptedTool (the script tool and its discover tool) and sandboxed tools "
        "as an MCP server on stdio. MCP cancellation cancels cooperatively; progress "
        "notifications carry the chunks sandboxed tools stream."
    )
    parser.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                        help="deadline of each sandboxed call (default: the tool's)")  # fmt: skip
    add_scripted_options(parser)
    add_supervisor_options(parser, adapters_required=False)
    from supervisor.commands.mcp_proxy import add_server_options

    add_server_options(parser)
    parser.epilog = (
        "Exit status: 0 when the client closed the connection, 1 failed, 2 bad usage, "
        "125 cannot sandbox. Logs go to stderr."
    )


def run(args: argparse.Namespace) -> int:
    from supervisor.commands.common import (
        EXIT_FAILED,
        EXIT_NO_SANDBOX,
        EXIT_OK,
        EXIT_USAGE,
        fail,
        has_sandboxed_tools,
        supervisor_kwargs,
        unavailable_in,
    )
    from supervisor.commands.script import scripted_for_cli
    from supervisor.workers.config_file import ConfigError

    if args.deadline is not None and not 0 < args.deadline < math.inf:
        return fail("mcp", "--deadline must be a positive number of seconds", EXIT_USAGE)
    if args.server or args.server_command or args.bind or args.bind_ro:
        from supervisor.commands import mcp_proxy  # the --server mode: a module of its own

        return mcp_proxy.run(args)
    try:
        scripted = scripted_for_cli(args)
    except ValueError as exc:
        return fail("mcp", str(exc), EXIT_USAGE)
    from supervisor.commands.script_cgroup import service_script_pool

    scripted.isolation = service_script_pool()  # scripts in child processes (and cgroups)
    try:
        import mcp  # noqa: F401
    except ImportError:
        return fail("mcp", "the mcp package is missing: pip install 'sandvisor[mcp]'")
    try:
        kwargs = supervisor_kwargs(args) if has_sandboxed_tools(args) else None
    except ConfigError as exc:
        return fail("mcp", str(exc), EXIT_USAGE)
    try:
        trio.run(serve_mcp_stdio, scripted, kwargs, args.deadline)
    except KeyboardInterrupt:  # only before the signal handler is installed
        return EXIT_FAILED
    except Exception as exc:  # the server's task group wraps what its start raised
        if (unavailable := unavailable_in(exc)) is not None:
            return fail("mcp", f"{unavailable} (run `sandvisor doctor`)", EXIT_NO_SANDBOX)
        return fail("mcp", f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    return EXIT_OK
