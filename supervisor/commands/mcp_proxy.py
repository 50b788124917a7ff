"""``sandvisor mcp --server [options] -- COMMAND [ARGS...]``: one stdio MCP server, run in
a sandbox, served over MCP stdio as itself: a drop-in for an MCP client's configuration.

The client sees exactly the server's tools, by their own names, descriptions and input
schemas. Each call is a `Supervisor.invoke` with sandvisor's outcome rules: the
``--deadline`` (a watchdog, then MCP's ``notifications/cancelled``, then the kill), the
client's own ``notifications/cancelled`` (a cooperative cancel), progress from the server
forwarded to the client as ``notifications/progress``, an input that breaks the tool's
schema refused before it reaches the server, a server that breaks the protocol replaced.
What is not ``completed`` comes back as an ``isError`` result whose text says what
happened (timed out, cancelled, outcome unknown). A ``tools/list_changed`` from the server
makes the supervisor list its tools again; when they changed, the client gets
``notifications/tools/list_changed`` and its next ``tools/list`` the new tools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from typing import Any

import trio

from sandbox.cli_exec import network_from
from sandbox.policy import Bind, SandboxPolicy
from supervisor.workers.outcome import Outcome
from supervisor.workers.supervisor import Supervisor
from supervisor.workers.tool_callbacks import failure_of
from worker_runtime.protocol.messages import ToolSpec

SERVER_NAME = "sandvisor"


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``--server`` mode (the pool, memory, pids, network (``--network``,
    ``--allow-net``...), cancel grace and deadline options are the command's own)."""
    group = parser.add_argument_group("--server: one MCP server in a sandbox")
    add = group.add_argument
    add("--server", action="store_true",
        help="serve the MCP server that COMMAND starts (after --), sandboxed")  # fmt: skip
    add("--bind-ro", action="append", default=[], metavar="DIR[:DEST]",
        help="a host directory the server may read (repeatable)")  # fmt: skip
    add("--bind", action="append", default=[], metavar="DIR[:DEST]",
        help="a host directory the server may read and write (repeatable)")  # fmt: skip
    add("--start-timeout", type=float, default=30.0, metavar="SECONDS",
        help="time to answer initialize and tools/list (default 30)")  # fmt: skip
    add("--check", action="store_true",
        help="start the server in its sandbox, show what it binds and serves, exit")  # fmt: skip
    add("server_command", nargs="*", metavar="-- COMMAND ARGS", help=argparse.SUPPRESS)


def check_args(args: argparse.Namespace) -> str | None:
    """Why these arguments cannot run, or None."""
    if not args.server:
        if args.server_command or args.bind or args.bind_ro:
            return "COMMAND, --bind and --bind-ro go with --server"
        return None
    if not args.server_command:
        return "--server needs the server's command after --, e.g. -- node server.js"
    if args.adapters or args.scripted or args.example:
        return "--server serves one MCP server; it takes no --adapters, --scripted or --example"
    if not 0 < args.start_timeout < math.inf:
        return "--start-timeout must be a positive number of seconds"
    return None


def supervisor_for(args: argparse.Namespace) -> Supervisor:
    """The `Supervisor` of the server, from the command's options."""
    binds = tuple(Bind.parse(spec, writable=False) for spec in args.bind_ro) + tuple(
        Bind.parse(spec, writable=True) for spec in args.bind
    )
    network = network_from(args)  # sandvisor exec's parsing and errors
    policy = SandboxPolicy(network=network, memory_bytes=args.memory, pids=args.pids, binds=binds)
    kwargs: dict[str, Any] = {
        "mcp_server": list(args.server_command),
        "policy": policy,
        "pool_size": args.pool_size,
        "pool_min": 1,
        "max_in_flight": args.max_in_flight,
        "start_timeout": args.start_timeout,
    }
    if args.cancel_grace is not None:
        kwargs["cancel_grace"] = args.cancel_grace
    if args.audit_log:
        kwargs["audit_log"] = args.audit_log
    return Supervisor(**kwargs)


def listed_name(spec: ToolSpec) -> str:
    """The name the client knows the tool by: the server's own."""
    return spec.alias or spec.name


def call_result(outcome: Outcome, deadline: float | None) -> Any:
    """An `Outcome` as the MCP ``CallToolResult`` the server's own answer was."""
    import mcp.types as types

    value = outcome.value
    if outcome.status != "completed":
        text = failure_of(listed_name(ToolSpec(outcome.tool, "json")), outcome, deadline)
        body: dict[str, Any] = {"content": [_text(text.message.strip())], "isError": True}
    elif isinstance(value, dict) and set(value) == {"text"} and isinstance(value["text"], str):
        body = {"content": [_text(value["text"])]}
    elif (
        isinstance(value, dict) and set(value) == {"content"} and isinstance(value["content"], list)
    ):
        body = {"content": value["content"]}
    else:
        body = {"content": [_text(json.dumps(value, ensure_ascii=False))],
                "structuredContent": value}  # fmt: skip
    return types.CallToolResult.model_validate(body)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def error_result(message: str) -> Any:
    import mcp.types as types

    return types.CallToolResult.model_validate({"content": [_text(message)], "isError": True})


class ServedTools:
    """The sandboxed server's tools under their own names."""

    def __init__(self, sup: Supervisor, deadline: float | None) -> None:
        self.sup = sup
        self.deadline = deadline

    @property
    def by_name(self) -> dict[str, ToolSpec]:
        """Read each time: the supervisor's view changes when the server's tools do."""
        return {listed_name(spec): spec for spec in self.sup.specs.values()}

    def list(self) -> list[Any]:
        import mcp.types as types

        return [
            types.Tool(
                name=name,
                description=spec.description or None,
                input_schema=spec.schema or {"type": "object"},
            )
            for name, spec in self.by_name.items()
        ]

    async def call(self, name: str, arguments: dict[str, Any], report: Any) -> Any:
        from supervisor.ledger import LedgerError
        from supervisor.workers.supervisor import SupervisorError

        spec = self.by_name.get(name)
        if spec is None:
            from mcp.shared.exceptions import MCPError
            from mcp.types import INVALID_PARAMS

            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}")
        send, receive = trio.open_memory_channel[str](math.inf)  # bounded by the grant

        async def forward() -> None:
            count = 0
            async for text in receive:
                count += 1
                await report(*_progress(text, count))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(forward)
            try:
                outcome = await self.sup.invoke(
                    spec.name, arguments, deadline=self.deadline, on_chunk=send.send_nowait
                )
            except (LedgerError, SupervisorError, ValueError) as exc:
                return error_result(f"{name}: {exc}")
            finally:
                send.close()
        return call_result(outcome, self.deadline)


def _progress(text: str, count: int) -> tuple[float, float | None, str | None]:
    """A chunk back into the server's progress (the bridge sends its fields as JSON;
    a chunk the redactor changed is passed on as the message)."""
    try:
        fields = json.loads(text)
        progress = float(fields["progress"])
        total = fields.get("total")
        message = fields.get("message")
        return progress, None if total is None else float(total), message
    except (ValueError, TypeError, KeyError):
        return float(count), None, text


class ClientLink:
    """The client's session, once it made a request (the SDK's low-level server shows it
    to handlers only), for the notifications the proxy sends on its own."""

    def __init__(self) -> None:
        self.session: Any = None

    async def tools_changed(self) -> None:
        """``notifications/tools/list_changed`` to a client that has listed the tools (one
        that has not will see the new list when it does)."""
        if self.session is not None:
            await self.session.send_tool_list_changed()


def build_server(
    tools: ServedTools, *, version: str, instructions: str | None, link: ClientLink | None = None
) -> Any:
    import mcp.types as types
    from mcp.server.lowlevel import Server

    link = link or ClientLink()

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        link.session = ctx.session
        return types.ListToolsResult(tools=tools.list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        link.session = ctx.session

        async def report(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        result: types.CallToolResult = await tools.call(
            params.name, dict(params.arguments or {}), report
        )
        return result

    return Server(
        SERVER_NAME,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def load_sdk() -> None:
    """The MCP SDK's server side: its import is slower than most servers' whole start
    (0.4-1 s of CPU here), so it runs in a thread while the server starts in its sandbox
    (which is waiting, mostly), not before."""
    import mcp.server.lowlevel
    import mcp.server.stdio
    import mcp.types  # noqa: F401


async def serve_server_stdio(args: argparse.Namespace) -> None:
    """Serve until the client closes stdin, or SIGTERM/SIGINT (calls are cancelled
    cooperatively and the sandboxes closed)."""
    from supervisor.commands.stdio import LineReader, TextWriter, protocol_fds, stop_on_signals
    from worker_runtime import __version__

    with protocol_fds() as (fd_in, fd_out):
        source = trio.lowlevel.FdStream(fd_in)
        sink = trio.lowlevel.FdStream(fd_out)
        async with source, sink, trio.open_nursery() as nursery:
            nursery.start_soon(stop_on_signals, nursery.cancel_scope.cancel, nursery.cancel_scope)
            loaded = trio.Event()

            async def load() -> None:
                await trio.to_thread.run_sync(load_sdk)
                loaded.set()

            nursery.start_soon(load)
            async with supervisor_for(args) as sup:
                await loaded.wait()
                from mcp.server.lowlevel import NotificationOptions
                from mcp.server.stdio import stdio_server

                link = ClientLink()
                server = build_server(
                    ServedTools(sup, args.deadline),
                    version=__version__,
                    instructions=None,
                    link=link,
                )
                send, receive = trio.open_memory_channel[None](1)

                def on_change() -> None:  # one waiting notice tells of every change so far
                    with contextlib.suppress(trio.WouldBlock):
                        send.send_nowait(None)

                unsubscribe = sup.add_tools_callback(on_change)
                streams = stdio_server(stdin=LineReader(source), stdout=TextWriter(sink))  # type: ignore[arg-type]
                options = server.create_initialization_options(
                    NotificationOptions(tools_changed=True)
                )
                async with streams as (read_stream, write_stream), trio.open_nursery() as inner:
                    inner.start_soon(_forward_changes, receive, link)
                    await server.run(read_stream, write_stream, options)
                    inner.cancel_scope.cancel()
                unsubscribe()
            nursery.cancel_scope.cancel()


async def _forward_changes(changes: trio.MemoryReceiveChannel[None], link: ClientLink) -> None:
    """Each change of the supervisor's tools as one ``tools/list_changed``."""
    async for _ in changes:
        await link.tools_changed()


async def check(args: argparse.Namespace) -> None:
    """``--check``: what the sandbox binds for the server, and the tools it serves."""
    import sys

    from supervisor.workers.mcp_worker import server_runtime

    argv, binds = server_runtime(args.server_command)
    out = sys.stdout
    out.write(f"server: {' '.join(argv)}\n")
    for bind in binds:
        out.write(f"bound read-only: {bind.source}\n")
    async with supervisor_for(args) as sup:
        for spec in sup.specs.values():
            out.write(f"tool: {listed_name(spec)} ({spec.name})\n")
    out.write("ok: the server starts in its sandbox and answers initialize and tools/list\n")


def run(args: argparse.Namespace) -> int:
    from sandbox.errors import PolicyError, SandboxUnavailable
    from supervisor.commands.common import EXIT_FAILED, EXIT_NO_SANDBOX, EXIT_OK, EXIT_USAGE, fail
    from supervisor.workers.grants import DescribeError

    problem = check_args(args)
    if problem is not None:
        return fail("mcp", problem, EXIT_USAGE)
    try:
        trio.run(check if args.check else serve_server_stdio, args)
    except KeyboardInterrupt:
        return EXIT_FAILED
    except SandboxUnavailable as exc:
        return fail("mcp", f"{exc} (run `sandvisor doctor`)", EXIT_NO_SANDBOX)
    except DescribeError as exc:
        return fail("mcp", str(exc), EXIT_FAILED)
    except (PolicyError, ValueError) as exc:
        return fail("mcp", str(exc), EXIT_USAGE)
    except Exception as exc:
        return fail("mcp", f"{type(exc).__name__}: {exc}", EXIT_FAILED)
    return EXIT_OK
