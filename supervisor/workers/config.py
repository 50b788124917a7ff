"""`SupervisorConfig`: everything a `Supervisor` is told, in one checked value.

Its tool groups (`ToolGroup`: what runs, where, how many, with which secrets and limits)
and the options every group shares (the wait for a worker, time limits, the ledger, the
audit). `SupervisorConfig.of` takes the keyword arguments `Supervisor` has always taken
(the one-group shorthand: ``adapters=``, ``policy=``, ``pool_size=`` ... make the group
``default``), so ``Supervisor(adapters=[...], pool_size=2)`` and
``Supervisor(config=SupervisorConfig(groups=(ToolGroup(...),)))`` are the same thing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec

from sandbox import SandboxPolicy
from supervisor.ledger import ToolPolicy
from supervisor.workers.groups import DEFAULT_GROUP, ToolGroup, check_groups
from supervisor.workers.worker_journal import DEFAULT_LIMIT as DEFAULT_JOURNAL_LIMIT

if TYPE_CHECKING:
    from sandbox.netproxy.events import NetEvent
    from supervisor.workers.call_audit import CallEvent


class SupervisorOptions(TypedDict, total=False):
    """The keyword arguments of `Supervisor` besides the first five (see the docs)."""

    mcp_server: Sequence[str] | None
    tool_prefix: str
    tools: Sequence[ToolPolicy]
    pool_min: int | None
    max_calls_per_worker: int | None
    redactors: Mapping[str, Callable[[str], str]] | None
    groups: Sequence[ToolGroup]
    acquire_timeout: float
    cancel_grace: float | None
    start_timeout: float
    session_lifetime: float | None
    ping_interval: float | None
    frame_timeout: float | None
    max_pending: int
    ledger_path: str | os.PathLike[str] | None
    audit_log: str | os.PathLike[str] | None
    on_audit: Callable[[CallEvent], None] | None
    on_network: Callable[[NetEvent], None] | None
    retry_backoff: float
    reconcile_timeout: float
    journal_dir: str | os.PathLike[str] | None
    journal_limit: int
    reconcile_on_start: bool


#: The arguments that describe the one group of the shorthand (the rest are shared).
_ONE_GROUP = (
    "adapters",
    "policy",
    "pool_size",
    "max_in_flight",
    "worker_argv",
    "mcp_server",
    "tool_prefix",
    "tools",
    "pool_min",
    "max_calls_per_worker",
    "redactors",
)


class SupervisorConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A supervisor's groups and shared options, checked when built (each refusal is a
    `ValueError` naming the field). Times are seconds; the defaults are docs/supervisor.md's.

    ``cancel_grace`` None: each group's own, else its kind's defaults (0.015 s after a
    deadline and 0.25 s after the caller's cancel; an MCP server's bridge 0.25 s for
    both); given, it is the grace of both kinds of cancel.
    """

    groups: tuple[ToolGroup, ...]
    acquire_timeout: float = 30.0
    cancel_grace: float | None = None
    start_timeout: float = 10.0
    session_lifetime: float | None = 3600.0
    ping_interval: float | None = 30.0
    frame_timeout: float | None = 5.0
    max_pending: int = 4096
    ledger_path: str | os.PathLike[str] | None = None
    audit_log: str | os.PathLike[str] | None = None
    on_audit: Callable[[CallEvent], None] | None = None
    on_network: Callable[[NetEvent], None] | None = None
    retry_backoff: float = 0.05
    reconcile_timeout: float = 5.0
    #: The workers' journals of effectful tools: None puts them beside a durable ledger
    #: (``LEDGER.workers``), else in a temporary directory.
    journal_dir: str | os.PathLike[str] | None = None
    journal_limit: int = DEFAULT_JOURNAL_LIMIT
    reconcile_on_start: bool = True

    def __post_init__(self) -> None:
        check_groups(self.groups)
        for name in ("acquire_timeout", "start_timeout", "reconcile_timeout"):
            check_seconds(name, getattr(self, name))
        for name in ("session_lifetime", "ping_interval", "frame_timeout"):
            value = getattr(self, name)
            if value is not None:
                check_seconds(name, value)
        grace = self.cancel_grace
        if grace is not None and not (
            isinstance(grace, int | float) and not isinstance(grace, bool) and 0 <= grace < math.inf
        ):
            raise ValueError("cancel_grace must be a number of seconds >= 0")
        backoff = self.retry_backoff
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) or not backoff >= 0:
            raise ValueError("retry_backoff must be a number of seconds >= 0")

    @classmethod
    def of(
        cls,
        adapters: Sequence[str] = (),
        policy: SandboxPolicy | None = None,
        pool_size: int = 1,
        max_in_flight: int = 1,
        worker_argv: Sequence[str] | None = None,
        **options: Any,
    ) -> SupervisorConfig:
        """The config of `Supervisor`'s keyword arguments: ``groups=[...]``, or the
        one-group shorthand (a group named ``default``), plus the shared options."""
        one_group: dict[str, Any] = {
            "adapters": adapters,
            "policy": policy,
            "pool_size": pool_size,
            "max_in_flight": max_in_flight,
            "worker_argv": worker_argv,
        }
        for name in _ONE_GROUP[5:]:
            if name in options:
                one_group[name] = options.pop(name)
        unknown = set(options) - set(cls.__struct_fields__)
        if unknown:
            raise TypeError(f"Supervisor got unexpected arguments: {', '.join(sorted(unknown))}")
        groups = options.pop("groups", ())
        if groups:
            given = [name for name in _ONE_GROUP if _given(name, one_group.get(name))]
            if given:
                raise ValueError(
                    f"give groups=[...] or the one-group arguments, not both ({', '.join(given)} "
                    "belong in a ToolGroup)"
                )
        else:
            policy = one_group.pop("policy")
            redactors = one_group.pop("redactors", None)
            groups = [
                ToolGroup(
                    DEFAULT_GROUP,
                    policy=policy if policy is not None else SandboxPolicy(),
                    redactors=redactors or {},
                    **one_group,
                )
            ]
        return cls(groups=tuple(groups), **options)


def _given(name: str, value: Any) -> bool:
    """Whether a one-group argument differs from its default."""
    if name == "pool_size" or name == "max_in_flight":
        return bool(value != 1)
    if name in ("policy", "worker_argv", "mcp_server", "pool_min", "max_calls_per_worker"):
        return value is not None
    return bool(value)


def check_seconds(name: str, value: object) -> None:
    """A positive, finite number of seconds, or a `ValueError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}")
    if not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive, finite number of seconds")
