"""``sandvisor exec [options] -- PROGRAM ARGS...``: one program in the default sandbox.

Its stdout and stderr pass through (up to the byte caps; the rest is dropped and counted),
and ``sandvisor exec`` exits with the program's status: 124 when the wall timeout killed
it, 128+N when signal N did (137 for the memory limit's kill), 125 when the sandbox
itself could not start (the reason is printed; `sandvisor doctor` says how to fix it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import SandboxError
from .policy import Bind, SandboxPolicy
from .runner import RunResult
from .runner import run as run_sandbox
from .termination import EXIT_SANDBOX_FAILURE

if TYPE_CHECKING:  # imported when a run has an allowlist: exec's start-up stays as it was
    from .netproxy.events import NetEvent
    from .netproxy.policy import NetworkAllowlist

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(i?B)?\Z", re.IGNORECASE)
_NONE = ("none", "unlimited", "off")


def parse_size(text: str) -> int | None:
    """``512M``, ``1G``, ``65536`` (bytes) or ``none``."""
    if text.strip().lower() in _NONE:
        return None
    match = _SIZE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 512M, 1G or none")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def _count(text: str) -> int | None:
    if text.strip().lower() in _NONE:
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or none") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _required_size(text: str) -> int:
    value = parse_size(text)
    if value is None:
        raise argparse.ArgumentTypeError("this size cannot be none")
    return value


def add_network_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, network_help: str, per: str
) -> None:
    """``--network`` or ``--allow-net HOST[:PORT]`` (repeatable), with ``--net-host``,
    ``--net-max-bytes`` and ``--net-max-connections`` (``per``: what the caps count
    for). One parser for `sandvisor exec`, `script`, `serve` and `mcp`: the same
    errors; `network_from` reads them."""
    net = parser.add_mutually_exclusive_group()
    net.add_argument("--network", action="store_true", help=network_help)
    net.add_argument(
        "--allow-net",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="reach this host (a name, *.domain, an address, or *; any port unless given) "
        "through the host's proxy, nothing else (repeatable)",
    )
    parser.add_argument(
        "--net-host",
        action="append",
        default=[],
        metavar="NAME=ADDRESS",
        help="with --allow-net: the proxy uses ADDRESS for NAME, without DNS (repeatable)",
    )
    parser.add_argument(
        "--net-max-bytes",
        type=parse_size,
        default=argparse.SUPPRESS,
        metavar="SIZE",
        help=f"with --allow-net: bytes {per} may move through the proxy, or none (64M)",
    )
    parser.add_argument(
        "--net-max-connections",
        type=_count,
        default=argparse.SUPPRESS,
        metavar="N",
        help=f"with --allow-net: connections {per} may open, or none (64)",
    )


def network_from(args: argparse.Namespace) -> bool | NetworkAllowlist:
    """``SandboxPolicy.network`` from `add_network_options`' options. Raises
    `SandboxError` (one line) for an entry that is not ``HOST[:PORT]``."""
    if not args.allow_net:
        if args.net_host or {"net_max_bytes", "net_max_connections"} & vars(args).keys():
            raise SandboxError(
                "--net-host, --net-max-bytes and --net-max-connections need --allow-net"
            )
        return bool(args.network)
    from .netproxy.policy import DEFAULT_MAX_BYTES, DEFAULT_MAX_CONNECTIONS, NetworkAllowlist

    hosts = {}
    for item in args.net_host:
        name, eq, address = item.partition("=")
        if not eq:
            raise SandboxError(f"--net-host {item!r} is not NAME=ADDRESS")
        hosts[name] = address
    return NetworkAllowlist(
        tuple(args.allow_net),
        max_connections=getattr(args, "net_max_connections", DEFAULT_MAX_CONNECTIONS),
        max_bytes=getattr(args, "net_max_bytes", DEFAULT_MAX_BYTES),
        hosts=hosts,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    defaults = SandboxPolicy()
    parser.usage = "sandvisor exec [options] -- PROGRAM [ARGS...]"
    add = parser.add_argument
    add_network_options(parser, "share the host's network (off by default)", "the run")
    add("--ro-bind", action="append", default=[], metavar="SRC[:DEST]", help="read-only bind")
    add("--bind", action="append", default=[], metavar="SRC[:DEST]", help="writable bind")
    add(
        "--memory",
        type=parse_size,
        default=defaults.memory_bytes,
        metavar="SIZE",
        help="memory limit (cgroup), e.g. 512M, or none (default 512M)",
    )
    add(
        "--pids",
        type=_count,
        default=defaults.pids,
        metavar="N",
        help=f"process and thread limit (cgroup), or none (default {defaults.pids})",
    )
    add(
        "--per-process-limits",
        action="store_true",
        help="where no cgroup can be had, accept per-process limits (RLIMIT_AS for memory, "
        "the uid's RLIMIT_NPROC for processes; weaker, and --report says how) instead of "
        "refusing to start",
    )
    add(
        "--cpu",
        type=_count,
        default=None,
        metavar="SECONDS",
        help="CPU time limit per process (RLIMIT_CPU), default none",
    )
    add(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="wall-clock limit; on expiry the sandbox is killed and the status is 124",
    )
    add(
        "--tmpfs-size",
        type=_required_size,
        default=defaults.tmpfs_bytes,
        metavar="SIZE",
        help="size of the private /tmp (default 64M)",
    )
    add("--nofile", type=int, default=defaults.open_files, metavar="N", help="open files limit")
    add(
        "--fsize",
        type=parse_size,
        default=defaults.file_size_bytes,
        metavar="SIZE",
        help="largest file the program may write (RLIMIT_FSIZE), or none",
    )
    add(
        "--address-space",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="address space limit (RLIMIT_AS), default none",
    )
    add("--env", action="append", default=[], metavar="KEY=VALUE", help="set a variable")
    add(
        "--pass-env",
        action="append",
        default=[],
        metavar="KEY",
        help="copy a variable from this environment",
    )
    add(
        "--stdin",
        action="store_true",
        help="give the program this process's stdin (refused for a terminal)",
    )
    add(
        "--stdout-cap",
        type=_required_size,
        default=16 << 20,
        metavar="SIZE",
        help="bytes of stdout passed through (default 16M)",
    )
    add(
        "--stderr-cap",
        type=_required_size,
        default=16 << 20,
        metavar="SIZE",
        help="bytes of stderr passed through (default 16M)",
    )
    add(
        "--report",
        metavar="FILE",
        help="write how the program ended as JSON to FILE ('-' for stderr)",
    )
    # Not "command": the `sandvisor` dispatcher keeps the subcommand's name there.
    add("program", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")


def build_policy(args: argparse.Namespace) -> SandboxPolicy:
    env = dict(SandboxPolicy().env)
    for key in args.pass_env:
        if key not in os.environ:
            raise SandboxError(f"--pass-env {key}: not set in this environment")
        env[key] = os.environ[key]
    for item in args.env:
        key, eq, value = item.partition("=")
        if not eq:
            raise SandboxError(f"--env {item!r} is not KEY=VALUE")
        env[key] = value
    binds = [Bind.parse(s, writable=False) for s in args.ro_bind]
    binds += [Bind.parse(s, writable=True) for s in args.bind]
    network = network_from(args)
    return SandboxPolicy(
        network=network,
        env=env,
        binds=tuple(binds),
        tmpfs_bytes=args.tmpfs_size,
        memory_bytes=args.memory,
        pids=args.pids,
        cpu_seconds=args.cpu,
        open_files=args.nofile,
        file_size_bytes=args.fsize,
        address_space_bytes=args.address_space,
        limits="per-process" if args.per_process_limits else "cgroup",
    )


def _writer(stream: object) -> Callable[[bytes], None]:
    buffer = getattr(stream, "buffer", stream)

    def write(data: bytes) -> None:
        buffer.write(data)  # type: ignore[attr-defined]
        buffer.flush()  # type: ignore[attr-defined]

    return write


def _network_log(events: list[NetEvent]) -> Callable[[NetEvent], None]:
    """Keep every connection's event (for ``--report``); say each refusal on stderr."""

    def heard(event: NetEvent) -> None:
        events.append(event)
        if not event.allowed:
            target = f"{event.host}:{event.port}" if event.host is not None else "a connection"
            line = f"sandvisor exec: network: refused {target} ({event.reason}): {event.detail}\n"
            os.write(2, line.encode(errors="replace"))  # from the proxy's thread: one write

    return heard


def _report(result: RunResult, target: str, network: list[NetEvent]) -> None:
    record: dict[str, object] = {
        **result.termination.to_json(),
        "exit_status": result.exit_status,
        "stdout_dropped": result.stdout_dropped,
        "stderr_dropped": result.stderr_dropped,
        "duration": round(result.duration, 6),
    }
    if network:
        import msgspec

        record["network"] = [msgspec.to_builtins(event) for event in network]
    text = json.dumps(record) + "\n"
    if target == "-":
        sys.stderr.write(text)
    else:
        with open(target, "w") as f:
            f.write(text)


def run(args: argparse.Namespace) -> int:
    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print(
            "sandvisor exec: no program given (usage: sandvisor exec -- PROGRAM ...)",
            file=sys.stderr,
        )
        return 2
    stdin_fd = None
    if args.stdin:
        if os.isatty(0):
            print(
                "sandvisor exec: --stdin refused: stdin is a terminal, and a terminal in the "
                "sandbox could be used to inject input",
                file=sys.stderr,
            )
            return 2
        stdin_fd = 0
    network: list[NetEvent] = []
    try:
        policy = build_policy(args)
        result = run_sandbox(
            policy,
            command,
            timeout=args.timeout,
            stdout_cap=args.stdout_cap,
            stderr_cap=args.stderr_cap,
            stdin_fd=stdin_fd,
            on_stdout=_writer(sys.stdout),
            on_stderr=_writer(sys.stderr),
            on_network=_network_log(network),
        )
    except (SandboxError, ValueError) as exc:
        print(f"sandvisor exec: {exc}", file=sys.stderr)
        return EXIT_SANDBOX_FAILURE
    for name, dropped, cap in (
        ("stdout", result.stdout_dropped, args.stdout_cap),
        ("stderr", result.stderr_dropped, args.stderr_cap),
    ):
        if dropped:
            print(
                f"sandvisor exec: {name} truncated at {cap} bytes ({dropped} dropped)",
                file=sys.stderr,
            )
    if result.reason not in ("exited", "signal"):
        hint = " (run `sandvisor doctor`)" if result.reason == "setup" else ""
        print(f"sandvisor exec: {result.termination.detail}{hint}", file=sys.stderr)
    if args.report:
        _report(result, args.report, network)
    return result.exit_status
