"""`ToolGroup`: tools that share a sandbox policy, a pool, and secrets; nothing else.

One `Supervisor` serves several groups. A group says what runs (adapter registries for
``python -m worker_runtime``, or a program that speaks the protocol, with its tools'
policies), where (its `SandboxPolicy`: binds, network allowlist, limits), how many (its
pool), what it holds (its secrets) and how its tools are bounded (`ToolPolicy`
overrides, stream redactors). The supervisor routes each call to its tool's group; the
workers of two groups never share a sandbox, a cgroup, a pool, a proxy endpoint or a
secret. A group is configuration only: the running part is `supervisor.workers.group`.

Exactly one of ``adapters``, ``worker_argv`` and ``mcp_server`` (a third-party MCP
server, run behind sandvisor's bridge inside the group's sandbox) says what runs.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sandbox import SandboxPolicy
from supervisor.ledger import ToolPolicy
from supervisor.workers.secrets import Delivery, SecretError, SecretSpec, check_names
from worker_runtime.protocol.limits import MAX_SESSION_IDS, is_id

#: The group the one-group arguments of `Supervisor` make.
DEFAULT_GROUP = "default"
_GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
#: What a per-tool override may change (anything else of a `ToolPolicy` is the tool's).
OVERRIDABLE = frozenset(
    {"max_calls", "max_attempts", "max_input_bytes", "max_output_bytes", "deadline", "stream"}
)

Redactor = Callable[[str], str]


def id_budget(max_in_flight: int) -> int:
    """Calls one session can take: every call in flight keeps an id free for its cancel
    (a rid and a cid per call)."""
    return (MAX_SESSION_IDS - 2 * max_in_flight) // 2


@dataclass(frozen=True)
class ToolGroup:
    """One group's configuration, validated when it is built (see the module)."""

    name: str
    adapters: Sequence[str] = ()
    worker_argv: Sequence[str] | None = None
    #: A third-party MCP server's command, run behind sandvisor's bridge in the sandbox.
    mcp_server: Sequence[str] | None = None
    #: Prefix of an MCP server's tool names (an id).
    tool_prefix: str = ""
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    pool_size: int = 1
    pool_min: int | None = None
    max_in_flight: int = 1
    max_calls_per_worker: int | None = None
    #: Whole policies (for a worker program, the only way to name its tools).
    tools: Sequence[ToolPolicy] = ()
    #: Per tool, only the fields named change: ``{"web.get": {"max_attempts": 2}}``.
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: NAME -> a value or `Secret.from_env`; delivered as variables or files.
    secrets: Mapping[str, SecretSpec] = field(default_factory=dict, repr=False)
    secrets_as: Delivery = "env"
    #: Per tool: the trusted function every chunk passes before anyone sees it.
    redactors: Mapping[str, Redactor] = field(default_factory=dict)
    #: How long a cancelled call may take to acknowledge; None: the supervisor's (an MCP
    #: server's group: `MCP_CANCEL_GRACE`, its bridge answers for it at once).
    cancel_grace: float | None = None

    def __post_init__(self) -> None:
        def bad(message: str) -> ValueError:
            return ValueError(f"group {self.name!r}: {message}")

        if not isinstance(self.name, str) or not _GROUP_NAME.match(self.name):
            raise ValueError(f"group name {self.name!r} must be 1..64 characters of [a-z0-9._-]")
        adapters = [self.adapters] if isinstance(self.adapters, str) else list(self.adapters)
        if isinstance(self.mcp_server, str):
            raise bad("mcp_server is the server's argv, a list of strings")
        kinds = (bool(adapters), self.worker_argv is not None, self.mcp_server is not None)
        if sum(kinds) != 1:
            raise bad("give exactly one of adapters=[...], worker_argv=[...] or mcp_server=[...]")
        if self.tool_prefix and (self.mcp_server is None or not is_id(self.tool_prefix)):
            raise bad("tool_prefix is for mcp_server, and must be an id ([a-z0-9._-])")
        grace = self.cancel_grace
        if grace is not None and not (isinstance(grace, int | float) and 0 <= grace < math.inf):
            raise bad("cancel_grace must be a number of seconds >= 0")
        if self.worker_argv is not None and not self.tools:
            raise bad("worker_argv needs tools=[ToolPolicy(...)] for what it serves")
        if not isinstance(self.policy, SandboxPolicy):
            raise bad("policy must be a SandboxPolicy")
        if not isinstance(self.pool_size, int) or self.pool_size < 1:
            raise bad("pool_size must be an int >= 1")
        if self.pool_min is not None and not 0 <= self.pool_min <= self.pool_size:
            raise bad("pool_min must be between 0 and pool_size")
        if not isinstance(self.max_in_flight, int) or self.max_in_flight < 1:
            raise bad("max_in_flight must be an int >= 1")
        budget = id_budget(self.max_in_flight)
        per_worker = budget if self.max_calls_per_worker is None else self.max_calls_per_worker
        if not isinstance(per_worker, int) or not 1 <= per_worker <= budget:
            raise bad(f"max_calls_per_worker must be in 1..{budget}")
        for tool, changes in self.overrides.items():
            unknown = set(changes) - OVERRIDABLE
            if unknown:
                raise bad(
                    f"tool {tool!r}: {', '.join(sorted(unknown))} cannot be overridden "
                    f"(only {', '.join(sorted(OVERRIDABLE))})"
                )
        for tool, redactor in self.redactors.items():
            if not callable(redactor):
                raise bad(f"the redactor of tool {tool!r} is not callable")
        try:
            check_names(self.secrets)
        except SecretError as exc:
            raise bad(str(exc)) from None
        if self.secrets_as not in ("env", "file"):
            raise bad(f"secrets_as must be 'env' or 'file', not {self.secrets_as!r}")
        set_ = object.__setattr__
        set_(self, "adapters", tuple(adapters))
        set_(self, "worker_argv", None if self.worker_argv is None else tuple(self.worker_argv))
        set_(self, "mcp_server", None if self.mcp_server is None else tuple(self.mcp_server))
        set_(self, "pool_min", self.pool_size if self.pool_min is None else self.pool_min)
        set_(self, "max_calls_per_worker", per_worker)
        set_(self, "tools", tuple(self.tools))
        set_(self, "overrides", _frozen({k: _frozen(v) for k, v in self.overrides.items()}))
        set_(self, "secrets", _frozen(self.secrets))
        set_(self, "redactors", _frozen(self.redactors))

    @property
    def calls_per_worker(self) -> int:
        assert self.max_calls_per_worker is not None  # filled in at construction
        return self.max_calls_per_worker


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


def check_groups(groups: Iterable[ToolGroup]) -> list[ToolGroup]:
    """The groups, each a `ToolGroup`, their names unique."""
    checked = list(groups)
    names = set()
    for group in checked:
        if not isinstance(group, ToolGroup):
            raise TypeError(f"groups must be ToolGroup values, not {type(group).__name__}")
        if group.name in names:
            raise ValueError(f"two groups are named {group.name!r}")
        names.add(group.name)
    if not checked:
        raise ValueError("no groups: give adapters=[...], worker_argv=[...] or groups=[...]")
    return checked


def apply_overrides(
    policies: dict[str, ToolPolicy], overrides: Mapping[str, Mapping[str, Any]], group: str
) -> dict[str, ToolPolicy]:
    """Each override changes the fields it names and nothing else."""
    for tool, changes in overrides.items():
        policy = policies.get(tool)
        if policy is None:
            raise ValueError(f"group {group!r}: tool {tool!r} is overridden but not served")
        policies[tool] = dataclasses.replace(policy, **changes)
    return policies


def route(groups: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """tool -> group; a tool served by two groups is refused (a call must have one home)."""
    home: dict[str, str] = {}
    for group, tools in groups.items():
        for tool in tools:
            other = home.setdefault(tool, group)
            if other != group:
                raise ValueError(f"tool {tool!r} is served by two groups: {other!r} and {group!r}")
    return home
