"""`ToolGroup` as configuration: what it accepts, what it refuses and how it says so,
routing, and overrides that change only what they name (no sandbox)."""

from __future__ import annotations

import pytest

from sandbox import SandboxPolicy
from supervisor.ledger import StreamPolicy, ToolPolicy
from supervisor.workers.groups import ToolGroup, apply_overrides, check_groups, id_budget, route
from supervisor.workers.secrets import Secret
from supervisor.workers.supervisor import Supervisor

NEEDS_SANDBOX = False


def test_a_group_fills_in_its_defaults() -> None:
    group = ToolGroup("web", adapters="mod:registry", pool_size=3)
    assert group.adapters == ("mod:registry",) and group.worker_argv is None
    assert group.pool_min == 3 and group.calls_per_worker == id_budget(1)
    assert group.policy == SandboxPolicy() and group.secrets_as == "env"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"name": "Bad Name"}, "group name 'Bad Name'"),
        ({"adapters": ()}, "give exactly one of adapters"),
        ({"worker_argv": ["/bin/w"]}, "give exactly one of adapters"),
        ({"pool_size": 0}, "pool_size must be an int >= 1"),
        ({"pool_min": 5}, "pool_min must be between 0 and pool_size"),
        ({"max_in_flight": 0}, "max_in_flight must be an int >= 1"),
        ({"max_calls_per_worker": 10**6}, "max_calls_per_worker must be in 1.."),
        ({"overrides": {"t": {"format": "json"}}}, "tool 't': format cannot be overridden"),
        ({"redactors": {"t": "not callable"}}, "the redactor of tool 't' is not callable"),
        ({"secrets": {"1BAD": "x" * 10}}, "secret name '1BAD'"),
        ({"secrets": {"OK": 42}}, "secret OK: expected a string or a Secret"),
        ({"secrets_as": "socket"}, "secrets_as must be 'env' or 'file'"),
        ({"policy": "open"}, "policy must be a SandboxPolicy"),
        ({"mcp_server": "npx server"}, "mcp_server is the server's argv"),
        ({"mcp_server": ["npx", "server"]}, "give exactly one of adapters=.*mcp_server"),
        ({"tool_prefix": "fs"}, "tool_prefix is for mcp_server"),
        ({"cancel_grace": -1}, "cancel_grace must be a number of seconds >= 0"),
    ],
)
def test_bad_groups_say_what_is_wrong(kwargs: dict[str, object], words: str) -> None:
    base: dict[str, object] = {"name": "web", "adapters": ["mod:registry"]}
    if "worker_argv" in kwargs:
        base["tools"] = [ToolPolicy("t")]
    base.update(kwargs)
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        ToolGroup(**base)  # type: ignore[arg-type]


def test_secrets_never_show_in_a_repr() -> None:
    group = ToolGroup("web", adapters=["m:r"], secrets={"TOKEN": "hunter2-hunter2"})
    assert "hunter2" not in repr(group)
    assert "hunter2" not in repr(Secret.of("hunter2-hunter2"))
    assert repr(Secret.from_env("GH_TOKEN")) == "Secret(env='GH_TOKEN')"


def test_groups_have_unique_names_and_a_tool_one_home() -> None:
    one, two = ToolGroup("a", adapters=["m:r"]), ToolGroup("a", adapters=["m:s"])
    with pytest.raises(ValueError, match="two groups are named 'a'"):
        check_groups([one, two])
    with pytest.raises(ValueError, match="no groups"):
        check_groups([])
    assert route({"a": ["x", "y"], "b": ["z"]}) == {"x": "a", "y": "a", "z": "b"}
    with pytest.raises(ValueError, match="tool 'y' is served by two groups: 'a' and 'b'"):
        route({"a": ["x", "y"], "b": ["y"]})


def test_an_override_changes_what_it_names_and_nothing_else() -> None:
    described = ToolPolicy("t", max_calls=100, max_attempts=1, stream=StreamPolicy())
    changed = apply_overrides({"t": described}, {"t": {"max_attempts": 3}}, "g")["t"]
    assert changed.max_attempts == 3
    assert (changed.max_calls, changed.stream, changed.max_input_bytes) == (
        100,
        StreamPolicy(),
        described.max_input_bytes,
    )
    with pytest.raises(ValueError, match="tool 'u' is overridden but not served"):
        apply_overrides({"t": described}, {"u": {"max_attempts": 2}}, "g")


def test_groups_or_the_one_group_arguments_not_both() -> None:
    with pytest.raises(ValueError, match=r"not both \(adapters, pool_size belong in a ToolGroup"):
        Supervisor(adapters=["m:r"], pool_size=2, groups=[ToolGroup("g", adapters=["m:r"])])
    sup = Supervisor(adapters=["m:r"], pool_size=2)
    (group,) = sup.groups.values()
    assert (group.name, group.adapters, group.pool_size) == ("default", ("m:r",), 2)
    with pytest.raises(ValueError, match="group 'default': give exactly one of adapters"):
        Supervisor()
