"""``sandvisor doctor [--json] [--no-smoke] [-- COMMAND [ARGS...]]``: what this machine can
sandbox (`sandbox.cli_doctor`), and, given an MCP server's command, whether the runtime it
needs can be bound in a sandbox.

For the server, one check per thing, each with its fix: the program resolves to an
executable (``npx``/``uvx`` refused: they download at start); each tree its runtime needs
(`supervisor.workers.mcp_worker.server_runtime`: node's or python's prefix, a virtual
environment, the package's ``node_modules``) can be bound and read by the sandbox's uid
(`sandbox.binds.check`, what a launch checks); the program and the files among its
arguments are readable (and the program executable) by that uid; and, unless
``--no-smoke``, the server starts in its sandbox and lists its tools (what
``sandvisor mcp --server --check`` does).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence

from sandbox.cli_doctor import admin, asks_admin
from sandbox.cli_doctor import configure as configure_machine
from sandbox.cli_doctor import report as print_report
from sandbox.gate import Check
from sandbox.probe import ProbeReport, probe

NEEDED_FOR = "the MCP server"
CHECK_HINT = "sandvisor mcp --server --check -- COMMAND shows what is bound for it"


def configure(parser: argparse.ArgumentParser) -> None:
    configure_machine(parser)
    parser.add_argument(
        "mcp_server",
        nargs="*",
        metavar="-- COMMAND ARGS",
        help="an MCP server's command: check that the runtime it needs can be bound",
    )


def run(args: argparse.Namespace) -> int:
    if asks_admin(args):  # --delegate USER, --sweep: no checks
        if args.mcp_server:
            print(
                "sandvisor doctor: -- COMMAND goes without --delegate and --sweep", file=sys.stderr
            )
            return 2
        return admin(args)
    found = probe(smoke=not args.no_smoke)
    if args.mcp_server:
        start = not args.no_smoke and found.ok
        found = ProbeReport((*found.checks, *mcp_checks(args.mcp_server, start=start)))
    return print_report(found, as_json=args.json)


def mcp_checks(server: Sequence[str], *, start: bool, start_timeout: float = 30.0) -> list[Check]:
    """The checks of one MCP server's command (see the module)."""
    from sandbox.binds import check as check_bind
    from sandbox.binds import permits
    from sandbox.errors import SandboxError
    from sandbox.launch import allocate_uid
    from sandbox.policy import SandboxPolicy
    from supervisor.workers.mcp_worker import McpServerError, server_runtime

    try:
        argv, binds = server_runtime(server)
    except McpServerError as exc:
        fix = "install the server and give its entry point (docs/mcp-servers.md)"
        return [Check("mcp server program", "missing", str(exc), fix, NEEDED_FOR)]
    checks = [Check("mcp server program", "ok", argv[0], needed_for=NEEDED_FOR)]
    uid = allocate_uid(SandboxPolicy())[0]  # root's fresh uid, or a rootless host's own
    for bind in binds:
        name = "mcp runtime"
        try:
            os.close(check_bind(bind, uid)[0])
        except SandboxError as exc:
            who = _whose_bits(bind.source, uid)
            fix = f"chmod -R {who}+rX {bind.source}"
            if who == "o":
                fix += ", or install the runtime where others can read"
            checks.append(Check(name, "missing", str(exc), fix, NEEDED_FOR))
        else:
            detail = f"{bind.source} (readable by the sandbox, bound read-only)"
            checks.append(Check(name, "ok", detail, needed_for=NEEDED_FOR))
    files = [argv[0], *(a for a in argv[1:] if a.startswith("/") and os.path.isfile(a))]
    for index, path in enumerate(files):
        st = os.stat(path)
        usable = permits(st, uid) and (index > 0 or _executable_by(st, uid))
        if not usable:
            what = "readable and executable" if index == 0 else "readable"
            detail = f"{path} is not {what} by the sandbox (host uid {uid})"
            fix = f"chmod {_whose_bits(path, uid)}+r{'x' if index == 0 else ''} {path}"
            checks.append(Check("mcp server file", "missing", detail, fix, NEEDED_FOR))
    if start:
        checks.append(_start_check(server, start_timeout))
    return checks


def _whose_bits(path: str, uid: int) -> str:
    """Which of the mode's classes applies to the sandbox's ``uid`` (``chmod``'s letter):
    the owner's for a rootless host's own files, else the group's or the others'."""
    from sandbox.binds import groups_of

    try:
        st = os.stat(path)
    except OSError:
        return "o"
    if st.st_uid == uid:
        return "u"
    return "g" if st.st_gid in groups_of(uid) else "o"


def _executable_by(st: os.stat_result, uid: int) -> bool:
    from sandbox.binds import groups_of

    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in groups_of(uid):
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def _start_check(server: Sequence[str], start_timeout: float) -> Check:
    """The server started in a sandbox of the default policy, listing its tools."""
    import trio

    from supervisor.workers.supervisor import Supervisor

    async def describe() -> int:
        sup = Supervisor(
            mcp_server=list(server), pool_min=0, ping_interval=None, start_timeout=start_timeout
        )
        async with sup:
            return len(sup.specs)

    try:
        count = trio.run(describe)
    except Exception as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        return Check("mcp server start", "missing", detail, CHECK_HINT, NEEDED_FOR)
    return Check(
        "mcp server start",
        "ok",
        f"answers initialize and tools/list in a sandbox ({count} tools)",
        needed_for=NEEDED_FOR,
    )
