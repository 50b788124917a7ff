"""The `sandvisor` command: a thin dispatcher to subcommands that live beside their code.

Each subcommand is a module exposing ``configure(parser)`` and ``run(args) -> int``.
Only the chosen subcommand's module is imported, so `sandvisor exec` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol, cast

#: name -> (module, one-line help). Order is the order shown by `sandvisor --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": (
        "supervisor.commands.doctor",
        "check what this machine can sandbox (and an MCP server's runtime), and how to fix it",
    ),
    "exec": ("sandbox.cli_exec", "run one program in the default sandbox policy"),
    "demo": ("supervisor.commands.demo", "show the whole product on this machine in a few seconds"),
    "script": ("supervisor.commands.script", "run a bash script over tools, sandboxed ones too"),
    "tools": (
        "supervisor.commands.tooldefs",
        "print tool definitions for OpenAI, Anthropic or MCP",
    ),
    "serve": ("supervisor.commands.serve", "serve sandboxed tools as JSON lines (any language)"),
    "mcp": (
        "supervisor.commands.mcp_server",
        "serve scripted and sandboxed tools over MCP (stdio)",
    ),
}


class _Subcommand(Protocol):
    def configure(self, parser: argparse.ArgumentParser) -> None: ...
    def run(self, args: argparse.Namespace) -> int: ...


def _load(name: str) -> _Subcommand:
    return cast(_Subcommand, importlib.import_module(COMMANDS[name][0]))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser; with ``only``, just that subcommand is configured (fast path)."""
    parser = argparse.ArgumentParser(
        prog="sandvisor",
        description="Safe, bounded, cancellable tool calls for LLM agents.",
        epilog=(
            "Run `sandvisor COMMAND --help` for the options and exit statuses of one command.\n"
            "Common exit statuses: 0 done, 1 failed (one line on stderr says why), 2 bad usage,\n"
            "125 this machine cannot sandbox (see `sandvisor doctor`), 130 interrupted.\n"
            "`exec` exits with the program's own status, 124 on its wall timeout, 128+N when\n"
            "signal N killed it. Details: docs/cli.md."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            _load(name).configure(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    only = chosen if chosen in COMMANDS else None
    parser = build_parser(only=only if only else "")
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return 2
    return _load(args.command).run(args)


if __name__ == "__main__":
    raise SystemExit(main())
