"""`SupervisorConfig`: the keyword arguments `Supervisor` always took and a config value
are one and the same; every refusal names its field (no sandbox)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox import SandboxPolicy
from supervisor.ledger import ToolPolicy
from supervisor.workers.config import SupervisorConfig
from supervisor.workers.groups import DEFAULT_GROUP, ToolGroup
from supervisor.workers.supervisor import Supervisor

NEEDS_SANDBOX = False


def test_the_shorthand_makes_one_default_group() -> None:
    config = SupervisorConfig.of(
        ["m:registry"], pool_size=3, max_in_flight=2, tools=[ToolPolicy("t")], acquire_timeout=2
    )
    (group,) = config.groups
    assert group.name == DEFAULT_GROUP and group.adapters == ("m:registry",)
    assert (group.pool_size, group.max_in_flight) == (3, 2)
    assert group.policy == SandboxPolicy() and group.tools == (ToolPolicy("t"),)
    assert config.acquire_timeout == 2 and config.start_timeout == 10.0


def test_the_arguments_and_the_config_are_the_same_supervisor() -> None:
    by_arguments = Supervisor(adapters=["m:registry"], pool_size=2, retry_backoff=0.5)
    config = SupervisorConfig(
        groups=(ToolGroup(DEFAULT_GROUP, adapters=["m:registry"], pool_size=2),),
        retry_backoff=0.5,
    )
    by_config = Supervisor(config=config)
    assert by_arguments.config == by_config.config
    assert by_config.pool_size == 2 and by_config.retry_backoff == 0.5


def test_the_defaults_are_the_documented_ones() -> None:
    config = SupervisorConfig.of(["m:registry"])
    assert (config.acquire_timeout, config.cancel_grace, config.start_timeout) == (30, None, 10)
    assert (config.session_lifetime, config.ping_interval, config.frame_timeout) == (3600, 30, 5)
    assert (config.max_pending, config.retry_backoff, config.reconcile_timeout) == (4096, 0.05, 5)
    assert config.ledger_path is None and config.audit_log is None


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"acquire_timeout": 0}, "acquire_timeout must be a positive"),
        ({"start_timeout": True}, "start_timeout must be a number of seconds"),
        ({"ping_interval": float("inf")}, "ping_interval must be a positive, finite"),
        ({"cancel_grace": -1}, "cancel_grace must be a number of seconds >= 0"),
        ({"retry_backoff": -0.1}, "retry_backoff must be a number of seconds >= 0"),
    ],
)
def test_refusals_name_the_field(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        SupervisorConfig.of(["m:registry"], **kwargs)


def test_groups_and_the_shorthand_are_not_mixed() -> None:
    group = ToolGroup("web", adapters=["m:registry"])
    with pytest.raises(ValueError, match=r"not both \(adapters, pool_size belong"):
        Supervisor(adapters=["x:y"], pool_size=2, groups=[group])
    with pytest.raises(ValueError, match="config=SupervisorConfig"):
        Supervisor(["m:registry"], config=SupervisorConfig(groups=(group,)))
    with pytest.raises(TypeError, match="unexpected arguments: pool_sizes"):
        Supervisor(adapters=["m:registry"], pool_sizes=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="config must be a SupervisorConfig"):
        Supervisor(config={"groups": ()})  # type: ignore[arg-type]
