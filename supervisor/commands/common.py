"""Options and conventions shared by the hosting commands (`serve`, `mcp`, `script`,
`tools`, `demo`): the supervisor's options, loading a host's `ScriptedTool`, exit codes,
and one-line errors.

Exit codes (docs/cli.md): 0 done, 1 failed (the line on stderr says why), 2 bad usage,
125 this machine cannot sandbox (run `sandvisor doctor`), 130 interrupted (Ctrl-C; the
running calls were cancelled and every worker closed first). `sandvisor script` exits
with the script's own status instead of 0/1.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from sandbox.cli_exec import add_network_options, network_from, parse_size
from sandbox.errors import SandboxError
from sandbox.policy import LimitsMode, SandboxPolicy
from supervisor.workers.config_file import ConfigError, load_groups
from supervisor.workers.groups import ToolGroup

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_SANDBOX = 125
EXIT_INTERRUPTED = 130


def unavailable_in(exc: BaseException) -> BaseException | None:
    """The `SandboxUnavailable` that ``exc`` is, or that a task group wrapped it in."""
    from sandbox.errors import SandboxUnavailable

    while isinstance(exc, BaseExceptionGroup):
        found = exc.subgroup(SandboxUnavailable)
        if found is None:
            return None
        exc = found.exceptions[0]
    return exc if isinstance(exc, SandboxUnavailable) else None


def fail(command: str, message: str, code: int = EXIT_FAILED) -> int:
    """Print ``sandvisor COMMAND: message`` (one line) on stderr and return ``code``."""
    first = " ".join(str(message).split()) or "failed"
    print(f"sandvisor {command}: {first}", file=sys.stderr)
    return code


def _count(text: str) -> int | None:
    """A limit: a whole number of at least 1, or ``none``."""
    if text.strip().lower() in ("none", "unlimited", "off"):
        return None
    return _positive_int(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < 86400:
        raise argparse.ArgumentTypeError("must be between 0 and 86400 seconds")
    return value


def add_supervisor_options(parser: argparse.ArgumentParser, *, adapters_required: bool) -> None:
    """``--adapters`` and the sandbox and pool options of a `Supervisor`."""
    defaults = SandboxPolicy()
    group = parser.add_argument_group("sandboxed workers")
    add = group.add_argument
    add(
        "--adapters",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="an AdapterRegistry to serve in sandboxed workers (repeatable)"
        + ("" if adapters_required else "; none: no sandboxed tools"),
    )
    add(
        "--pool-size",
        type=_positive_int,
        default=2,
        metavar="N",
        help="workers kept running (default 2)",
    )
    add(
        "--max-in-flight",
        type=_positive_int,
        default=1,
        metavar="N",
        help="calls one worker runs at once (default 1)",
    )
    add(
        "--cancel-grace",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="how long a cancelled call may take to acknowledge before its worker is killed",
    )
    add_network_options(group, "give workers the host's network (off)", "a call")
    add(
        "--memory",
        type=parse_size,
        default=defaults.memory_bytes,
        metavar="SIZE",
        help="memory limit per worker, e.g. 512M, or none (default 512M)",
    )
    add(
        "--pids",
        type=_count,
        default=defaults.pids,
        metavar="N",
        help=f"process limit per worker, or none (default {defaults.pids})",
    )

    add(
        "--per-process-limits",
        action="store_true",
        help="where no cgroup can be had, accept per-process limits (RLIMIT_AS for memory, "
        "the uid's RLIMIT_NPROC for processes; weaker: see docs/sandbox.md) instead of "
        "refusing to start",
    )
    add(
        "--audit-log",
        metavar="FILE",
        help="append one JSON line per sandboxed call to FILE (the call's audit event), "
        "and one per connection of a sandbox through the network proxy",
    )
    add(
        "--config",
        metavar="FILE",
        help="tool groups from a TOML file (docs/groups.md): each with its adapters, "
        "sandbox, network allowlist, secrets and pool; instead of --adapters and the "
        "options above",
    )
    parser.set_defaults(
        one_group_defaults={
            "--adapters": [],
            "--pool-size": 2,
            "--max-in-flight": 1,
            "--network": False,
            "--allow-net": [],
            "--net-host": [],
            "--net-max-bytes": argparse.SUPPRESS,  # absent unless given
            "--net-max-connections": argparse.SUPPRESS,
            "--memory": defaults.memory_bytes,
            "--pids": defaults.pids,
            "--per-process-limits": False,
        }
    )


def policy_from(args: argparse.Namespace) -> SandboxPolicy:
    """The one group's sandbox. Raises `ConfigError` (bad usage: one line, exit 2) for
    a network option that cannot be used, in the words ``sandvisor exec`` uses."""
    limits: LimitsMode = "per-process" if args.per_process_limits else "cgroup"
    try:
        network = network_from(args)
    except SandboxError as exc:
        raise ConfigError(str(exc)) from None
    return SandboxPolicy(network=network, memory_bytes=args.memory, pids=args.pids, limits=limits)


def has_sandboxed_tools(args: argparse.Namespace) -> bool:
    """Whether the options ask for sandboxed workers (``--adapters`` or ``--config``)."""
    return bool(args.adapters or getattr(args, "config", None))


def config_groups(args: argparse.Namespace) -> list[ToolGroup] | None:
    """The groups of ``--config FILE`` (None without it). Raises `ConfigError` (one line:
    the key and what was expected), also when one-group options come with it."""
    if not getattr(args, "config", None):
        return None
    defaults = getattr(args, "one_group_defaults", {})
    given = [flag for flag, value in defaults.items() if getattr(args, _dest(flag), value) != value]
    if given:
        raise ConfigError(
            f"--config names the groups; {', '.join(given)} cannot go with it "
            "(set them in the file)"
        )
    return load_groups(args.config)


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def supervisor_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """`Supervisor` keyword arguments from `add_supervisor_options`' options."""
    groups = config_groups(args)
    kwargs: dict[str, Any] = (
        {"groups": groups}
        if groups is not None
        else {
            "adapters": list(args.adapters),
            "policy": policy_from(args),
            "pool_size": args.pool_size,
            "max_in_flight": args.max_in_flight,
        }
    )
    if args.cancel_grace is not None:
        kwargs["cancel_grace"] = args.cancel_grace
    if args.audit_log:
        kwargs["audit_log"] = args.audit_log
    return kwargs


def add_scripted_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("scripted tools")
    group.add_argument(
        "--scripted",
        metavar="MODULE:ATTR",
        help="the host's ScriptedTool (or ScriptingToolSet, or a function returning one); "
        "its local tools run in this process",
    )
    group.add_argument(
        "--example",
        action="store_true",
        help="use the built-in example (the demo's tools and example adapters)",
    )
    group.add_argument(
        "--name",
        default=None,
        help="the script tool's name (default: shop with --example, "
        "else the ScriptedTool's own, else tools)",
    )


def load_object(spec: str) -> Any:
    """``MODULE:ATTR`` imported in this process (trusted host code); a callable with no
    arguments is called."""
    module_name, colon, attr = spec.partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"{spec!r} is not MODULE:ATTR")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    try:
        value = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name} has no attribute {attr!r}") from None
    if callable(value) and not hasattr(value, "execute"):
        value = value()
    return value


def load_scripted(spec: str) -> Any:
    """The `ScriptedTool` named by ``spec`` (a `ScriptingToolSet` gives its inner one)."""
    from supervisor.scripted import ScriptedTool, ScriptingToolSet

    value = load_object(spec)
    if isinstance(value, ScriptingToolSet):
        value = value.scripted_tool
    if not isinstance(value, ScriptedTool):
        raise ValueError(f"{spec} is a {type(value).__name__}, not a ScriptedTool")
    return value
