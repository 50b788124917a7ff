"""``sandvisor script``: run one bash script through a `ScriptedTool` from the shell.

The tools are the host's (``--scripted MODULE:ATTR``), the built-in example's
(``--example``), and, with ``--adapters``, every sandboxed tool those adapters serve, as
commands of the same script. The script comes from ``-c TEXT``, a file, or stdin (``-``).
stdout and stderr are the script's; the exit status is the script's own (``--json``
prints the whole result as one JSON object instead, and exits 0 if it ran).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from supervisor.commands.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_SANDBOX,
    EXIT_OK,
    EXIT_USAGE,
    add_scripted_options,
    add_supervisor_options,
    fail,
    has_sandboxed_tools,
    load_scripted,
    supervisor_kwargs,
)
from supervisor.commands.scripted_bridge import add_sandboxed_tools
from supervisor.scripted import ScriptedTool
from supervisor.workers.config_file import ConfigError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a bash script whose commands are a ScriptedTool's tools (local ones, and "
        "sandboxed ones with --adapters); the exit status is the script's."
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("-c", dest="text", metavar="SCRIPT", help="the script itself")
    source.add_argument("file", nargs="?", help="a file holding the script, or - for stdin")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="abort the whole script after SECONDS (exit 124)")  # fmt: skip
    parser.add_argument("--json", action="store_true",
                        help="print the result (stdout, stderr, exit_code...) as JSON")  # fmt: skip
    add_scripted_options(parser)
    add_supervisor_options(parser, adapters_required=False)
    parser.epilog = (
        "Exit status: the script's own; 2 bad usage; 125 this machine cannot sandbox; "
        "failures of sandvisor itself print one 'sandvisor script:' line on stderr."
    )


def scripted_for_cli(args: argparse.Namespace) -> ScriptedTool:
    """The `ScriptedTool` named by ``--scripted``/``--example`` (else an empty one);
    ``--example`` also selects the example adapters unless ``--adapters`` is given."""
    if args.scripted and args.example:
        raise ValueError("give --scripted or --example, not both")
    if args.example:
        from supervisor.commands.demo import EXAMPLE_ADAPTERS, example_scripted

        if not args.adapters:
            args.adapters = list(EXAMPLE_ADAPTERS)
        return example_scripted(args.name or "shop")  # type: ignore[no-any-return]
    if args.scripted:
        scripted: ScriptedTool = load_scripted(args.scripted)
        return scripted
    if not has_sandboxed_tools(args):
        raise ValueError("no tools: give --scripted MODULE:ATTR, --example, --adapters or --config")
    return ScriptedTool(args.name or "tools")


def with_sandboxed_tools(
    command: str,
    scripted: ScriptedTool,
    args: argparse.Namespace,
    body: Callable[[ScriptedTool], Awaitable[int] | None],
    *,
    workers: int | None = None,
) -> int:
    """Run ``body(scripted)`` (sync or async) under trio, with a `Supervisor` for
    ``--adapters`` whose tools were added to ``scripted``; failures as one line."""
    from sandbox.errors import SandboxUnavailable
    from supervisor.workers.supervisor import Supervisor

    async def main() -> int:
        if not has_sandboxed_tools(args):
            return await _finish(body(scripted))
        kwargs = supervisor_kwargs(args)
        if workers is not None:
            kwargs["pool_min"] = workers
        async with Supervisor(**kwargs) as sup:
            add_sandboxed_tools(scripted, sup.tools, sup.tool_callback, specs=sup.specs)
            return await _finish(body(scripted))

    try:
        return trio.run(main)
    except KeyboardInterrupt:
        return fail(command, "interrupted", EXIT_INTERRUPTED)
    except SandboxUnavailable as exc:
        return fail(command, f"{exc} (run `sandvisor doctor`)", EXIT_NO_SANDBOX)
    except ConfigError as exc:
        return fail(command, str(exc), EXIT_USAGE)
    except (ValueError, OSError) as exc:
        return fail(command, str(exc), EXIT_FAILED)
    except Exception as exc:
        return fail(command, f"{type(exc).__name__}: {exc}", EXIT_FAILED)


async def _finish(value: Awaitable[int] | None) -> int:
    if value is None:
        return EXIT_OK
    return await value


def _read_script(args: argparse.Namespace) -> str:
    if args.text is not None:
        return str(args.text)
    if args.file is None:
        raise ValueError("no script: give -c SCRIPT, a file, or - for stdin")
    if args.file == "-":
        return sys.stdin.read()
    try:
        with open(args.file, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise ValueError(f"cannot read {args.file}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    try:
        script = _read_script(args)
        scripted = scripted_for_cli(args)
    except ValueError as exc:
        return fail("script", str(exc), EXIT_USAGE)
    request: dict[str, Any] = {"commands": script}
    if args.timeout is not None:
        if not args.timeout > 0:
            return fail("script", "--timeout must be positive", EXIT_USAGE)
        request["timeout_ms"] = round(args.timeout * 1000)

    async def execute(tool: ScriptedTool) -> int:
        result = await tool.execute_request(request)
        if args.json:
            json.dump(result.to_dict(), sys.stdout, ensure_ascii=False)
            sys.stdout.write("\n")
            return EXIT_OK
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.exit_code

    return with_sandboxed_tools("script", scripted, args, execute)
